"""The ledger's pure rules (standard library only): accounts, legs, zero-sum, conversion.

Sign convention: a posting's ``amount_cents`` is added to its account's balance. A
customer's *available* account holds spendable money (never below zero); the customer's
*held* account holds reserved money (pending holds). System accounts are the other side
of every movement: money enters the ledger only from ``crypto_receipts`` (top-ups),
``promotions`` (credits we give) or ``adjustments`` (ops corrections), and leaves the
customer to ``revenue`` (posted holds and charges). System balances are therefore usually
negative (sources) or positive (sinks); every entry sums to zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction


class AccountKind(StrEnum):
    available = "available"  # a customer's spendable balance
    held = "held"  # a customer's reserved balance (pending holds)
    system = "system"


class SystemAccount(StrEnum):
    crypto_receipts = "system:crypto_receipts"
    promotions = "system:promotions"
    adjustments = "system:adjustments"
    revenue = "system:revenue"


class EntryKind(StrEnum):
    topup = "topup"  # crypto receipt → available
    promotion = "promotion"  # promotions → available
    hold = "hold"  # available → held
    hold_post = "hold_post"  # held → revenue
    hold_void = "hold_void"  # held → available (refund of a reservation)
    charge = "charge"  # available → revenue (renewals)
    adjustment = "adjustment"  # adjustments ↔ available (ops, signed)
    lease_credit = "lease_credit"  # revenue → available: unused days of a lease ops ended early


class HoldStatus(StrEnum):
    pending = "pending"
    posted = "posted"
    voided = "voided"


class LedgerRuleError(ValueError):
    """A programming error: an entry that would break double entry."""


@dataclass(frozen=True)
class Leg:
    """One side of an entry: ``account`` is a symbolic name resolved by the service."""

    account: str  # "available" | "held" | a SystemAccount value
    amount_cents: int


def _positive(amount_cents: int) -> int:
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool):
        raise LedgerRuleError("amounts are integer cents")
    if amount_cents <= 0:
        raise LedgerRuleError("amount must be positive")
    return amount_cents


def legs_for(kind: EntryKind, amount_cents: int) -> tuple[Leg, ...]:
    """The legs of each kind of entry; every tuple sums to zero.

    ``adjustment`` takes a signed amount (credit > 0, debit < 0); all others a positive one.
    """
    if kind is EntryKind.adjustment:
        if not isinstance(amount_cents, int) or isinstance(amount_cents, bool) or amount_cents == 0:
            raise LedgerRuleError("an adjustment is a non-zero integer of cents")
        a = amount_cents
        return check_zero_sum(
            (Leg(SystemAccount.adjustments.value, -a), Leg(AccountKind.available.value, a))
        )
    a = _positive(amount_cents)
    table: dict[EntryKind, tuple[str, str]] = {
        # (from, to): money moves from the first account to the second.
        EntryKind.topup: (SystemAccount.crypto_receipts.value, AccountKind.available.value),
        EntryKind.promotion: (SystemAccount.promotions.value, AccountKind.available.value),
        EntryKind.hold: (AccountKind.available.value, AccountKind.held.value),
        EntryKind.hold_post: (AccountKind.held.value, SystemAccount.revenue.value),
        EntryKind.hold_void: (AccountKind.held.value, AccountKind.available.value),
        EntryKind.charge: (AccountKind.available.value, SystemAccount.revenue.value),
        EntryKind.lease_credit: (SystemAccount.revenue.value, AccountKind.available.value),
    }
    src, dst = table[kind]
    return check_zero_sum((Leg(src, -a), Leg(dst, a)))


DAY_SECONDS = 86_400


def unused_days_credit(
    monthly_cents: int, period_start: datetime, period_end: datetime, now: datetime
) -> tuple[int, int]:
    """What ops owe back when they end a lease early: ``(unused_days, cents)``.

    The unused *whole* days between ``now`` and the end of the paid month, credited pro rata
    of the month's length in days, rounded down to the cent. Nothing after the month ended
    (or for a month not yet started: the whole month is unused then).
    """
    if not isinstance(monthly_cents, int) or isinstance(monthly_cents, bool) or monthly_cents < 0:
        raise LedgerRuleError("amounts are integer cents")
    month_days = days_in_period(period_start, period_end)
    left_s = (period_end - max(now, period_start)).total_seconds()
    days = min(month_days, max(0, int(left_s // DAY_SECONDS)))
    return days, monthly_cents * days // month_days


def days_in_period(period_start: datetime, period_end: datetime) -> int:
    """A paid month's length in whole days (what a pro-rata credit divides by)."""
    total_s = (period_end - period_start).total_seconds()
    if total_s <= 0:
        raise LedgerRuleError("a paid month ends after it starts")
    return max(1, round(total_s / DAY_SECONDS))


def check_zero_sum(legs: tuple[Leg, ...]) -> tuple[Leg, ...]:
    if len(legs) < 2:
        raise LedgerRuleError("an entry has at least two postings")
    if sum(leg.amount_cents for leg in legs) != 0:
        raise LedgerRuleError("postings of an entry must sum to zero")
    if any(leg.amount_cents == 0 for leg in legs):
        raise LedgerRuleError("no zero postings")
    return legs


def resolve_transition(current: HoldStatus, wanted: HoldStatus) -> str:
    """What resolving a hold means: "apply", "replay" (same intent, already done) or "conflict"."""
    if wanted is HoldStatus.pending:
        raise LedgerRuleError("a hold is resolved to posted or voided")
    if current is HoldStatus.pending:
        return "apply"
    return "replay" if current is wanted else "conflict"


# --- exact crypto conversion -------------------------------------------------------------


def parse_rate(text: str) -> Fraction:
    """A rate (US dollars per whole coin) kept as an exact decimal string."""
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise LedgerRuleError(f"bad rate {text!r}") from None
    if not d.is_finite() or d <= 0:
        raise LedgerRuleError(f"bad rate {text!r}")
    return Fraction(d)


def crypto_due(amount_cents: int, rate: str, decimals: int) -> int:
    """Smallest units the customer must send for ``amount_cents`` (rounded up: never short)."""
    _positive(amount_cents)
    units = Fraction(amount_cents, 100) / parse_rate(rate) * 10**decimals
    return -((-units.numerator) // units.denominator)


def cents_for_crypto(units: int, rate: str, decimals: int) -> int:
    """US cents that ``units`` are worth at ``rate`` (rounded down: never made up)."""
    if units < 0:
        raise LedgerRuleError("negative crypto amount")
    cents = Fraction(units, 10**decimals) * parse_rate(rate) * 100
    return cents.numerator // cents.denominator


def credit_for_invoice(
    *, amount_cents: int, due_units: int, received_units: int, rate: str, decimals: int
) -> int:
    """What a top-up invoice credits, in cents, at its locked rate.

    Paid in full: exactly the invoice amount. Overpaid: the amount plus the excess converted
    (rounded down). Underpaid: what was received, converted (rounded down, so at most the
    amount). Nothing received: nothing.
    """
    if received_units <= 0:
        return 0
    if received_units >= due_units:
        return amount_cents + cents_for_crypto(received_units - due_units, rate, decimals)
    return min(amount_cents, cents_for_crypto(received_units, rate, decimals))
