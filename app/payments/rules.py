"""The BTCPay-style invoice lifecycle as a pure function (standard library only).

Statuses: ``New`` → ``Processing`` (paid in full, not yet confirmed) → ``Settled``; or
``Expired`` (rate lock over without full payment) / ``Invalid`` (paid only after the
monitoring window). Exceptions: ``PaidPartial``, ``PaidOver``, ``PaidLate``.

What each path credits (once, at the invoice's locked rate, when the invoice is *final*):

- paid in full on time, confirmed → ``Settled``: the invoice amount;
- overpaid → ``Settled``/``PaidOver``: the amount plus the excess converted (rounded down);
- paid (in full or over) after the rate lock but inside the 24 h monitoring window →
  ``Settled``/``PaidLate``: the same as above, at the locked rate;
- partly paid → ``Expired``/``PaidPartial`` once the rate lock ends; BTCPay keeps watching,
  so a late payment can still complete it. When the monitoring window closes, what was
  received and confirmed is credited (converted, rounded down);
- nothing paid → ``Expired``; final (nothing credited) when the window closes;
- a payment seen only after the monitoring window → ``Invalid`` if nothing was credited,
  flagged for staff review in any case; never credited automatically;
- paid in full but not confirmed when the monitoring window closes → stays ``Processing``,
  flagged for staff review (credited when a later re-read finds it confirmed).
Once final, an invoice never changes its credit; anything arriving later is flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

RATE_LOCK = timedelta(minutes=15)
MONITORING_WINDOW = timedelta(hours=24)


class Status(StrEnum):
    new = "New"
    processing = "Processing"
    settled = "Settled"
    expired = "Expired"
    invalid = "Invalid"


class Exception_(StrEnum):
    none = ""
    paid_partial = "PaidPartial"
    paid_over = "PaidOver"
    paid_late = "PaidLate"


@dataclass(frozen=True)
class InvoiceRequest:
    """What a provider is asked to invoice: US$ ``amount_cents`` paid in ``currency``;
    ``reference`` names the customer on the provider's side."""

    amount_cents: int
    currency: str
    now: datetime
    reference: str


@dataclass(frozen=True)
class Payment:
    units: int  # smallest unit of the invoice currency
    seen_at: datetime
    confirmed: bool


@dataclass(frozen=True)
class Evaluation:
    status: Status
    exception: Exception_
    received_units: int  # seen inside the monitoring window
    confirmed_units: int
    final: bool
    credit_units: int  # what to convert and credit when final (0: nothing)
    needs_review: bool  # payments outside the window


def evaluate(
    *,
    due_units: int,
    payments: Sequence[Payment],
    expires_at: datetime,
    monitoring_until: datetime,
    now: datetime,
) -> Evaluation:
    inside = [p for p in payments if p.seen_at <= monitoring_until]
    outside = [p for p in payments if p.seen_at > monitoring_until]
    received = sum(p.units for p in inside)
    confirmed = sum(p.units for p in inside if p.confirmed)
    on_time = sum(p.units for p in inside if p.seen_at < expires_at)
    review = bool(outside)
    if received >= due_units > 0:
        exc = (
            Exception_.paid_late
            if on_time < due_units
            else (Exception_.paid_over if received > due_units else Exception_.none)
        )
        if confirmed == received:
            return Evaluation(Status.settled, exc, received, confirmed, True, received, review)
        # Paid in full but still unconfirmed when the monitoring window closes: staff look
        # at it (the worker stops re-reading it each cycle; a notification still re-reads).
        stuck = now >= monitoring_until
        return Evaluation(Status.processing, exc, received, confirmed, False, 0, review or stuck)
    if now < expires_at:
        exc = Exception_.paid_partial if received else Exception_.none
        return Evaluation(Status.new, exc, received, confirmed, False, 0, review)
    if now < monitoring_until:
        exc = Exception_.paid_partial if received else Exception_.none
        return Evaluation(Status.expired, exc, received, confirmed, False, 0, review)
    if received:
        return Evaluation(
            Status.expired, Exception_.paid_partial, received, confirmed, True, confirmed, review
        )
    if outside:
        return Evaluation(Status.invalid, Exception_.paid_late, 0, 0, True, 0, True)
    return Evaluation(Status.expired, Exception_.none, 0, 0, True, 0, False)


def is_same_site_path(target: str | None) -> bool:
    """A local path we may link back to (no scheme, no host, no protocol-relative //)."""
    if not target or len(target) > 500 or not target.startswith("/"):
        return False
    return not (target.startswith("//") or "\\" in target or any(ord(c) < 32 for c in target))
