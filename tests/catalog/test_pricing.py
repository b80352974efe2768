"""Monthly vs hourly: the page's worked examples."""

from __future__ import annotations

import math

import pytest

from app.catalog.pricing import (
    HOURS_PER_MONTH,
    break_even_hours,
    chart,
    compare,
    per_gpu_hour_cents,
)


def test_b200_examples() -> None:
    # US$34,900 a month, 8 GPUs: ≈ US$5.98 at 24/7, US$60.59 at 72 hours.
    assert round(per_gpu_hour_cents(3_490_000, 8, HOURS_PER_MONTH)) == 598
    assert round(per_gpu_hour_cents(3_490_000, 8, 72)) == 6059
    assert math.isclose(per_gpu_hour_cents(3_490_000, 8, 72), 3_490_000 / 576)


def test_break_even_and_verdict() -> None:
    be = break_even_hours(3_490_000, 8, 599)
    assert 728 < be < 729  # at US$5.99/GPU-h elsewhere, monthly wins only at almost 24/7
    c = compare(3_490_000, 8, 72, 599)
    assert not c.monthly_cheaper and round(c.hourly_total_cents) == 599 * 8 * 72
    assert compare(3_490_000, 8, 730, 599).monthly_cheaper
    assert break_even_hours(3_490_000, 8, 0) == math.inf


@pytest.mark.parametrize("hours", [0, -5, 731])
def test_hours_out_of_range(hours: float) -> None:
    with pytest.raises(ValueError):
        compare(3_490_000, 8, hours, 599)


def test_chart_geometry() -> None:
    c = compare(3_490_000, 8, 72, 599)
    ch = chart(c)
    assert ch.path.startswith("M")
    assert ch.left <= ch.marker[0] <= ch.width and 0 <= ch.marker[1] <= ch.bottom
    assert ch.hourly_y is not None and ch.break_even_x is not None
    assert ch.y_max_cents >= c.hourly_cents
