"""What receipts (invoices) and credit notes say, shared by their HTML pages and PDFs:
each line in the reader's words, the seller's block, the billing block. The PDF layout of
both documents is ``receipt_pdf``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Protocol

from babel.dates import format_date

from app.i18n import babel_locale, labelled
from app.ledger.invoicing import Seller
from app.money import format_cents


class LineRow(Protocol):
    """A stored line (``ReceiptLine`` or ``CreditNoteLine``)."""

    description: str
    sku: str
    quantity: int
    unit_cents: int
    discount_cents: int
    period_start: date | None
    period_end: date | None
    days: int | None
    days_of: int | None
    total_cents: int


class Billed(Protocol):
    bill_email: str
    bill_name: str
    bill_company: str
    bill_address: str
    bill_tax_id: str


@dataclass(frozen=True)
class LineView:
    item: str
    quantity: str
    unit: str
    discount: str
    total: str
    period: str  # the service period, or what a pro-rata line covers


def day_text(d: date | None, lang: str) -> str:
    return "" if d is None else format_date(d, format="medium", locale=babel_locale(lang))


def line_views(
    lines: Sequence[LineRow], gettext: Callable[[str], str], lang: str
) -> list[LineView]:
    _ = gettext
    money_locale = "zh_CN" if lang == "zh_CN" else "en"
    out = []
    for line in lines:
        if line.period_start is None:
            period = _("Service period: the first month, from delivery")
        else:
            period = _("Service period: {start} – {end}").format(
                start=day_text(line.period_start, lang), end=day_text(line.period_end, lang)
            )
        if line.days is not None:
            period += _(" (pro rata: {days} of {days_of} days)").format(
                days=line.days, days_of=line.days_of
            )
        item = line.description or _("Credited to your prepaid balance")
        out.append(
            LineView(
                item=item,
                quantity=str(line.quantity) if line.sku else "",
                unit=format_cents(line.unit_cents, money_locale) if line.sku else "",
                discount=(
                    "−" + format_cents(line.discount_cents, money_locale)
                    if line.discount_cents
                    else ""
                ),
                total=format_cents(line.total_cents, money_locale),
                period=period if line.sku else "",
            )
        )
    return out


def seller_lines(seller: Seller, gettext: Callable[[str], str], lang: str) -> list[str]:
    lines = seller.lines(lang)
    if seller.tax_id:
        lines.append(labelled(gettext("Tax ID"), seller.tax_id, lang))
    return lines


def billing_lines(doc: Billed, gettext: Callable[[str], str], lang: str) -> list[str]:
    lines = [x for x in (doc.bill_company, doc.bill_name) if x]
    if doc.bill_address:
        lines.extend(doc.bill_address.splitlines())
    if doc.bill_tax_id:
        lines.append(labelled(gettext("Tax ID"), doc.bill_tax_id, lang))
    lines.append(doc.bill_email)
    return lines
