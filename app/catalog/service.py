"""Catalog services: live list prices, stock, the delivery promise and node holds.

Contracts other domains call (see docs/architecture.md "Seams"):
``list_price_cents``, ``current_promise`` (both at once: ``promise_and_list_price``),
``reserve_for_order``, ``release_for_order``,
``nodes_for_order``, ``mark_nodes``, ``free_ip_pool``. Services take ``session`` and
``now`` and never commit.

Racing for the last node: ``reserve_for_order`` first locks the SKU's ``catalog_sku_stock``
row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite already serialises writers with
``BEGIN IMMEDIATE``), then counts what is free and holds it, all in the caller's
transaction. A second buyer waits for the first to commit and then sees the later date.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from collections.abc import Mapping
from datetime import date, datetime
from types import MappingProxyType
from typing import Any, cast

from sqlalchemy import (
    Date,
    Integer,
    String,
    Table,
    bindparam,
    func,
    literal,
    text,
    union_all,
    update,
)
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app import i18n, messages
from app.accounts import audit
from app.catalog import promise as pr
from app.catalog.models import (
    BatchStatus,
    IncomingBatch,
    ListPrice,
    Node,
    NodeState,
    PriceChange,
    PriceVersion,
    SkuStock,
    StockReservation,
)
from app.catalog.specs import NodeSpec, all_specs, spec
from app.clock import utc
from app.db import is_postgres, pg_type_name, reader
from app.errors import N_, Conflict, InvalidInput, NotFound

Promise = pr.Promise

MAX_PRICE_CENTS = 100_000_000  # US$1,000,000 a month: anything above is a typo
DEFAULT_LEAD_DAYS = 2


class StockChanged(Conflict):
    code = "stock_changed"
    default_message = N_(
        "Stock changed while you were deciding: the delivery date is now {date}. "
        "Review it and confirm again."
    )

    def __init__(self, promise: pr.Promise, **kw: Any) -> None:
        super().__init__(date=messages.format_day(promise.date) if promise.date else "—", **kw)
        self.promise = promise


class TalkToSales(Conflict):
    code = "talk_to_sales"
    default_message = N_(
        "We cannot promise a delivery date for this quantity. Talk to sales and we will plan it with you."
    )

    def __init__(self, promise: pr.Promise | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.promise = promise


class UnknownSku(NotFound):
    code = "unknown_sku"
    default_message = N_("There is no node called {sku}.")


def get_spec(sku_id: str) -> NodeSpec:
    try:
        return spec(sku_id)
    except KeyError:
        raise UnknownSku(sku=sku_id) from None


# ------------------------------------------------------------------ prices


def list_price_cents(session: Session, sku_id: str) -> int:
    """The live list price (per node per month; per GPU for rack offers)."""
    row = session.get(ListPrice, sku_id)
    if row is not None:
        return row.cents
    return get_spec(sku_id).list_price_cents_month


def list_prices(session: Session) -> dict[str, int]:
    rows = {r.sku_id: r.cents for r in session.exec(select(ListPrice)).all()}
    return {s.id: rows.get(s.id, s.list_price_cents_month) for s in all_specs()}


def price_version(session: Session) -> int:
    """The list prices' version (0 before the first change); one primary-key read."""
    v = session.exec(select(PriceVersion.version).where(PriceVersion.id == 1)).first()
    return int(v or 0)


def bump_price_version(session: Session) -> None:
    """Call in the transaction that changes a list price: every process's cache of the
    prices is stale from its commit on."""
    done = session.exec(  # type: ignore[call-overload]
        update(PriceVersion)
        .where(col(PriceVersion.id) == 1)
        .values(version=PriceVersion.version + 1)
        .execution_options(synchronize_session=False)
    )
    if done.rowcount:
        return
    try:
        with session.begin_nested():
            session.add(PriceVersion(id=1, version=1))
            session.flush()
    except IntegrityError:  # created by a concurrent change: bump that one
        bump_price_version(session)


def price_cache_of(holder: Any) -> PriceCache:
    """The PriceCache kept on ``holder`` (an app's ``state``), made on first use."""
    cache = getattr(holder, "price_cache", None)
    if cache is None:
        cache = holder.price_cache = PriceCache()
    return cache  # type: ignore[no-any-return]


def price_version_now(engine: Engine) -> int:
    """The price version read on a pooled connection outside any ORM transaction: on
    SQLite a plain autocommit SELECT (no ``BEGIN IMMEDIATE``, so no write lock), on
    PostgreSQL one statement rolled back when the connection goes back to the pool."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        try:
            cur.execute("SELECT version FROM catalog_price_version WHERE id = 1")
            row = cur.fetchone()
        finally:
            cur.close()
        return int(row[0]) if row else 0
    finally:
        raw.close()


class PriceCache:
    """List prices of one app process, valid for one price version.

    ``get`` reads the version first and the prices only when it moved, so a price change
    committed by any process is seen on the next request of every process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._prices: Mapping[str, int] = MappingProxyType({})
        self.reads = 0  # how often the prices themselves were read (for tests and benchmarks)

    def get(self, engine: Engine, version: int | None = None) -> Mapping[str, int]:
        """The prices at the current version, or at ``version`` when the caller read it
        already (the live fragment's cache key): then it is not read again, and prices kept
        for a later version than that are answered as they are."""
        # the version before the prices: a change in between re-reads later
        v = price_version_now(engine) if version is None else version
        with self._lock:
            if v == self._version:
                return self._prices
            if version is not None and self._version is not None and v < self._version:
                return self._prices  # newer than asked for: never older than the key
        with Session(reader(engine)) as session:  # deferred on SQLite: never waits for a writer
            prices = MappingProxyType(list_prices(session))
        with self._lock:
            self._version, self._prices = v, prices
            self.reads += 1
        return prices


