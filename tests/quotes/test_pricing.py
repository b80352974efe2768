"""The pure quote rules: discounts in basis points, integer-cent totals, validity, status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.quotes import pricing
from app.quotes.schemas import QuoteIn
from app.web.forms import field_errors

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


BUILDER = {"prospect_email": "p@example.com", "sku": "hgx-b200", "quantity": "1"}


@pytest.mark.parametrize(
    ("text", "bp"),
    [
        ("", 0),
        ("0", 0),
        ("10", 1000),
        ("12.5", 1250),
        ("12.5 %", 1250),
        ("7,25", 725),
        (".5", 50),
        ("７.５", 750),
        ("50", 5000),
    ],
)
def test_discount_is_read_once_into_basis_points(text: str, bp: int) -> None:
    assert QuoteIn.model_validate({**BUILDER, "discount": text}).discount_bp == bp


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-5", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("abc", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("10.123", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("1e1", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("10..5", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("²", "Enter the discount as a percentage, e.g. 7.5 (at most two decimals)."),
        ("51", "The discount cannot exceed 50 %."),
        ("50.01", "The discount cannot exceed 50 %."),
    ],
)
def test_discount_rejects(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as e:
        QuoteIn.model_validate({**BUILDER, "discount": text})
    assert field_errors(e.value, QuoteIn.FIELD_MESSAGES) == {"discount": message}


def test_sales_limit_is_ten_percent() -> None:
    assert not pricing.needs_approval(1000)
    assert pricing.needs_approval(1001)
    assert pricing.needs_approval(1500)


def test_totals_b200_two_nodes_three_months_ten_percent() -> None:
    t = pricing.totals(3_490_000, 1000, 2, 3)
    assert t.unit_cents == 3_141_000
    assert t.monthly_cents == 6_282_000
    assert t.total_cents == 18_846_000
    assert t.saving_cents == 3_490_000 * 6 - 18_846_000


def test_gb300_rack_per_gpu() -> None:
    t = pricing.totals(799_000, 0, 72, 12)
    assert t.monthly_cents == 57_528_000  # US$575,280 per rack-month
    assert pricing.check_terms("rack", 72, 12) == {}
    assert pricing.check_terms("rack", 144, 36) == {}
    assert set(pricing.check_terms("rack", 100, 12)) == {"quantity"}
    assert set(pricing.check_terms("rack", 72, 6)) == {"months"}
    assert set(pricing.check_terms("node", 0, 37)) == {"quantity", "months"}


@given(
    st.integers(min_value=0, max_value=10**8),
    st.integers(min_value=0, max_value=5000),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=36),
)
def test_totals_are_consistent_integers(price: int, bp: int, qty: int, months: int) -> None:
    t = pricing.totals(price, bp, qty, months)
    assert all(isinstance(v, int) for v in (t.unit_cents, t.monthly_cents, t.total_cents))
    assert t.total_cents == t.unit_cents * qty * months
    assert 0 <= t.unit_cents <= price
    # Half-up rounding: within half a cent of the exact value.
    assert abs(t.unit_cents * 10000 - price * (10000 - bp)) <= 5000


def test_expiry_is_derived_for_shared_quotes_only() -> None:
    exp = pricing.expires_at(T0, 7)
    assert exp == T0 + timedelta(days=7)
    assert pricing.effective_status("sent", exp, exp) == "sent"
    assert pricing.effective_status("sent", exp, exp + timedelta(seconds=1)) == "expired"
    assert pricing.effective_status("viewed", exp, exp + timedelta(days=1)) == "expired"
    assert pricing.effective_status("accepted", exp, exp + timedelta(days=1)) == "accepted"
    assert pricing.effective_status("draft", None, exp + timedelta(days=1)) == "draft"
    assert pricing.honoured("accepted", exp, exp)
    assert not pricing.honoured("accepted", exp, exp + timedelta(seconds=1))
    assert not pricing.honoured("draft", exp, T0)


def test_reference_round_trip() -> None:
    assert pricing.reference(42) == "Q-000042"
    assert pricing.parse_reference("q-000042") == 42
    assert pricing.parse_reference("Q42") == 42
    assert pricing.parse_reference("acme") is None
    assert pricing.parse_reference("Q-０００４２") == 42
    assert pricing.parse_reference("Q²") is None  # str.isdigit() would have let it through
    assert pricing.parse_reference("Q-0") is None
