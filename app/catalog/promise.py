"""The delivery promise: a pure function of stock, incoming batches and the calendar.

Standard library only. Everything the promise depends on is an argument:

    promise(sku_id, quantity, now, in_stock=2, batches=[...], lead_business_days=2,
            self_serve=True, tz="Asia/Shanghai") -> Promise

Rules
-----
* **Lead time** is counted in *business days* of the data centre (``SITE_TZ``): the
  day the clock starts (today, or the day a batch arrives) does not count; each following
  day that is not a Saturday, Sunday or a holiday of ``holidays_for(year)`` counts. The
  node is ready at ``READY_HOUR`` (12:00) site time on the last counted day.
* **Stock first.** If enough nodes are available now, the promise is today + lead time.
* **Then incoming batches**, earliest first, counting only units not already reserved for
  other orders. A batch whose expected date has passed without being marked arrived counts
  from today (it is late, it is not gone). The promise is the arrival of the *last* batch
  needed + lead time: a quantity partly from stock and partly from a batch gets the later date.
* **Never a made-up date.** More than stock + all incoming units, or a SKU that is not sold
  self-serve (the GB300 NVL72 rack), → ``available=False`` ("talk to sales").
* **Time zones.** ``now`` and ``ready_at`` are UTC instants; ``date`` is the calendar date
  of ``ready_at`` in the customer's time zone ``tz`` (what the customer sees).

Holidays (the data centre's calendar, documented here so staff and customers can check it):
New Year's Day (1 Jan), Memorial Day (last Monday of May), Independence Day (4 Jul),
Labor Day (first Monday of September), Thanksgiving and the day after (fourth Thursday of
November + Friday), Christmas Eve (24 Dec), Christmas Day (25 Dec) and New Year's Eve
(31 Dec). Fixed-date holidays falling on a Saturday are observed on the Friday before, on a
Sunday on the Monday after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from datetime import date as _Date
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

SITE_TZ = "UTC"
READY_HOUR = 12  # noon UTC: the same calendar date from UTC-11 to UTC+11

# msgids (translated by the caller's gettext; N_ keeps them extractable without importing app.errors)


def N_(s: str) -> str:
    return s


MSG_STOCK_1 = N_("{stock} in stock, ready in 1 business day")
MSG_STOCK_N = N_("{stock} in stock, ready in {days} business days")
MSG_BATCH = N_("Next batch arrives {arrival}, ready {ready}")
MSG_PART = N_("{stock} in stock, the rest arrives {arrival}, ready {ready}")
MSG_SALES_QTY = N_("More than we can promise: talk to sales about {quantity} nodes")
MSG_SALES_NONE = N_("None in stock and no batch expected: talk to sales")
MSG_SALES_RACK = N_("Term contract: talk to sales")


@dataclass(frozen=True)
class Batch:
    """Units of an incoming batch that are still free to promise."""

    expected: date
    units: int
    id: int | None = None


@dataclass(frozen=True)
class Promise:
    sku_id: str
    quantity: int
    available: bool
    in_stock: bool
    date: _Date | None
    ready_at: datetime | None
    explanation: str
    from_stock: int = 0
    from_batches: tuple[tuple[int | None, int], ...] = ()  # (batch id, units)
    arrival: _Date | None = None
    lead_business_days: int = 0
    message: str = ""
    params: tuple[tuple[str, object], ...] = field(default=(), compare=False)

    @property
    def talk_to_sales(self) -> bool:
        return not self.available


# ---------------------------------------------------------------- calendar


def _observed(d: date) -> date:
    if d.weekday() == 5:
        return d - timedelta(days=1)
    if d.weekday() == 6:
        return d + timedelta(days=1)
    return d


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    d = date(year, month, 1)
    d += timedelta(days=(weekday - d.weekday()) % 7)
    return d + timedelta(weeks=n - 1)


def _last_weekday(year: int, month: int, weekday: int) -> date:
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    d = nxt - timedelta(days=1)
    return d - timedelta(days=(d.weekday() - weekday) % 7)


@lru_cache(maxsize=64)
def holidays_for(year: int) -> frozenset[date]:
    thanksgiving = _nth_weekday(year, 11, 3, 4)
    days = {
        _observed(date(year, 1, 1)),
        _last_weekday(year, 5, 0),
        _observed(date(year, 7, 4)),
        _nth_weekday(year, 9, 0, 1),
        thanksgiving,
        thanksgiving + timedelta(days=1),
        _observed(date(year, 12, 25)),
    }
    # Christmas Eve and New Year's Eve only when they fall on a weekday (no observed day).
    days |= {d for d in (date(year, 12, 24), date(year, 12, 31)) if d.weekday() < 5}
    return frozenset(days)


def is_business_day(d: date, extra_holidays: Iterable[date] = ()) -> bool:
    if d.weekday() >= 5 or d in set(extra_holidays):
        return False
    # New Year's Day on a Saturday is observed on 31 Dec of the year before.
    return d not in holidays_for(d.year) and d not in holidays_for(d.year + 1)


def add_business_days(start: date, n: int, extra_holidays: Iterable[date] = ()) -> date:
    """The ``n``-th business day after ``start`` (``start`` itself never counts)."""
    if n < 0:
        raise ValueError("lead time cannot be negative")
    extra = frozenset(extra_holidays)
    d = start
    counted = 0
    while counted < n:
        d += timedelta(days=1)
        if is_business_day(d, extra):
            counted += 1
    return d


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError, KeyError):
        return ZoneInfo("UTC")


def _as_utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


# ---------------------------------------------------------------- the promise


def _identity(s: str) -> str:
    return s


def _iso(d: date) -> str:
    return d.isoformat()


def promise(
    sku_id: str,
    quantity: int,
    now: datetime,
    *,
    in_stock: int,
    batches: Sequence[Batch] = (),
    lead_business_days: int,
    self_serve: bool = True,
    tz: str | None = "UTC",
    site_tz: str = SITE_TZ,
    extra_holidays: Iterable[date] = (),
    gettext: Callable[[str], str] = _identity,
    format_day: Callable[[date], str] = _iso,
) -> Promise:
    if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
        raise ValueError("quantity must be a whole number of nodes, at least 1")
    if in_stock < 0 or lead_business_days < 0:
        raise ValueError("stock and lead time cannot be negative")
    now = _as_utc(now)
    site = zone(site_tz)
    customer = zone(tz)
    today = now.astimezone(site).date()
    extra = tuple(extra_holidays)

    def made(msg: str, params: dict[str, object], **found: Any) -> Promise:
        """The promise of what was ``found`` (when, from where), ``msg`` explaining it."""
        shown = {k: (format_day(v) if isinstance(v, date) else v) for k, v in params.items()}
        return Promise(
            sku_id=sku_id,
            quantity=quantity,
            explanation=gettext(msg).format(**shown),
            lead_business_days=lead_business_days,
            message=msg,
            params=tuple(params.items()),
            **found,
        )

    def sales(msg: str, **params: object) -> Promise:
        return made(msg, params, available=False, in_stock=False, date=None, ready_at=None)

    if not self_serve:
        return sales(MSG_SALES_RACK)

    def ready(from_day: date) -> datetime:
        day = add_business_days(from_day, lead_business_days, extra)
        return datetime.combine(day, time(READY_HOUR), tzinfo=site).astimezone(UTC)

    if quantity <= in_stock:
        ready_at = ready(today)
        msg = MSG_STOCK_1 if lead_business_days == 1 else MSG_STOCK_N
        params: dict[str, object] = {"stock": in_stock, "days": lead_business_days}
        return made(
            msg,
            params,
            available=True,
            in_stock=True,
            date=ready_at.astimezone(customer).date(),
            ready_at=ready_at,
            from_stock=quantity,
        )

    need = quantity - in_stock
    used: list[tuple[int | None, int]] = []
    arrival: _Date | None = None
    for b in sorted((b for b in batches if b.units > 0), key=lambda b: (b.expected, b.id or 0)):
        take = min(need, b.units)
        used.append((b.id, take))
        need -= take
        arrival = max(b.expected, today)
        if need == 0:
            break
    if need > 0 or arrival is None:
        if in_stock == 0 and not any(b.units > 0 for b in batches):
            return sales(MSG_SALES_NONE)
        return sales(MSG_SALES_QTY, quantity=quantity)

    ready_at = ready(arrival)
    local = ready_at.astimezone(customer).date()
    msg = MSG_PART if in_stock > 0 else MSG_BATCH
    params = {"stock": in_stock, "arrival": arrival, "ready": local}
    return made(
        msg,
        params,
        available=True,
        in_stock=False,
        date=local,
        ready_at=ready_at,
        from_stock=in_stock,
        from_batches=tuple(used),
        arrival=arrival,
    )