def set_list_price(
    session: Session,
    *,
    sku_id: str,
    cents: int,
    reason: str,
    actor: Any,
    now: datetime,
    ip: str = "",
) -> PriceChange | None:
    """Change the list price for new orders and quotes (existing orders keep theirs)."""
    get_spec(sku_id)
    reason = reason.strip()
    errors = {}
    if cents <= 0 or cents > MAX_PRICE_CENTS:
        errors["cents"] = N_("Enter a price between US$0.01 and US$1,000,000.")
    if not reason:
        errors["reason"] = N_("Say why the price changes; it is kept in the history.")
    elif len(reason) > 300:
        errors["reason"] = N_("Keep the reason under 300 characters.")
    if errors:
        raise InvalidInput(errors=errors)
    old = list_price_cents(session, sku_id)
    if old == cents:
        return None
    row = session.get(ListPrice, sku_id)
    if row is None:
        row = ListPrice(sku_id=sku_id, cents=cents, updated_at=now)
    row.cents = cents
    row.updated_at = now
    row.updated_by_id = getattr(actor, "id", None)
    session.add(row)
    change = PriceChange(
        sku_id=sku_id,
        old_cents=old,
        new_cents=cents,
        reason=reason,
        actor_id=getattr(actor, "id", None),
        actor_email=getattr(actor, "email", "") or "",
        at=now,
    )
    session.add(change)
    bump_price_version(session)
    audit.record(
        session,
        action="catalog.price_changed",
        now=now,
        actor=actor,
        target=f"sku:{sku_id}",
        ip=ip,
        old_cents=old,
        new_cents=cents,
        reason=reason,
    )
    session.flush()
    return change


def price_history(
    session: Session, sku_id: str | None = None, limit: int = 50
) -> list[PriceChange]:
    q = select(PriceChange).order_by(col(PriceChange.at).desc(), col(PriceChange.id).desc())
    if sku_id:
        q = q.where(PriceChange.sku_id == sku_id)
    return list(session.exec(q.limit(limit)).all())


# ------------------------------------------------------------------ stock


def lead_time_days(session: Session, sku_id: str) -> int:
    row = session.get(SkuStock, sku_id)
    if row is not None:
        return row.lead_time_business_days
    return _default_lead(sku_id)


def _default_lead(sku_id: str) -> int:
    lt = get_spec(sku_id).lead_time_business_days
    return DEFAULT_LEAD_DAYS if lt is None else int(lt)


def available_count(session: Session, sku_id: str) -> int:
    n = session.exec(
        select(func.count())
        .select_from(Node)
        .where(Node.sku_id == sku_id, Node.state == NodeState.available.value)
    ).one()
    return int(n)


def open_batches(session: Session, sku_id: str) -> list[IncomingBatch]:
    return list(
        session.exec(
            select(IncomingBatch)
            .where(
                IncomingBatch.sku_id == sku_id,
                IncomingBatch.status == BatchStatus.expected.value,
            )
            .order_by(col(IncomingBatch.expected_on), col(IncomingBatch.id))
        ).all()
    )


def stock_summary(session: Session) -> dict[str, dict[str, int]]:
    """{sku: {state: count}} for every SKU."""
    out: dict[str, dict[str, int]] = {s.id: {} for s in all_specs()}
    rows = session.exec(
        select(Node.sku_id, Node.state, func.count()).group_by(Node.sku_id, Node.state)
    ).all()
    for sku, state, n in rows:
        out.setdefault(sku, {})[state] = int(n)
    return out


def _translate_and_format() -> tuple[Any, Any]:

    def fmt(d: date) -> str:
        return messages.format_day(d)  # the same format as every other date a customer reads

    return i18n.gettext, fmt


def _stock_reads_statement(lead: bool, price: bool = False) -> Any:
    """The promise's reads as one ``UNION ALL`` (built once per shape; the SKU a parameter);
    with ``price`` the SKU's stored list price too (the checkout reads both)."""
    sku = bindparam("sku", type_=String)
    count = select(
        literal("n").label("k"),
        literal(None, Integer).label("id"),
        literal(None, Date).label("on"),
        func.count().label("v"),
    ).where(col(Node.sku_id) == sku, col(Node.state) == NodeState.available.value)
    batches = select(
        literal("b"),
        col(IncomingBatch.id),
        col(IncomingBatch.expected_on),
        col(IncomingBatch.quantity) - col(IncomingBatch.reserved),
    ).where(
        col(IncomingBatch.sku_id) == sku,
        col(IncomingBatch.status) == BatchStatus.expected.value,
    )
    parts = [count, batches]
    if lead:
        parts.append(
            select(
                literal("l"),
                literal(None, Integer),
                literal(None, Date),
                col(SkuStock.lead_time_business_days),
            ).where(col(SkuStock.sku_id) == sku)
        )
    if price:
        parts.append(
            select(
                literal("p"),
                literal(None, Integer),
                literal(None, Date),
                col(ListPrice.cents),
            ).where(col(ListPrice.sku_id) == sku)
        )
    return union_all(*parts)


