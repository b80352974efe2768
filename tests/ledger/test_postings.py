"""The pure rules: legs sum to zero, conversions never make money up, hold transitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.postings import (
    EntryKind,
    HoldStatus,
    LedgerRuleError,
    cents_for_crypto,
    credit_for_invoice,
    crypto_due,
    legs_for,
    resolve_transition,
)

rates = st.decimals(min_value="0.0001", max_value="250000", places=4).map(str)
decimals = st.sampled_from([6, 8, 18])


@given(
    st.sampled_from([k for k in EntryKind if k is not EntryKind.adjustment]), st.integers(1, 10**12)
)
def test_every_kind_is_balanced(kind: EntryKind, amount: int) -> None:
    legs = legs_for(kind, amount)
    assert sum(leg.amount_cents for leg in legs) == 0 and len(legs) == 2


@given(st.integers(-(10**12), 10**12).filter(bool))
def test_adjustments_are_balanced(amount: int) -> None:
    assert sum(leg.amount_cents for leg in legs_for(EntryKind.adjustment, amount)) == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_amounts_refused(bad: object) -> None:
    with pytest.raises(LedgerRuleError):
        legs_for(EntryKind.hold, bad)  # type: ignore[arg-type]


@given(st.integers(1, 10**10), rates, decimals)
def test_full_payment_credits_exactly_the_amount(amount: int, rate: str, dec: int) -> None:
    due = crypto_due(amount, rate, dec)
    assert cents_for_crypto(due, rate, dec) >= amount  # the due always covers the amount
    assert (
        credit_for_invoice(
            amount_cents=amount, due_units=due, received_units=due, rate=rate, decimals=dec
        )
        == amount
    )


@given(st.integers(1, 10**10), rates, decimals, st.integers(0, 10**20))
def test_partial_never_exceeds_and_over_never_loses(
    amount: int, rate: str, dec: int, units: int
) -> None:
    due = crypto_due(amount, rate, dec)
    got = credit_for_invoice(
        amount_cents=amount, due_units=due, received_units=units, rate=rate, decimals=dec
    )
    assert got >= 0
    if units < due:
        assert got <= amount and got <= cents_for_crypto(units, rate, dec)
    else:
        assert got >= amount
        assert got <= cents_for_crypto(units, rate, dec) + 1  # rounding at most one cent apart


def test_hold_transitions() -> None:
    assert resolve_transition(HoldStatus.pending, HoldStatus.posted) == "apply"
    assert resolve_transition(HoldStatus.posted, HoldStatus.posted) == "replay"
    assert resolve_transition(HoldStatus.voided, HoldStatus.posted) == "conflict"
    with pytest.raises(LedgerRuleError):
        resolve_transition(HoldStatus.pending, HoldStatus.pending)


def test_bad_rates() -> None:
    for r in ("0", "-1", "NaN", "abc"):
        with pytest.raises(LedgerRuleError):
            crypto_due(100, r, 8)
