"""Pure quote rules: discount limits, totals in integer cents, validity and status.

Standard library only. Every amount is integer US cents; discounts are basis points
(1 % = 100 bp) so no floating point touches money.

Two kinds of quote:

- ``node``: ``quantity`` 8-GPU nodes for ``months`` months, priced per node per month.
- ``rack``: a GB300 NVL72 term of 12–36 months priced per GPU per month. ``quantity``
  counts GPUs and must be whole racks (multiples of 72): the rack is one NVLink domain
  of 72 GPUs, sold and delivered as a unit; part of a rack cannot be handed to another
  customer without breaking that domain. Rack quotes are never self-serve: accepting
  one means "sales will contact you to sign the term contract".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.errors import N_
from app.numbers import NumberError, parse_int

SALES_DISCOUNT_LIMIT_BP = 1000  # 10 %: sales may give this much on their own
MAX_DISCOUNT_BP = 5000  # 50 %: nobody quotes below half the list price
DEFAULT_VALID_DAYS = 7
MAX_VALID_DAYS = 30
MAX_NODES = SELF_SERVE_MAX_NODES  # a node quote checks out through /deploy
MIN_NODE_MONTHS, MAX_NODE_MONTHS = 1, 36
RACK_GPUS = 72
MAX_RACKS = 16
MIN_RACK_MONTHS, MAX_RACK_MONTHS = 12, 36


class QuoteKind(StrEnum):
    node = "node"
    rack = "rack"


class QuoteStatus(StrEnum):
    draft = "draft"
    pending_approval = "pending_approval"
    sent = "sent"
    viewed = "viewed"
    accepted = "accepted"
    expired = "expired"
    withdrawn = "withdrawn"


STATUS_LABELS: dict[str, str] = {
    QuoteStatus.draft: N_("Draft"),
    QuoteStatus.pending_approval: N_("Pending approval"),
    QuoteStatus.sent: N_("Sent"),
    QuoteStatus.viewed: N_("Viewed"),
    QuoteStatus.accepted: N_("Accepted"),
    QuoteStatus.expired: N_("Expired"),
    QuoteStatus.withdrawn: N_("Withdrawn"),
}

# Shared with the prospect (the link works) — sent and viewed can still be accepted.
OPEN_STATUSES = (QuoteStatus.sent, QuoteStatus.viewed)
EDITABLE_STATUSES = (QuoteStatus.draft, QuoteStatus.pending_approval)


@dataclass(frozen=True)
class Totals:
    list_unit_cents: int  # per node per month, or per GPU per month for racks
    discount_bp: int
    unit_cents: int  # after discount, same unit as list_unit_cents
    monthly_cents: int  # all nodes / GPUs, one month
    total_cents: int  # the whole term
    list_total_cents: int  # the whole term at list price
    saving_cents: int


def format_discount(bp: int) -> str:
    """1250 → '12.5', 1000 → '10', 0 → '0'."""
    whole, frac = divmod(bp, 100)
    return f"{whole}.{frac:02d}".rstrip("0").rstrip(".") if frac else str(whole)


def needs_approval(discount_bp: int) -> bool:
    return discount_bp > SALES_DISCOUNT_LIMIT_BP


def discounted(list_unit_cents: int, discount_bp: int) -> int:
    """Unit price after the discount, rounded half up to the cent (integer arithmetic)."""
    if list_unit_cents < 0 or not 0 <= discount_bp <= 10000:
        raise ValueError("bad price or discount")
    num = list_unit_cents * (10000 - discount_bp)
    return (num + 5000) // 10000


def totals(list_unit_cents: int, discount_bp: int, quantity: int, months: int) -> Totals:
    unit = discounted(list_unit_cents, discount_bp)
    monthly = unit * quantity
    total = monthly * months
    list_total = list_unit_cents * quantity * months
    return Totals(
        list_unit_cents, discount_bp, unit, monthly, total, list_total, list_total - total
    )


def check_terms(kind: str, quantity: int, months: int) -> dict[str, str]:
    """Field → message (msgids) for out-of-range quantities and terms; empty when fine."""
    errors: dict[str, str] = {}
    if kind == QuoteKind.rack:
        if quantity < RACK_GPUS or quantity % RACK_GPUS or quantity > RACK_GPUS * MAX_RACKS:
            errors["quantity"] = N_(
                "A GB300 NVL72 term is sold in whole racks: 72, 144, 216 … GPUs (at most 16 racks)."
            )
        if not MIN_RACK_MONTHS <= months <= MAX_RACK_MONTHS:
            errors["months"] = N_("A GB300 NVL72 term runs 12 to 36 months.")
    else:
        if not 1 <= quantity <= MAX_NODES:
            errors["quantity"] = N_(
                "Quote between 1 and 16 nodes; a larger cluster is a term contract with sales."
            )
        if not MIN_NODE_MONTHS <= months <= MAX_NODE_MONTHS:
            errors["months"] = N_("Quote between 1 and 36 months.")
    return errors


def expires_at(sent_at: datetime, valid_days: int) -> datetime:
    return sent_at + timedelta(days=valid_days)


def effective_status(status: str, expires: datetime | None, now: datetime) -> str:
    """A shared, not yet accepted quote is expired once now is past its expiry."""
    if status in OPEN_STATUSES and expires is not None and now > expires:
        return QuoteStatus.expired.value
    return status


# The rules of a node quote, stated word for word on the share page, the PDF and checkout
# (the same msgid everywhere) and enforced when an order from the quote is paid
# (``app.orders.checkout``: a withdrawn or expired quote's order is repriced to the list
# price before anything is charged).
NODE_QUOTE_RULES = N_(
    "The quoted price holds for an order paid before the quote expires or is withdrawn; after that, checkout charges the list price. The term is the planned length, not a commitment: the lease is billed monthly at the quoted price and can be cancelled free in any month."
)


def honoured(status: str, expires: datetime | None, now: datetime) -> bool:
    """Is the quoted price good right now (shared or accepted, and not past expiry)?"""
    if status not in (*OPEN_STATUSES, QuoteStatus.accepted):
        return False
    return expires is not None and now <= expires


def reference(quote_id: int) -> str:
    """The human reference printed on quotes: Q-000042."""
    return f"Q-{quote_id:06d}"


def parse_reference(text: str) -> int | None:
    """'Q-000042' / 'q42' / '#42' / '４２' → 42; None when it is not a quote reference."""
    t = text.strip().upper()
    if t.startswith("Q-"):
        t = t[2:]
    elif t.startswith("Q"):
        t = t[1:]
    try:
        return parse_int(t.lstrip("#"), min_value=1, max_value=10**9 - 1)
    except NumberError:
        return None
