"""What an invoice or a credit note says, line by line (standard library only).

Orders describe what they sell as ``InvoiceLine`` values when the ledger issues a receipt
or a credit note; the ledger copies them into its own rows (``receipt_lines``,
``credit_note_lines``), so its documents never read another domain's tables. Every line
carries its own total in integer cents, and a document's lines must add up to its ledger
entry exactly (``check_lines``), or nothing is issued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum


class CreditReason(StrEnum):
    """Why money went back to a customer's balance (printed on the credit note)."""

    missed_delivery = "missed_delivery"  # the promised date passed; cancelled, full refund
    cancelled = "cancelled"  # cancelled by the customer before delivery, full refund
    lease_ended_early = "lease_ended_early"  # ops ended the lease: unused days pro rata
    other = "other"


class LineError(ValueError):
    """A programming error: a line or a set of lines that does not add up."""


@dataclass(frozen=True)
class InvoiceLine:
    """One line: ``quantity`` nodes of SKU ``sku`` (``description``: its name as sold) at
    ``unit_cents`` per node-month before ``discount_cents`` (a quote's discount on the whole
    line), for the service period ``period_start``..``period_end`` (None: not started).

    ``days``/``days_of``: a pro-rata line (``days`` of a ``days_of``-day month, rounded down
    to the cent, the rule ``postings.unused_days_credit`` applies); None: a whole month."""

    sku: str
    description: str
    quantity: int
    unit_cents: int
    discount_cents: int = 0
    period_start: date | None = None
    period_end: date | None = None
    days: int | None = None
    days_of: int | None = None

    def __post_init__(self) -> None:
        for name in ("quantity", "unit_cents", "discount_cents"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise LineError(f"{name} is a non-negative integer")
        if self.quantity < 1:
            raise LineError("a line has at least one unit")
        if self.discount_cents > self.quantity * self.unit_cents:
            raise LineError("a discount never exceeds the line")
        if (self.days is None) != (self.days_of is None):
            raise LineError("a pro-rata line names its days and the month's days")
        if (
            self.days is not None
            and self.days_of is not None
            and (not 0 <= self.days <= self.days_of or self.days_of < 1)
        ):
            raise LineError("pro-rata days lie within the month")

    @property
    def month_cents(self) -> int:
        """The whole month of the line, after its discount."""
        return self.quantity * self.unit_cents - self.discount_cents

    @property
    def total_cents(self) -> int:
        if self.days is None or self.days_of is None:
            return self.month_cents
        return self.month_cents * self.days // self.days_of


def lines_total(lines: Sequence[InvoiceLine]) -> int:
    return sum(line.total_cents for line in lines)


def check_lines(lines: Sequence[InvoiceLine], amount_cents: int) -> None:
    """Lines given for an entry add up to its amount exactly (none given: nothing to check)."""
    if lines and lines_total(lines) != amount_cents:
        raise LineError(
            f"the lines add up to {lines_total(lines)} cents, the entry is {amount_cents}"
        )


@dataclass(frozen=True)
class Seller:
    """Who issues the documents (from settings): legal name and postal address in both
    languages, and the tax id. Both addresses print on every document, whatever its
    language, so a finance team reading either copy finds the registered wording."""

    name: str
    name_zh: str
    address_en: str
    address_zh: str
    tax_id: str

    def lines(self, lang: str) -> list[str]:
        """The seller block: the reader's language first, the other one after it."""
        first, second = (
            ((self.name_zh, self.address_zh), (self.name, self.address_en))
            if lang == "zh_CN"
            else ((self.name, self.address_en), (self.name_zh, self.address_zh))
        )
        out: list[str] = []
        for name, address in (first, second):
            if name:
                out.append(name)
            out.extend(x for x in address.splitlines() if x.strip())
        return out
