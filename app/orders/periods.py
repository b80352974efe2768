"""Billing periods and business days (standard library only)."""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta


def add_months(start: datetime, months: int) -> datetime:
    """The same day ``months`` later, clamped to the month's last day (Jan 31 → Feb 28).

    Periods are always computed from the lease's start, so a lease that began on the 31st
    goes Jan 31 → Feb 28 → Mar 31, never drifting to the 28th for good.
    """
    month_index = start.month - 1 + months
    year = start.year + month_index // 12
    month = month_index % 12 + 1
    day = min(start.day, calendar.monthrange(year, month)[1])
    return start.replace(year=year, month=month, day=day)


def add_business_days(d: date, days: int) -> date:
    """``days`` working days after ``d`` (Saturdays and Sundays skipped)."""
    out = d
    left = days
    while left > 0:
        out += timedelta(days=1)
        if out.weekday() < 5:
            left -= 1
    return out


def at_risk_cutoff(today: date) -> date:
    """Orders promised on or before this date are at risk: late, or due within one
    business day."""
    return add_business_days(today, 1)