_STOCK_READS = {
    (lead, price): _stock_reads_statement(lead, price)
    for lead in (False, True)
    for price in (False, True)
}


_STOCK_READS_WITH: dict[Any, Any] = {}


def _stock_reads(
    session: Session,
    sku_id: str,
    *,
    lead: bool,
    price: bool = False,
    extra: Any = None,
    extra_params: Mapping[str, Any] | None = None,
    extra_rows: list[Any] | None = None,
) -> tuple[int, list[pr.Batch], int | None, int | None]:
    """(nodes available, open batches, lead days or None, stored list price or None) in ONE
    round trip: the count, the batches, (with ``lead``) the stock row's lead time and (with
    ``price``) the list price row as one ``UNION ALL``. Under the SKU lock every statement
    is time other buyers wait, so the promise's reads are one.

    ``extra``: a caller's own SELECT of four columns (a kind other than n/b/l/p, an
    integer, a date, an integer; built once, its parameters ``extra_params``) read in the
    same round trip; its rows are appended to ``extra_rows``."""
    in_stock, lead_days, cents, found = 0, None, None, []
    stmt = _STOCK_READS[lead, price]
    params: dict[str, Any] = {"sku": sku_id}
    if extra is not None:
        key = (lead, price, id(extra))
        with_extra = _STOCK_READS_WITH.get(key)
        if with_extra is None:
            with_extra = _STOCK_READS_WITH[key] = union_all(*stmt.selects, extra)
        stmt = with_extra
        params.update(extra_params or {})
    rows = session.connection().execute(stmt, params).all()
    for kind, bid, on, v in rows:
        if kind == "n":
            in_stock = int(v)
        elif kind == "l":
            lead_days = int(v)
        elif kind == "p":
            cents = int(v)
        elif kind == "b":
            found.append((on, int(bid), max(0, int(v))))
        elif extra_rows is not None:
            extra_rows.append((kind, bid, on, v))
    found.sort()  # by expected date, then id (as open_batches)
    batches = [pr.Batch(expected=on, units=v, id=bid) for on, bid, v in found]
    return in_stock, batches, lead_days, cents


def _promise_from(
    session: Session,
    sku_id: str,
    quantity: int,
    now: datetime,
    tz: str | None,
    *,
    lead_days: int | None = None,
) -> pr.Promise:
    return _promise_and_price(session, sku_id, quantity, now, tz, lead_days=lead_days)[0]


def _promise_and_price(
    session: Session,
    sku_id: str,
    quantity: int,
    now: datetime,
    tz: str | None,
    *,
    lead_days: int | None = None,
    price: bool = False,
    extra: Any = None,
    extra_params: Mapping[str, Any] | None = None,
    extra_rows: list[Any] | None = None,
) -> tuple[pr.Promise, int | None]:
    """The promise from one read; with ``price`` the SKU's list price from the same
    statement (else None); ``extra``: as ``_stock_reads``."""
    s = get_spec(sku_id)
    gettext, fmt = _translate_and_format()
    if quantity < 1:
        raise InvalidInput(N_("Choose at least one node."), field="quantity")
    in_stock, batches, stored_lead, cents = _stock_reads(
        session,
        sku_id,
        lead=lead_days is None,
        price=price,
        extra=extra,
        extra_params=extra_params,
        extra_rows=extra_rows,
    )
    if lead_days is None:
        lead_days = stored_lead if stored_lead is not None else _default_lead(sku_id)
    p = pr.promise(
        sku_id,
        quantity,
        now,
        in_stock=in_stock if s.self_serve else 0,
        batches=batches,
        lead_business_days=lead_days,
        self_serve=s.self_serve,
        tz=tz,
        gettext=gettext,
        format_day=fmt,
    )
    if not price:
        return p, None
    return p, cents if cents is not None else s.list_price_cents_month


def current_promise(
    session: Session, sku_id: str, quantity: int, now: datetime, tz: str | None = "UTC"
) -> pr.Promise:
    """What we would promise right now (nothing is held)."""
    return _promise_from(session, sku_id, quantity, now, tz)


def promise_and_list_price(
    session: Session,
    sku_id: str,
    quantity: int,
    now: datetime,
    tz: str | None = "UTC",
    *,
    extra: Any = None,
    extra_params: Mapping[str, Any] | None = None,
    extra_rows: list[Any] | None = None,
) -> tuple[pr.Promise, int]:
    """``current_promise`` and ``list_price_cents`` in one round trip (the checkout's, with
    its own look-up as ``extra``: a SELECT of (kind, integer, date, integer) built once;
    its rows go to ``extra_rows``)."""
    p, cents = _promise_and_price(
        session,
        sku_id,
        quantity,
        now,
        tz,
        price=True,
        extra=extra,
        extra_params=extra_params,
        extra_rows=extra_rows,
    )
    assert cents is not None
    return p, cents


