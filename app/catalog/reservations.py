"""Nodes held for orders: the SKU's stock row locked, free nodes and expected batch units
reserved, released, marked as the order moves, swapped by ops.

Racing for the last node: ``reserve_for_order`` first locks the SKU's ``catalog_sku_stock``
row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite already serialises writers with
``BEGIN IMMEDIATE``), then counts what is free and holds it, all in the caller's
transaction. A second buyer waits for the first to commit and then sees the later date."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any, cast

from sqlalchemy import (
    Table,
    bindparam,
    text,
    update,
)
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from app.catalog import promise as pr
from app.catalog.models import (
    BatchStatus,
    IncomingBatch,
    Node,
    NodeState,
    SkuStock,
    StockReservation,
)
from app.catalog.prices import get_spec
from app.catalog.stock import (
    DEFAULT_LEAD_DAYS,
    StockChanged,
    TalkToSales,
    promise_with_lead,
    translate_and_format,
)
from app.clock import utc
from app.db import is_postgres, pg_type_name
from app.errors import N_, Conflict, InvalidInput


def lock_sku(session: Session, sku_id: str, now: datetime) -> SkuStock:
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
    for bid, _reserved, n in session.connection().execute(_RESERVE_PG, params):
        if bid is None:
            made = int(n)
            continue
        _forget_loaded(session, int(bid))
    if not made:  # a batch no longer had the units: nothing reserved
        raise StockChanged(p)


def _forget_loaded(session: Session, batch_id: int | None) -> None:
    """A copy of the batch read earlier in this session reads its reserved count again (a
    plain UPDATE changed it behind the ORM)."""
    loaded = session.identity_map.get(session.identity_key(IncomingBatch, batch_id))
    if loaded is not None:
        session.expire(loaded, ["reserved"])


def open_reservations(session: Session, sku_id: str) -> list[StockReservation]:
    """The SKU's reservations not released yet, oldest first."""
    return list(
        session.exec(
            select(StockReservation)
            .where(StockReservation.sku_id == sku_id, col(StockReservation.released_at).is_(None))
            .order_by(col(StockReservation.created_at), col(StockReservation.id))
        ).all()
    )


def _active_reservation(session: Session, order_id: int) -> StockReservation | None:
    return session.exec(
        select(StockReservation).where(
            StockReservation.order_id == order_id, col(StockReservation.released_at).is_(None)
        )
    ).first()


def _promise_of(r: StockReservation) -> pr.Promise:
    gettext, fmt = translate_and_format()
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
        lead = lock_sku(session, sku_id, now).lead_time_business_days
    p = promise_with_lead(session, sku_id, quantity, now, tz, int(lead))
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
        _forget_loaded(session, batch_id)
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
        lock_sku(session, r.sku_id, now)
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
