"""The promised delivery of every node count, as the sizing engine's input.

The engine is pure: it does not read stock. ``/size`` reads a snapshot of the stock (nodes
available, open incoming batches, lead times: through ``app.catalog.service``) at most once
per ``STOCK_MAX_AGE_S`` per process, and turns it into, per SKU, the days from the
customer's today until a count of nodes is delivered, using the checkout's own promise
(``app.catalog.promise.promise``): the same business days, ready hour and time zone. A
count beyond stock and open batches has no promised date (a sales conversation).

The snapshot, the customer's time zone and the day are part of the fragment cache's key
(``routes._fragment``): a stock change or a new day renders the answer afresh.
"""

from __future__ import annotations

import logging
import threading
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from sqlmodel import Session

from app.catalog import promise as pr
from app.catalog.service import all_batches, lead_time_days, stock_summary
from app.catalog.specs import all_specs
from app.clock import monotonic
from app.configurator.fragments import PriceVersionMemo
from app.i18n import known_zone

log = logging.getLogger(__name__)

# How long a process reuses one stock snapshot (a promise older than this is re-checked at
# checkout anyway: "Stock changed while you were deciding").
STOCK_MAX_AGE_S = 2.0
_MAKE_LOCK = threading.Lock()


class SkuStock(NamedTuple):
    sku: str
    in_stock: int
    batches: tuple[tuple[date, int, int], ...]  # (expected on, free units, id)
    lead_days: int
    self_serve: bool


Stock = tuple[SkuStock, ...]
Delivery = tuple[tuple[int, float], ...]


def read_stock(engine: Any) -> Stock:
    """One snapshot of every SKU's stock (a few reads in one short session)."""
    with Session(engine) as session:
        counts = stock_summary(session)
        batches: dict[str, list[tuple[date, int, int]]] = {}
        for b in all_batches(session):
            free = int(b.quantity) - int(b.reserved)
            if free > 0:
                batches.setdefault(b.sku_id, []).append((b.expected_on, free, int(b.id or 0)))
        return tuple(
            SkuStock(
                s.id,
                int(counts.get(s.id, {}).get("available", 0)),
                tuple(sorted(batches.get(s.id, []))),
                lead_time_days(session, s.id),
                s.self_serve,
            )
            for s in all_specs()
        )


def customer_today(now: datetime, tz: str) -> date:
    return now.astimezone(pr.zone(tz)).date()


@lru_cache(maxsize=256)
def delivery_table(stock: Stock, today: date, tz: str) -> dict[str, Delivery]:
    """Per SKU: ((up to n nodes, delivered in d days from ``today``), ...), ascending.

    ``today`` is the customer's date; the promise is made as of the start of that day's
    business (its ready hour in the site's zone), so the table is one per day and zone."""
    now = datetime.combine(today, datetime.min.time(), tzinfo=pr.zone(tz))
    out: dict[str, Delivery] = {}
    for s in stock:
        if not s.self_serve:
            out[s.sku] = ()
            continue
        bounds = []
        if s.in_stock > 0:
            bounds.append(s.in_stock)
        total = s.in_stock
        for _on, units, _id in s.batches:
            total += units
            bounds.append(total)
        steps: list[tuple[int, float]] = []
        batches = [pr.Batch(expected=on, units=u, id=i) for on, u, i in s.batches]
        for q in bounds:
            p = pr.promise(
                s.sku,
                q,
                now,
                in_stock=s.in_stock,
                batches=batches,
                lead_business_days=s.lead_days,
                tz=tz,
            )
            if p.date is None:
                break
            days = float(max(0, (p.date - today).days))
            if steps and steps[-1][1] == days:
                steps[-1] = (q, days)  # the same day: one step
            else:
                steps.append((q, days))
        out[s.sku] = tuple(steps)
    return out


class When(NamedTuple):
    """What a /size answer's dates depend on: the stock snapshot (None: no catalog), the
    customer's time zone and their today. Part of the fragment cache's key."""

    stock: Stock | None
    tz: str
    today: date

    def delivery(self) -> dict[str, Delivery] | None:
        return None if self.stock is None else delivery_table(self.stock, self.today, self.tz)


@lru_cache(maxsize=256)
def zone_name(raw: str | None) -> str:
    """The ``tz`` cookie's IANA zone, "UTC" when unknown: the page's own rule
    (app.i18n.known_zone), for the early fragment lookup."""
    return known_zone(raw) or "UTC"


def stock_memo_of(holder: Any) -> PriceVersionMemo:
    """The stock snapshot's memo kept on ``holder`` (an app's ``state``), made on first use:
    one read per ``STOCK_MAX_AGE_S`` per process."""
    memo = getattr(holder, "stock_memo", None)
    if memo is None:
        with _MAKE_LOCK:
            memo = getattr(holder, "stock_memo", None)
            if memo is None:
                memo = holder.stock_memo = PriceVersionMemo(STOCK_MAX_AGE_S)
    return memo  # type: ignore[no-any-return]


def when_for(state: Any, tz: str, on_error: Any = None) -> When:
    """The stock snapshot (read at most once per ``STOCK_MAX_AGE_S`` per process), the
    customer's zone and their today, from an app's ``state`` (its engine and clock).
    ``on_error``: called when the stock cannot be read (no catalog): dates are then left
    out of the answer (the engine counts no delivery)."""

    def read() -> Stock | None:
        try:
            return read_stock(state.engine)
        except Exception:  # an unmigrated catalog must not break sizing
            log.debug("no stock", exc_info=True)
            if on_error is not None:
                on_error()
            return None

    stock = stock_memo_of(state).get(read)
    now = state.clock.now()
    state.size_clock_seen = (monotonic(), now)  # for early_when, which may not read a clock
    return When(stock, tz, customer_today(now, tz))


def early_when(state: Any, stock: Stock, tz: str) -> When | None:
    """The ``When`` of an answer given on the event loop (``routes.CachedFragments``):
    today from the last time a route read the clock (a simulated clock may read the
    database, which the event loop must not wait for), advanced by the monotonic time since;
    None when that reading is older than ``STOCK_MAX_AGE_S`` (the route answers)."""
    seen = getattr(state, "size_clock_seen", None)
    if seen is None:
        return None
    age = monotonic() - seen[0]
    if not 0 <= age < STOCK_MAX_AGE_S:
        return None
    return When(stock, tz, customer_today(seen[1] + timedelta(seconds=age), tz))