def promises_for_all(
    session: Session, now: datetime, tz: str | None = "UTC"
) -> dict[str, pr.Promise]:
    return {s.id: current_promise(session, s.id, 1, now, tz) for s in all_specs()}


def _lock_sku(session: Session, sku_id: str, now: datetime) -> SkuStock:
    row = session.exec(select(SkuStock).where(SkuStock.sku_id == sku_id).with_for_update()).first()
    if row is None:
        lt = get_spec(sku_id).lead_time_business_days
        row = SkuStock(
            sku_id=sku_id,
            lead_time_business_days=DEFAULT_LEAD_DAYS if lt is None else int(lt),
            updated_at=now,
        )
        session.add(row)
        session.flush()
        row = session.exec(
            select(SkuStock).where(SkuStock.sku_id == sku_id).with_for_update()
        ).one()
    return row


_RESERVATIONS = cast(Table, StockReservation.__table__)  # type: ignore[attr-defined]
_STOCK = cast(Table, SkuStock.__table__)  # type: ignore[attr-defined]
# the SKU's stock row locked, its lead time read: one plain statement, no ORM object
_LOCK_SKU_LEAD = (
    sa_select(_STOCK.c.lead_time_business_days)
    .where(_STOCK.c.sku_id == bindparam("sku"))
    .with_for_update()
)


_BATCHES = cast(Table, IncomingBatch.__table__)  # type: ignore[attr-defined]
# units of an expected batch reserved, if it still has them: one plain statement
_TAKE_BATCH_UNITS = (
    update(_BATCHES)
    .where(
        _BATCHES.c.id == bindparam("batch_id"),
        _BATCHES.c.status == BatchStatus.expected.value,
        _BATCHES.c.quantity - _BATCHES.c.reserved >= bindparam("units"),
    )
    .values(reserved=_BATCHES.c.reserved + bindparam("units"))
    .returning(_BATCHES.c.reserved)
)


def _reserve_pg_statement() -> Any:
    """PostgreSQL: the batch units taken and the reservation row in ONE statement under the
    SKU lock. Each batch's UPDATE keeps its condition (still expected, still has the
    units); the reservation is inserted only when every batch gave its units, so a refused
    one leaves the reservation unwritten (the caller raises; its savepoint undoes the rest).
    Batch ids and units are arrays: the text is the same for any number of batches."""
    cols = [c for c in _RESERVATIONS.columns if not c.primary_key]

    def cast_(c: Any) -> str:
        return f"CAST(:r_{c.key} AS {pg_type_name(c.type)})"

    return text(
        "WITH b AS (UPDATE catalog_batches SET reserved = catalog_batches.reserved + v.units "
        "FROM unnest(CAST(:batch_ids AS INTEGER[]), CAST(:batch_units AS INTEGER[])) "
        "AS v (id, units) "
        "WHERE catalog_batches.id = v.id AND catalog_batches.status = :expected "
        "AND catalog_batches.quantity - catalog_batches.reserved >= v.units "
        "RETURNING catalog_batches.id, catalog_batches.reserved), "
        f"r AS (INSERT INTO catalog_reservations ({', '.join(c.key for c in cols)}) "
        f"SELECT {', '.join(cast_(c) for c in cols)} "
        "WHERE (SELECT count(*) FROM b) = CAST(:n_batches AS INTEGER) RETURNING id) "
        "SELECT NULL::INTEGER, NULL::INTEGER, (SELECT count(*) FROM r) "
        "UNION ALL SELECT id, reserved, NULL FROM b"
    )


_RESERVE_PG = _reserve_pg_statement()


def _take_batches_and_reserve_pg(
    session: Session, p: pr.Promise, order_id: int, frozen: dict[str, Any]
) -> None:
    ids = [b for b, _u in p.from_batches]
    params = {f"r_{k}": v for k, v in frozen.items()}
    params["r_order_id"] = order_id
    params["r_created_at"] = utc(frozen["created_at"])
    if isinstance(frozen.get("ready_at"), datetime):
        params["r_ready_at"] = utc(frozen["ready_at"])
    params.update(
        batch_ids=ids,
        batch_units=[u for _b, u in p.from_batches],
        n_batches=len(ids),
        expected=BatchStatus.expected.value,
    )
    made = 0
    for bid, reserved, n in session.connection().execute(_RESERVE_PG, params):
        if bid is None:
            made = int(n)
            continue
        loaded = session.identity_map.get(session.identity_key(IncomingBatch, int(bid)))
        if loaded is not None:  # a copy read earlier in this session shows the new count
            set_committed_value(loaded, "reserved", int(reserved))
    if not made:  # a batch no longer had the units: nothing reserved
        raise StockChanged(p)


def _active_reservation(session: Session, order_id: int) -> StockReservation | None:
    return session.exec(
        select(StockReservation).where(
            StockReservation.order_id == order_id, col(StockReservation.released_at).is_(None)
        )
    ).first()


