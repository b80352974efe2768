"""What can be promised: nodes available, expected batches, the lead time, as one read.

``current_promise`` reads and promises in one round trip. A
caller that reads more in the same round trip (the checkout) composes the statement
itself: ``promise_reads()`` is the catalog's part (rows of the kinds in
``PROMISE_KINDS``), ``promise_from_rows`` turns those rows into the promise. The catalog
never runs a caller's SQL."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Date,
    Integer,
    String,
    bindparam,
    func,
    literal,
    union_all,
)
from sqlmodel import Session, col, select

from app import i18n, messages
from app.catalog import promise as pr
from app.catalog.models import (
    BatchStatus,
    IncomingBatch,
    ListPrice,
    Node,
    NodeState,
    SkuStock,
)
from app.catalog.prices import get_spec
from app.catalog.specs import all_specs
from app.errors import N_, Conflict, InvalidInput

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


def translate_and_format() -> tuple[Any, Any]:
    """The request's gettext and the date format every customer reads (for the promise)."""

    def fmt(d: date) -> str:
        return messages.format_day(d)

    return i18n.gettext, fmt


# The kinds of the promise's rows: nodes available, an open batch, lead days, list price.
PROMISE_KINDS = frozenset({"n", "b", "l", "p"})


def _promise_reads_statement(lead: bool, price: bool) -> CompoundSelect:
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


_PROMISE_READS = {
    (lead, price): _promise_reads_statement(lead, price)
    for lead in (False, True)
    for price in (False, True)
}


def promise_reads(*, lead: bool = True, price: bool = True) -> CompoundSelect:
    """The promise's reads as one ``UNION ALL`` of rows (kind, id, date, value), the SKU the
    bind parameter ``sku``: nodes available ("n"), each open batch ("b": id, expected date,
    units left), with ``lead`` the stock row's lead time ("l"), with ``price`` the stored
    list price ("p"). Built once per shape. A caller that reads more in the same round trip
    appends its own SELECTs of four such columns (other kinds) to ``.selects`` and hands
    the catalog's rows to ``promise_from_rows``."""
    return _PROMISE_READS[lead, price]


@dataclass(frozen=True)
class StockRows:
    """The promise's rows, read: nodes available, open batches (by date, then id), the
    stored lead days and list price (None where not read or not stored)."""

    in_stock: int
    batches: list[pr.Batch]
    lead_days: int | None
    list_price_cents: int | None


def stock_rows(rows: Iterable[Any]) -> StockRows:
    """The rows of ``promise_reads`` (rows of other kinds are skipped)."""
    in_stock, lead_days, cents, found = 0, None, None, []
    for kind, bid, on, v in rows:
        if kind == "n":
            in_stock = int(v)
        elif kind == "l":
            lead_days = int(v)
        elif kind == "p":
            cents = int(v)
        elif kind == "b":
            found.append((on, int(bid), max(0, int(v))))
    found.sort()  # by expected date, then id (as open_batches)
    batches = [pr.Batch(expected=on, units=v, id=bid) for on, bid, v in found]
    return StockRows(in_stock, batches, lead_days, cents)


def promise_from_rows(
    sku_id: str,
    quantity: int,
    now: datetime,
    rows: Iterable[Any],
    *,
    tz: str | None = "UTC",
    lead_days: int | None = None,
) -> tuple[pr.Promise, int]:
    """The promise and the list price from the rows of ``promise_reads`` (read by the
    caller, in its own round trip); ``lead_days`` when already known (under the lock)."""
    s = get_spec(sku_id)
    if quantity < 1:
        raise InvalidInput(N_("Choose at least one node."), field="quantity")
    read = stock_rows(rows)
    if lead_days is None:
        lead_days = read.lead_days if read.lead_days is not None else _default_lead(sku_id)
    gettext, fmt = translate_and_format()
    p = pr.promise(
        sku_id,
        quantity,
        now,
        in_stock=read.in_stock if s.self_serve else 0,
        batches=read.batches,
        lead_business_days=lead_days,
        self_serve=s.self_serve,
        tz=tz,
        gettext=gettext,
        format_day=fmt,
    )
    cents = read.list_price_cents
    return p, cents if cents is not None else s.list_price_cents_month


def _promise(
    session: Session,
    sku_id: str,
    quantity: int,
    now: datetime,
    tz: str | None,
    *,
    lead_days: int | None = None,
) -> pr.Promise:
    get_spec(sku_id)  # before any read: an unknown SKU, then a bad quantity
    if quantity < 1:
        raise InvalidInput(N_("Choose at least one node."), field="quantity")
    stmt = promise_reads(lead=lead_days is None, price=False)
    rows = session.connection().execute(stmt, {"sku": sku_id}).all()
    return promise_from_rows(sku_id, quantity, now, rows, tz=tz, lead_days=lead_days)[0]


def promise_with_lead(
    session: Session, sku_id: str, quantity: int, now: datetime, tz: str | None, lead_days: int
) -> pr.Promise:
    """The promise with the lead time already read (under the SKU lock): one read."""
    return _promise(session, sku_id, quantity, now, tz, lead_days=lead_days)


def current_promise(
    session: Session, sku_id: str, quantity: int, now: datetime, tz: str | None = "UTC"
) -> pr.Promise:
    """What we would promise right now (nothing is held). One round trip."""
    return _promise(session, sku_id, quantity, now, tz)


def promises_for_all(
    session: Session, now: datetime, tz: str | None = "UTC"
) -> dict[str, pr.Promise]:
    return {s.id: current_promise(session, s.id, 1, now, tz) for s in all_specs()}
