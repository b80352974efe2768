"""The orders domain's own writes as plain statements: timeline events, a new order with
its "created" event (one statement on PostgreSQL), the order's UPDATE, and the builders the
paid checkout composes (``paid_update``, ``event_insert``: SQLAlchemy Core over this
domain's tables, with bind parameters named for them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, FromClause, Integer, Table, bindparam
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlalchemy import update as sa_update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col, select

from app import messages
from app.accounts.models import User
from app.db import is_postgres
from app.orders.models import Order, OrderEvent

EVENTS = cast(Table, OrderEvent.__table__)  # type: ignore[attr-defined]
ORDERS = cast(Table, Order.__table__)  # type: ignore[attr-defined]


def event_values(
    order: Order,
    kind: str,
    message: str,
    now: datetime,
    actor: User | int | None,
    customer_visible: bool,
    params: dict[str, Any] | None,
) -> dict[str, Any]:
    """An event's column values (``order_id`` None for an order not inserted yet)."""
    return {
        "order_id": order.id,
        "at": now,
        "kind": kind[:40],
        "message": messages.render(message, params, locale="en")[:1000],
        "msgid": message,
        "params": messages.encode(params),
        "actor_id": actor.id if isinstance(actor, User) else actor,
        "customer_visible": customer_visible,
    }


def add_event(
    session: Session,
    order: Order,
    kind: str,
    message: str,
    now: datetime,
    actor: User | int | None = None,
    *,
    customer_visible: bool = True,
    params: dict[str, Any] | None = None,
    flush: bool = True,
) -> OrderEvent:
    """Append a timeline entry (shared with the ops desk).

    ``message`` is an English msgid (``N_``) with ``{name}`` parameters: the event is
    stored as that code and rendered in the reader's language (app/notifications/
    messages.py); the English text is kept as well, for logs and exports."""
    ev = OrderEvent(**event_values(order, kind, message, now, actor, customer_visible, params))
    session.add(ev)
    if flush:  # flush=False: the next flush writes it (with the checkout's other rows)
        session.flush()
    return ev


# --- a new order -------------------------------------------------------------------------

_EVENT_COLUMNS = [c for c in EVENTS.columns if c.key not in ("id", "order_id")]


_NEW_ORDER = (
    pg_insert(ORDERS)
    .values({c.key: bindparam(f"o_{c.key}", type_=c.type) for c in ORDERS.columns if c.key != "id"})
    .on_conflict_do_nothing(index_elements=["user_id", "idempotency_key"])
    .returning(*ORDERS.columns)
    .cte("new_order")
)


_ORDER_AND_EVENT_PG = sa_select(*_NEW_ORDER.c).add_cte(
    sa_insert(EVENTS)
    .from_select(
        ["order_id", *(c.key for c in _EVENT_COLUMNS)],
        sa_select(
            _NEW_ORDER.c.id,
            *(bindparam(f"e_{c.key}", type_=c.type) for c in _EVENT_COLUMNS),
        ),
    )
    .cte("created_event")
)


_ORDER_INSERT_SQLITE = (
    sqlite_insert(ORDERS)
    .on_conflict_do_nothing(index_elements=["user_id", "idempotency_key"])
    .returning(*ORDERS.columns)
)

# The same statements loaded as ``Order`` objects, built once: a statement object keeps its
# cache key once computed, so SQLAlchemy does not walk these large statements on every call
# (docs/benchmarks-ab.md, "Statements built once").
_LOAD_ORDER_AND_EVENT_PG = select(Order).from_statement(_ORDER_AND_EVENT_PG)
_LOAD_ORDER_SQLITE = select(Order).from_statement(_ORDER_INSERT_SQLITE)


def insert_new_order(session: Session, order: Order, created: dict[str, Any]) -> Order | None:
    """INSERT … ON CONFLICT (user, key) DO NOTHING RETURNING the row, and the order's
    "created" timeline event (``created``: its values, the order id aside): the new order
    as the session loads it from what the INSERT returned, or None when an order with this
    key exists (no savepoint, no retry; no event either). On PostgreSQL both rows are one
    statement (a data-modifying WITH: the event is inserted only for an order this
    statement inserted). ``order``: the values, a new object never added to the session."""
    values = {c.key: getattr(order, c.key) for c in ORDERS.columns if c.key != "id"}
    if is_postgres(session):
        params = {f"o_{k}": v for k, v in values.items()}
        params.update({f"e_{k}": v for k, v in created.items() if k != "order_id"})
        return session.scalars(_LOAD_ORDER_AND_EVENT_PG, params).one_or_none()
    new = session.scalars(_LOAD_ORDER_SQLITE, values).one_or_none()
    if new is not None:
        session.connection().execute(sa_insert(EVENTS), {**created, "order_id": new.id})
    return new


# --- the order's own UPDATE -------------------------------------------------------------


def update_order_now(session: Session, order: Order, changes: dict[str, Any]) -> None:
    """One UPDATE of the order's row now (an ORM UPDATE: the loaded object takes the new
    values without a read and without a second UPDATE at the next flush, and a rolled-back
    savepoint expires them)."""
    session.execute(sa_update(Order).where(col(Order.id) == order.id).values(changes))


# --- builders the paid checkout composes --------------------------------------------------


def paid_update(changes: tuple[str, ...], hold_id: ColumnElement[int]) -> Any:
    """The paid order's UPDATE: ``changes`` from parameters ``o_<column>``, the row by
    ``o_id``, ``first_hold_id`` set to ``hold_id`` (a column of the hold's statement — on
    PostgreSQL ``UPDATE … FROM`` it, so the order is paid only with the hold — or a
    parameter). Values: ``paid_update_params``."""
    values: dict[str, Any] = {k: bindparam(f"o_{k}", type_=ORDERS.c[k].type) for k in changes}
    return (
        sa_update(ORDERS)
        .where(
            ORDERS.c.id == bindparam("o_id", type_=Integer),
            # true for a new hold; it names how the order's row meets the hold's row
            ORDERS.c.first_hold_id.is_distinct_from(hold_id),
        )
        .values({**values, "first_hold_id": hold_id})
    )


def paid_update_params(order_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    return {"o_id": order_id, **{f"o_{k}": v for k, v in changes.items()}}


_EVENT_INSERT_COLUMNS = [c.key for c in EVENTS.columns if c.key != "id"]


def event_insert(gate: FromClause | None) -> Any:
    """One timeline event's INSERT over parameters ``ev_<column>`` (``event_params``);
    with ``gate`` (a one-row selectable of the composed statement) it is written only
    when ``gate`` has its row; None: INSERT … VALUES."""
    values = [bindparam(f"ev_{k}", type_=EVENTS.c[k].type) for k in _EVENT_INSERT_COLUMNS]
    if gate is None:
        return sa_insert(EVENTS).values(dict(zip(_EVENT_INSERT_COLUMNS, values, strict=True)))
    return sa_insert(EVENTS).from_select(
        _EVENT_INSERT_COLUMNS, sa_select(*values).select_from(gate)
    )


def event_params(values: dict[str, Any]) -> dict[str, Any]:
    return {f"ev_{k}": v for k, v in values.items()}