def _promise_of(r: StockReservation) -> pr.Promise:
    gettext, fmt = _translate_and_format()
    params = json.loads(r.params_json or "{}")
    shown = {}
    for k, v in params.items():
        if k in ("arrival", "ready") and isinstance(v, str):
            try:
                shown[k] = fmt(date.fromisoformat(v))
                continue
            except ValueError:
                pass
        shown[k] = v
    try:
        text = gettext(r.message).format(**shown) if r.message else r.explanation
    except (KeyError, IndexError, ValueError):
        text = r.explanation
    batches = tuple((int(b), int(u)) for b, u in json.loads(r.batch_units_json or "[]"))
    return pr.Promise(
        sku_id=r.sku_id,
        quantity=r.quantity,
        available=True,
        in_stock=r.in_stock,
        date=r.promised_date,
        ready_at=r.ready_at,
        explanation=text,
        from_stock=r.from_stock,
        from_batches=batches,
        message=r.message,
        params=tuple(params.items()),
    )


def reserve_for_order(
    session: Session,
    *,
    order_id: int,
    sku_id: str,
    quantity: int,
    now: datetime,
    tz: str | None = "UTC",
    expected_date: date | None = None,
    new_order: bool = False,
) -> pr.Promise:
    """Hold nodes (available → held) and reserve batch units for an order; return the
    promise frozen for it. Idempotent per order: a second call returns the same promise.
    ``new_order``: the order was inserted in this very transaction, so it has no
    reservation yet (one read fewer).

    Raises ``TalkToSales`` when no date can be promised, and ``StockChanged`` when
    ``expected_date`` (what the customer saw) is earlier than what can be promised now.
    """
    # This order's reservations are read before the SKU lock: only a transaction holding
    # the order's row (the caller does: pay and cancel lock the order) changes them.
    # Everything from the lock to the caller's commit is time other buyers of this SKU
    # wait, so only what needs the lock happens under it: the promise's one read (nodes
    # and batches), one UPDATE for the nodes or the batch counters, the reservation row.
    mine = (
        []
        if new_order
        else session.exec(
            select(StockReservation).where(StockReservation.order_id == order_id)
        ).all()
    )
    existing = next((r for r in mine if r.released_at is None), None)
    if existing is not None:
        return _promise_of(existing)
    lead = session.connection().execute(_LOCK_SKU_LEAD, {"sku": sku_id}).scalar()
    if lead is None:  # no stock row yet: made (and locked) once per SKU
        lead = _lock_sku(session, sku_id, now).lead_time_business_days
    p = _promise_from(session, sku_id, quantity, now, tz, lead_days=int(lead))
    if not p.available or p.date is None or p.ready_at is None:
        raise TalkToSales(p)
    if expected_date is not None and p.date > expected_date:
        raise StockChanged(p)

    if p.from_stock:
        # available → held in one statement (the rows are picked and locked in the subquery).
        pick = (
            select(Node.id)
            .where(Node.sku_id == sku_id, Node.state == NodeState.available.value)
            .order_by(col(Node.id))
            .limit(p.from_stock)
            .with_for_update(skip_locked=True)
        )
        held = session.exec(  # type: ignore[call-overload]
            update(Node)
            .where(col(Node.id).in_(pick.scalar_subquery()))
            .values(state=NodeState.held.value, order_id=order_id, updated_at=now)
            .returning(col(Node.id))
            .execution_options(synchronize_session="fetch")
        ).all()
        if len(held) < p.from_stock:  # cannot happen under the SKU lock; never over-promise
            raise StockChanged(p)
    params = {k: (v.isoformat() if isinstance(v, date) else v) for k, v in p.params}
    frozen = {
        "sku_id": sku_id,
        "quantity": quantity,
        "from_stock": p.from_stock,
        "batch_units_json": json.dumps([[b, u] for b, u in p.from_batches]),
        "promised_date": p.date,
        "ready_at": p.ready_at,
        "in_stock": p.in_stock,
        "explanation": p.explanation[:300],
        "message": p.message,
        "params_json": json.dumps(params),
        "created_at": now,
        "released_at": None,
    }
    if not mine and is_postgres(session):  # the usual case: one statement
        _take_batches_and_reserve_pg(session, p, order_id, frozen)
        return p
    for batch_id, units in p.from_batches:
        took = (
            session.connection()
            .execute(_TAKE_BATCH_UNITS, {"batch_id": batch_id, "units": units})
            .scalar()
        )
        if took is None:
            raise StockChanged(p)
        loaded = session.identity_map.get(session.identity_key(IncomingBatch, batch_id))
        if loaded is not None:  # a copy read earlier in this session shows the new count
            set_committed_value(loaded, "reserved", int(took))
    if not mine:  # the usual case: one plain INSERT, no ORM object
        session.connection().execute(sa_insert(_RESERVATIONS), {"order_id": order_id, **frozen})
        return p
    # A reservation released earlier for this order (cancelled, then paid again) is reused.
    r = mine[0]
    for k, v in frozen.items():
        setattr(r, k, v)
    session.add(r)
    session.flush()
    return p


def frozen_promise(session: Session, order_id: int) -> pr.Promise | None:
    r = _active_reservation(session, order_id)
    return _promise_of(r) if r else None


