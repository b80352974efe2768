"""Monthly price versus hourly billing elsewhere (pure, standard library only).

A node rented by the month costs the same however many hours it is used, so the
effective price per GPU-hour is ``monthly / (GPUs × hours used)``. At 24/7 a month is
730 hours (8,760 / 12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HOURS_PER_MONTH = 730


def per_gpu_hour_cents(monthly_cents: int, gpus: int, hours: float) -> float:
    """Effective cost of one GPU-hour in cents (a float: a display figure, not money)."""
    if gpus < 1:
        raise ValueError("at least one GPU")
    if hours <= 0:
        raise ValueError("hours must be positive")
    return monthly_cents / (gpus * hours)


def break_even_hours(monthly_cents: int, gpus: int, hourly_cents: float) -> float:
    """Hours per month above which the monthly node is cheaper than hourly billing."""
    if hourly_cents <= 0:
        return math.inf
    return monthly_cents / (gpus * hourly_cents)


@dataclass(frozen=True)
class Comparison:
    monthly_cents: int
    gpus: int
    hours: float
    hourly_cents: float
    effective_cents: float  # monthly price per GPU-hour at `hours`
    at_full_cents: float  # at 730 h
    break_even_hours: float
    hourly_total_cents: float  # what the same hours cost elsewhere, whole node
    monthly_cheaper: bool
    points: tuple[tuple[float, float], ...]  # (hours, effective cents) for the chart


def compare(monthly_cents: int, gpus: int, hours: float, hourly_cents: float) -> Comparison:
    if not 1 <= hours <= HOURS_PER_MONTH:
        raise ValueError(f"hours must be between 1 and {HOURS_PER_MONTH}")
    eff = per_gpu_hour_cents(monthly_cents, gpus, hours)
    be = break_even_hours(monthly_cents, gpus, hourly_cents)
    xs = [24.0 * k for k in range(1, 31)] + [float(HOURS_PER_MONTH)]
    pts = tuple((x, per_gpu_hour_cents(monthly_cents, gpus, x)) for x in xs)
    return Comparison(
        monthly_cents=monthly_cents,
        gpus=gpus,
        hours=hours,
        hourly_cents=hourly_cents,
        effective_cents=eff,
        at_full_cents=per_gpu_hour_cents(monthly_cents, gpus, HOURS_PER_MONTH),
        break_even_hours=be,
        hourly_total_cents=hourly_cents * gpus * hours,
        monthly_cheaper=eff <= hourly_cents,
        points=pts,
    )


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    path: str  # the monthly curve as an SVG path
    hourly_y: float | None  # the flat hourly line (None when off the chart)
    marker: tuple[float, float]  # the chosen hours on the curve
    break_even_x: float | None
    y_max_cents: float
    x_ticks: tuple[tuple[float, int], ...]
    y_ticks: tuple[tuple[float, float], ...]
    left: int
    bottom: int


def chart(c: Comparison, width: int = 560, height: int = 260) -> Chart:
    """Coordinates for a small server-rendered SVG (axes: hours 0–730, US$/GPU-h)."""
    left, right, top, bottom_pad = 60, 12, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom_pad
    y_max = max(
        c.hourly_cents * 2.5, c.at_full_cents * 4, min(c.effective_cents * 1.1, c.hourly_cents * 20)
    )
    y_max = max(y_max, 100.0)
    step = _nice_step(y_max / 4)
    y_max = step * math.ceil(y_max / step)

    def x_of(h: float) -> float:
        return left + plot_w * h / HOURS_PER_MONTH

    def y_of(cents: float) -> float:
        return top + plot_h * (1 - min(cents, y_max) / y_max)

    first_h = max(c.monthly_cents / (c.gpus * y_max), 1.0)
    hs = [first_h] + [h for h in (first_h * 1.15**k for k in range(1, 80)) if h < HOURS_PER_MONTH]
    hs.append(float(HOURS_PER_MONTH))
    d = " ".join(
        f"{'M' if i == 0 else 'L'}{x_of(h):.1f},{y_of(per_gpu_hour_cents(c.monthly_cents, c.gpus, h)):.1f}"
        for i, h in enumerate(hs)
    )
    be = c.break_even_hours
    return Chart(
        width=width,
        height=height,
        path=d,
        hourly_y=y_of(c.hourly_cents) if c.hourly_cents <= y_max else None,
        marker=(x_of(c.hours), y_of(c.effective_cents)),
        break_even_x=x_of(be) if be <= HOURS_PER_MONTH else None,
        y_max_cents=y_max,
        x_ticks=tuple((x_of(h), h) for h in (0, 168, 336, 504, 730)),
        y_ticks=tuple((y_of(v), v) for v in (0.0, y_max / 2, y_max)),
        left=left,
        bottom=top + plot_h,
    )


def _nice_step(x: float) -> float:
    mag = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 2.5, 5, 10):
        if x <= m * mag:
            return m * mag
    return 10 * mag
