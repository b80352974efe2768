"""Table tests of the pure delivery promise."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.catalog.promise import (
    Batch,
    add_business_days,
    holidays_for,
    is_business_day,
    promise,
)

TUE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # Tuesday
FRI = datetime(2026, 12, 4, 15, 0, tzinfo=UTC)  # Friday
SAT = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "stock", "lead", "expected", "text"),
    [
        # in stock: today does not count, weekends skipped
        (TUE, 2, 2, date(2026, 12, 3), "2 in stock, ready in 2 business days"),
        (TUE, 1, 1, date(2026, 12, 2), "1 in stock, ready in 1 business day"),
        (FRI, 3, 1, date(2026, 12, 7), "3 in stock, ready in 1 business day"),  # over the weekend
        (SAT, 3, 2, date(2026, 12, 8), "3 in stock, ready in 2 business days"),  # asked on Saturday
        (FRI, 3, 3, date(2026, 12, 9), "3 in stock, ready in 3 business days"),  # per-SKU lead time
        (FRI, 3, 5, date(2026, 12, 11), "3 in stock, ready in 5 business days"),
        # holidays: 24, 25 and 31 Dec, 1 Jan 2027
        (datetime(2026, 12, 23, 9, tzinfo=UTC), 1, 2, date(2026, 12, 29), None),
        (datetime(2026, 12, 30, 9, tzinfo=UTC), 1, 1, date(2027, 1, 4), None),
        # Thanksgiving (26 Nov 2026) and the day after
        (datetime(2026, 11, 25, 9, tzinfo=UTC), 1, 1, date(2026, 11, 30), None),
    ],
)
def test_in_stock_dates(
    now: datetime, stock: int, lead: int, expected: date, text: str | None
) -> None:
    p = promise("hgx-h100", 1, now, in_stock=stock, lead_business_days=lead)
    assert p.available and p.in_stock
    assert p.date == expected
    assert p.ready_at is not None and p.ready_at.tzinfo is not None
    if text:
        assert p.explanation == text


def test_stock_out_uses_the_next_batch_plus_lead_time() -> None:
    batches = [
        Batch(date(2027, 1, 14), 4, id=7),
        Batch(date(2026, 12, 18), 0, id=3),
    ]  # full one skipped
    p = promise("hgx-b200", 1, TUE, in_stock=0, batches=batches, lead_business_days=3)
    assert p.available and not p.in_stock
    assert p.arrival == date(2027, 1, 14)
    assert p.date == date(2027, 1, 19)  # Thu 14 → Fri 15, Mon 18, Tue 19
    assert p.explanation == "Next batch arrives 2027-01-14, ready 2027-01-19"
    assert p.from_batches == ((7, 1),)


def test_quantity_larger_than_stock_takes_the_later_date() -> None:
    batches = [Batch(date(2026, 12, 10), 2, id=1), Batch(date(2026, 12, 17), 4, id=2)]
    in_stock = promise("hgx-b200", 2, TUE, in_stock=2, batches=batches, lead_business_days=2)
    assert in_stock.in_stock and in_stock.date == date(2026, 12, 3)
    part = promise("hgx-b200", 3, TUE, in_stock=2, batches=batches, lead_business_days=2)
    assert not part.in_stock and part.from_stock == 2 and part.from_batches == ((1, 1),)
    assert part.date == date(2026, 12, 14)  # Thu 10 → Fri 11, Mon 14
    two_batches = promise("hgx-b200", 6, TUE, in_stock=2, batches=batches, lead_business_days=2)
    assert two_batches.from_batches == ((1, 2), (2, 2))
    assert two_batches.date == date(2026, 12, 21)  # Thu 17 → Fri 18, Mon 21
    assert "2 in stock, the rest arrives" in two_batches.explanation


def test_beyond_everything_that_will_arrive_is_talk_to_sales() -> None:
    batches = [Batch(date(2026, 12, 10), 2, id=1)]
    p = promise("hgx-b200", 5, TUE, in_stock=2, batches=batches, lead_business_days=2)
    assert not p.available and p.date is None and p.ready_at is None
    assert "talk to sales" in p.explanation
    none = promise("hgx-b200", 1, TUE, in_stock=0, batches=[], lead_business_days=2)
    assert not none.available and none.date is None


def test_racks_are_always_talk_to_sales() -> None:
    p = promise("gb300-nvl72", 1, TUE, in_stock=9, lead_business_days=2, self_serve=False)
    assert not p.available and p.talk_to_sales and p.date is None


def test_a_late_batch_counts_from_today() -> None:
    p = promise(
        "hgx-h200", 1, TUE, in_stock=0, batches=[Batch(date(2026, 11, 20), 1)], lead_business_days=2
    )
    assert p.arrival == date(2026, 12, 1) and p.date == date(2026, 12, 3)


@pytest.mark.parametrize(
    ("now", "tz", "expected"),
    [
        (TUE, "UTC", date(2026, 12, 3)),
        (TUE, "Asia/Shanghai", date(2026, 12, 3)),  # ready 12:00 UTC = 20:00 in Shanghai
        (TUE, "America/Los_Angeles", date(2026, 12, 3)),  # 04:00 the same day
        (TUE, "Pacific/Auckland", date(2026, 12, 4)),  # 01:00 the next day (UTC+13 in summer)
        (TUE, "Not/AZone", date(2026, 12, 3)),  # unknown → UTC
        # Late Monday evening in New York is already Tuesday in UTC: the count starts from Tuesday.
        (datetime(2026, 12, 1, 2, 0, tzinfo=UTC), "America/New_York", date(2026, 12, 3)),
    ],
)
def test_time_zones(now: datetime, tz: str, expected: date) -> None:
    p = promise("hgx-h100", 1, now, in_stock=1, lead_business_days=2, tz=tz)
    assert p.ready_at == datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert p.date == expected


def test_naive_now_is_treated_as_utc() -> None:
    p = promise("hgx-h100", 1, datetime(2026, 12, 1, 9, 0), in_stock=1, lead_business_days=2)
    assert p.date == date(2026, 12, 3)


@pytest.mark.parametrize("bad", [0, -1, True])
def test_bad_quantity(bad: int) -> None:
    with pytest.raises(ValueError):
        promise("hgx-h100", bad, TUE, in_stock=1, lead_business_days=2)


def test_calendar() -> None:
    h = holidays_for(2027)
    assert (
        date(2027, 1, 1) in h and date(2027, 5, 31) in h and date(2027, 7, 5) in h
    )  # 4 Jul is a Sunday
    assert date(2027, 11, 25) in h and date(2027, 11, 26) in h and date(2027, 12, 24) in h
    # 1 Jan 2028 is a Saturday: observed on Friday 31 Dec 2027
    assert not is_business_day(date(2027, 12, 31))
    assert is_business_day(date(2027, 12, 30))
    assert add_business_days(date(2026, 12, 4), 0) == date(2026, 12, 4)
    with pytest.raises(ValueError):
        add_business_days(date(2026, 12, 4), -1)


def test_translation_and_date_format_are_the_callers() -> None:
    p = promise(
        "hgx-h100",
        1,
        TUE,
        in_stock=0,
        batches=[Batch(date(2027, 1, 14), 1)],
        lead_business_days=1,
        gettext=lambda s: s.replace("Next batch arrives", "下一批到货"),
        format_day=lambda d: f"{d.month}月{d.day}日",
    )
    assert p.explanation == "下一批到货 1月14日, ready 1月15日"