def release_for_order(session: Session, order_id: int, now: datetime) -> int:
    """Give back what an order holds (cancel/refund): held nodes → available, nodes being
    provisioned → wiping (the customer's keys may be on them), batch units → free.
    Leased nodes are untouched (a lease ends through ``mark_nodes``). Returns nodes freed."""
    freed = 0
    r = _active_reservation(session, order_id)
    if r is not None:
        _lock_sku(session, r.sku_id, now)
    for n in nodes_for_order(session, order_id):
        if n.state == NodeState.held.value:
            n.state = NodeState.available.value
            n.order_id = None
            freed += 1
        elif n.state == NodeState.provisioning.value:
            n.state = NodeState.wiping.value
        else:
            continue
        n.updated_at = now
        session.add(n)
    if r is not None:
        for batch_id, units in json.loads(r.batch_units_json or "[]"):
            b = session.get(IncomingBatch, int(batch_id))
            if b is not None and b.status == BatchStatus.expected.value:
                b.reserved = max(0, b.reserved - int(units))
                session.add(b)
        r.batch_units_json = "[]"
        r.released_at = now
        session.add(r)
    session.flush()
    return freed


def nodes_for_order(session: Session, order_id: int) -> list[Node]:
    return list(
        session.exec(select(Node).where(Node.order_id == order_id).order_by(col(Node.id))).all()
    )


def waiting_units(session: Session, order_id: int) -> int:
    """Units of the order still waiting for an incoming batch."""
    r = _active_reservation(session, order_id)
    if r is None:
        return 0
    return sum(int(u) for _b, u in json.loads(r.batch_units_json or "[]"))


ALLOWED_ORDER_STATES = {
    NodeState.held.value,
    NodeState.provisioning.value,
    NodeState.leased.value,
    NodeState.wiping.value,
    NodeState.available.value,
}


def mark_nodes(session: Session, order_id: int, state: str, now: datetime) -> list[Node]:
    """Move every node of an order to ``state`` (ops: provisioning → leased → wiping →
    available). ``available`` unlinks the nodes from the order."""
    if state not in ALLOWED_ORDER_STATES:
        raise InvalidInput(N_("Unknown node state."), field="state")
    nodes = nodes_for_order(session, order_id)
    for n in nodes:
        n.state = state
        if state == NodeState.available.value:
            n.order_id = None
        n.updated_at = now
        session.add(n)
    if state in (NodeState.wiping.value, NodeState.available.value):
        r = _active_reservation(session, order_id)
        if r is not None and state == NodeState.available.value:
            r.released_at = now
            session.add(r)
    session.flush()
    return nodes


def free_nodes(session: Session, sku_id: str, limit: int = 200) -> list[Node]:
    """Free nodes of a SKU, by hostname (ops may swap one into an order)."""
    return list(
        session.exec(
            select(Node)
            .where(Node.sku_id == sku_id, Node.state == NodeState.available.value)
            .order_by(col(Node.hostname))
            .limit(limit)
        ).all()
    )


def swap_nodes(
    session: Session, *, order_id: int, wanted: list[int], provisioning: bool, now: datetime
) -> list[Node]:
    """Make exactly ``wanted`` the nodes of the order (ops picked them): free nodes are
    taken (``held``, or ``provisioning`` once set-up started), the order's other nodes go
    back (to ``wiping`` if set-up had started on them — they may hold the customer's keys —
    else ``available``). Rows are locked first; a node another order took meanwhile →
    ``Conflict``. Returns the wanted rows in the order given."""
    own_ids = {n.id for n in nodes_for_order(session, order_id)}
    locked = {
        n.id: n
        for n in session.exec(
            select(Node).where(col(Node.id).in_(set(wanted) | own_ids)).with_for_update()
        ).all()
    }
    state = NodeState.provisioning.value if provisioning else NodeState.held.value
    for nid in wanted:
        n = locked.get(nid)
        if n is None or (
            n.order_id not in (None, order_id)
            or (n.order_id is None and n.state != NodeState.available.value)
        ):
            raise Conflict(N_("Another order took node {node} just now. Pick again."), node=nid)
        n.order_id = order_id
        n.state = state
        n.updated_at = now
        session.add(n)
    for gone_id in own_ids - set(wanted):
        gone = locked[gone_id]
        gone.state = (
            NodeState.wiping.value
            if gone.state == NodeState.provisioning.value
            else NodeState.available.value
        )
        gone.order_id = None
        gone.updated_at = now
        session.add(gone)
    session.flush()
    return [locked[nid] for nid in wanted]


# ------------------------------------------------------------------ IPs

SKU_SUBNETS = {
    "hgx-h100": "10.20.1.0/24",
    "hgx-h200": "10.20.2.0/24",
    "hgx-b200": "10.20.3.0/24",
    "hgx-b300": "10.20.4.0/24",
    "mi355x": "10.20.5.0/24",
    "gb300-nvl72": "10.20.6.0/24",
}


def subnet_for(sku_id: str) -> ipaddress.IPv4Network:
    return ipaddress.ip_network(SKU_SUBNETS.get(sku_id, "10.20.99.0/24"))  # type: ignore[return-value]


def free_ip_pool(session: Session, sku_id: str, limit: int = 16) -> list[str]:
    """Unused management addresses in the SKU's private subnet (first ten reserved)."""
    used = set(session.exec(select(Node.mgmt_ip).where(Node.mgmt_ip != "")).all())
    out = []
    for i, host in enumerate(subnet_for(sku_id).hosts()):
        if i < 10:
            continue
        if str(host) not in used:
            out.append(str(host))
            if len(out) >= limit:
                break
    return out


