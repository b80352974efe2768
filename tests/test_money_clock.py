from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import Session

from app.clock import FixedClock, SimulatedClock
from app.money import format_cents, parse_amount


@pytest.mark.parametrize(
    ("text", "cents"), [("12.34", 1234), ("1,234.5", 123450), ("$20", 2000), ("0.01", 1)]
)
def test_parse_amount(text: str, cents: int) -> None:
    assert parse_amount(text) == cents


@pytest.mark.parametrize("text", ["", "abc", "1.234", "NaN", "inf"])
def test_parse_amount_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_amount(text)


def test_format_per_locale() -> None:
    assert format_cents(3490000, "en") == "US$34,900.00"
    assert format_cents(-3490000, "en") == "-US$34,900.00"
    assert format_cents(3490000, "zh_CN") == "US$34,900.00"
    assert "34,900.00" in format_cents(3490000, "zh_CN")


def test_fixed_clock_moves_only_when_told() -> None:
    c = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    c.advance(timedelta(days=2))
    assert c.now() == datetime(2026, 1, 3, tzinfo=UTC)


def test_simulated_clock_offset_is_shared_through_the_database(engine) -> None:  # type: ignore[no-untyped-def]
    a, b = SimulatedClock(engine), SimulatedClock(engine)
    with Session(engine) as s:
        a.advance(s, timedelta(days=3))
        s.commit()
    assert b.offset() == timedelta(days=3)
    with Session(engine) as s, pytest.raises(ValueError):
        a.advance(s, timedelta(days=-1))


def test_simulated_clock_reads_while_a_request_holds_the_write_lock(engine) -> None:  # type: ignore[no-untyped-def]
    """SQLite: the request's transaction holds BEGIN IMMEDIATE; reading "now" must not wait on it."""
    clock = SimulatedClock(engine, ttl=0)
    with Session(engine) as s:
        clock.advance(s, timedelta(hours=5))  # this session now holds the write lock
        other = SimulatedClock(engine, ttl=0)
        assert other.offset() == timedelta(0)  # committed value, read without blocking
        s.commit()
    assert SimulatedClock(engine, ttl=0).offset() == timedelta(hours=5)