# ------------------------------------------------------------------ ops: nodes and batches


def _valid_ip(ip: str) -> str:
    ip = ip.strip()
    if not ip:
        return ""
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        raise InvalidInput(N_("Enter an IP address like 10.20.3.14."), field="mgmt_ip") from None


def _next_hostname(session: Session, sku_id: str) -> str:
    short = sku_id.replace("hgx-", "")
    n = session.exec(select(func.count()).select_from(Node).where(Node.sku_id == sku_id)).one()
    k = int(n) + 1
    while session.exec(select(Node).where(Node.hostname == f"{short}-{k:03d}")).first():
        k += 1
    return f"{short}-{k:03d}"


def add_node(
    session: Session,
    *,
    sku_id: str,
    now: datetime,
    actor: Any = None,
    hostname: str = "",
    mgmt_ip: str = "",
    state: str = NodeState.available.value,
    batch_id: int | None = None,
    order_id: int | None = None,
    ip: str = "",
) -> Node:
    s = get_spec(sku_id)
    if not s.self_serve:
        raise InvalidInput(
            N_("Racks are handled by sales; they are not stocked as nodes."), field="sku_id"
        )
    if state not in (NodeState.available.value, NodeState.maintenance.value, NodeState.held.value):
        raise InvalidInput(N_("A new node starts as available or in maintenance."), field="state")
    hostname = hostname.strip() or _next_hostname(session, sku_id)
    if len(hostname) > 80:
        raise InvalidInput(N_("Keep the host name under 80 characters."), field="hostname")
    if session.exec(select(Node).where(Node.hostname == hostname)).first():
        raise InvalidInput(N_("Another node already has this host name."), field="hostname")
    ip_ = _valid_ip(mgmt_ip)
    if not ip_:
        pool = free_ip_pool(session, sku_id, 1)
        ip_ = pool[0] if pool else ""
    elif session.exec(select(Node).where(Node.mgmt_ip == ip_)).first():
        raise InvalidInput(N_("Another node already uses this address."), field="mgmt_ip")
    node = Node(
        sku_id=sku_id,
        hostname=hostname,
        state=state,
        mgmt_ip=ip_,
        batch_id=batch_id,
        order_id=order_id,
        created_at=now,
        updated_at=now,
    )
    session.add(node)
    session.flush()
    audit.record(
        session,
        action="catalog.node_added",
        now=now,
        actor=actor,
        target=f"node:{node.id}",
        ip=ip,
        sku=sku_id,
        hostname=hostname,
        mgmt_ip=ip_,
        state=state,
    )
    return node


# Which states ops may set by hand on the stock page. Nodes tied to an order move with the
# order (mark_nodes); by hand only free nodes move between available and maintenance, and a
# node whose wipe finished goes back to available.
MANUAL_STATES = (NodeState.available.value, NodeState.maintenance.value)


def update_node(
    session: Session,
    node_id: int,
    *,
    now: datetime,
    actor: Any = None,
    state: str | None = None,
    mgmt_ip: str | None = None,
    note: str | None = None,
    ip: str = "",
) -> Node:
    node = session.get(Node, node_id)
    if node is None:
        raise NotFound(N_("There is no such node."))
    _lock_sku(session, node.sku_id, now)
    session.refresh(node)
    before = {"state": node.state, "mgmt_ip": node.mgmt_ip}
    if state is not None and state != node.state:
        if state not in MANUAL_STATES:
            raise InvalidInput(
                N_("By hand, a node can only be made available or put in maintenance."),
                field="state",
            )
        if node.order_id is not None and node.state != NodeState.wiping.value:
            raise Conflict(N_("This node belongs to an order; change it from the order."))
        node.state = state
        if state == NodeState.available.value:
            node.order_id = None
    if mgmt_ip is not None:
        new_ip = _valid_ip(mgmt_ip)
        if new_ip and new_ip != node.mgmt_ip:
            clash = session.exec(
                select(Node).where(Node.mgmt_ip == new_ip, Node.id != node.id)
            ).first()
            if clash:
                raise InvalidInput(N_("Another node already uses this address."), field="mgmt_ip")
        node.mgmt_ip = new_ip
    if note is not None:
        node.note = note.strip()[:300]
    node.updated_at = now
    session.add(node)
    audit.record(
        session,
        action="catalog.node_changed",
        now=now,
        actor=actor,
        target=f"node:{node.id}",
        ip=ip,
        before=before,
        after={"state": node.state, "mgmt_ip": node.mgmt_ip},
    )
    session.flush()
    return node


def add_batch(
    session: Session,
    *,
    sku_id: str,
    quantity: int,
    expected_on: date,
    now: datetime,
    actor: Any = None,
    note: str = "",
    ip: str = "",
) -> IncomingBatch:
    s = get_spec(sku_id)
    errors = {}
    if not s.self_serve:
        errors["sku_id"] = N_("Racks are handled by sales; they are not stocked as nodes.")
    if not 1 <= quantity <= 500:
        errors["quantity"] = N_("A batch has between 1 and 500 nodes.")
    if expected_on < now.date():
        errors["expected_on"] = N_("The expected date cannot be in the past.")
    if errors:
        raise InvalidInput(errors=errors)
    b = IncomingBatch(
        sku_id=sku_id,
        quantity=quantity,
        expected_on=expected_on,
        note=note.strip()[:300],
        created_at=now,
    )
    session.add(b)
    session.flush()
    audit.record(
        session,
        action="catalog.batch_added",
        now=now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        sku=sku_id,
        quantity=quantity,
        expected_on=expected_on.isoformat(),
    )
    return b


def update_batch(
    session: Session,
    batch_id: int,
    *,
    now: datetime,
    actor: Any = None,
    quantity: int | None = None,
    expected_on: date | None = None,
    ip: str = "",
) -> IncomingBatch:
    b = session.get(IncomingBatch, batch_id)
    if b is None:
        raise NotFound(N_("There is no such batch."))
    _lock_sku(session, b.sku_id, now)
    session.refresh(b)
    if b.status != BatchStatus.expected.value:
        raise Conflict(N_("This batch has already arrived."))
    errors = {}
    if quantity is not None and not max(1, b.reserved) <= quantity <= 500:
        errors["quantity"] = N_("Between the units already promised to orders and 500.")
    if expected_on is not None and expected_on < now.date():
        errors["expected_on"] = N_("The expected date cannot be in the past.")
    if errors:
        raise InvalidInput(errors=errors)
    before = {"quantity": b.quantity, "expected_on": b.expected_on.isoformat()}
    if quantity is not None:
        b.quantity = quantity
    if expected_on is not None:
        b.expected_on = expected_on
    session.add(b)
    audit.record(
        session,
        action="catalog.batch_changed",
        now=now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        before=before,
        after={"quantity": b.quantity, "expected_on": b.expected_on.isoformat()},
    )
    session.flush()
    return b


def mark_batch_arrived(
    session: Session, batch_id: int, *, now: datetime, actor: Any = None, ip: str = ""
) -> list[Node]:
    """The batch is in the data centre: create its nodes; units promised to orders become
    nodes held for those orders (oldest reservation first), the rest are available."""
    b = session.get(IncomingBatch, batch_id)
    if b is None:
        raise NotFound(N_("There is no such batch."))
    _lock_sku(session, b.sku_id, now)
    session.refresh(b)
    if b.status != BatchStatus.expected.value:
        raise Conflict(N_("This batch has already arrived."))
    # Orders waiting on this batch, oldest first.
    waiting: list[tuple[StockReservation, int]] = []
    for r in session.exec(
        select(StockReservation)
        .where(StockReservation.sku_id == b.sku_id, col(StockReservation.released_at).is_(None))
        .order_by(col(StockReservation.created_at), col(StockReservation.id))
    ).all():
        units = json.loads(r.batch_units_json or "[]")
        for bid, u in units:
            if int(bid) == b.id:
                waiting.append((r, int(u)))
    nodes = []
    for r, units in waiting:
        for _ in range(units):
            nodes.append(
                add_node(
                    session,
                    sku_id=b.sku_id,
                    now=now,
                    actor=actor,
                    state=NodeState.held.value,
                    batch_id=b.id,
                    order_id=r.order_id,
                    ip=ip,
                )
            )
        rest = [[bid, u] for bid, u in json.loads(r.batch_units_json or "[]") if int(bid) != b.id]
        r.batch_units_json = json.dumps(rest)
        r.from_stock += units
        session.add(r)
    for _ in range(b.quantity - len(nodes)):
        nodes.append(add_node(session, sku_id=b.sku_id, now=now, actor=actor, batch_id=b.id, ip=ip))
    b.status = BatchStatus.arrived.value
    b.arrived_at = now
    b.reserved = 0
    session.add(b)
    audit.record(
        session,
        action="catalog.batch_arrived",
        now=now,
        actor=actor,
        target=f"batch:{b.id}",
        ip=ip,
        nodes=len(nodes),
    )
    session.flush()
    return nodes


def set_lead_time(
    session: Session, sku_id: str, days: int, *, now: datetime, actor: Any = None, ip: str = ""
) -> SkuStock:
    get_spec(sku_id)
    if not 1 <= days <= 60:
        raise InvalidInput(N_("Lead time is between 1 and 60 business days."), field="lead_time")
    row = _lock_sku(session, sku_id, now)
    old = row.lead_time_business_days
    row.lead_time_business_days = days
    row.updated_at = now
    session.add(row)
    audit.record(
        session,
        action="catalog.lead_time_changed",
        now=now,
        actor=actor,
        target=f"sku:{sku_id}",
        ip=ip,
        old=old,
        new=days,
    )
    session.flush()
    return row


def all_nodes(session: Session) -> list[Node]:
    return list(session.exec(select(Node).order_by(col(Node.sku_id), col(Node.hostname))).all())


def all_batches(session: Session, include_done: bool = False) -> list[IncomingBatch]:
    q = select(IncomingBatch).order_by(col(IncomingBatch.expected_on), col(IncomingBatch.id))
    if not include_done:
        q = q.where(IncomingBatch.status == BatchStatus.expected.value)
    return list(session.exec(q).all())
