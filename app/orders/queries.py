"""Reads of orders that know who asks: a customer's own orders (others' ids are 404), the
timeline, hosts, and what paying would do (``review``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime

from sqlmodel import Session, col, select

from app.accounts.models import User
from app.catalog import service as catalog
from app.clock import utc
from app.ledger import service as ledger
from app.orders.errors import OrderNotFound
from app.orders.lifecycle import OrderStatus, is_late
from app.orders.models import Order, OrderEvent, OrderHost
from app.quotes import service as quotes


def balance_of(session: Session, user: User | None) -> tuple[int | None, int | None]:
    """(available, held) in cents, or (None, None) for a visitor."""
    if user is None or user.id is None:
        return None, None

    return ledger.available_cents(session, user.id), ledger.held_cents(session, user.id)


def timeline(session: Session, order_id: int, *, customer: bool = True) -> list[OrderEvent]:
    stmt = select(OrderEvent).where(OrderEvent.order_id == order_id)
    if customer:
        stmt = stmt.where(col(OrderEvent.customer_visible).is_(True))
    stmt = stmt.order_by(col(OrderEvent.at), col(OrderEvent.id))
    return list(session.exec(stmt).all())


def hosts_of(session: Session, order_id: int) -> list[OrderHost]:
    stmt = select(OrderHost).where(OrderHost.order_id == order_id).order_by(col(OrderHost.id))
    return list(session.exec(stmt).all())


def visible_orders(session: Session, user: User, limit: int = 200) -> list[Order]:
    stmt = (
        select(Order)
        .where(Order.user_id == user.id)
        .order_by(col(Order.created_at).desc(), col(Order.id).desc())
        .limit(limit)
    )
    return list(session.exec(stmt).all())


def get_order_for(session: Session, user: User, order_id: int, *, lock: bool = False) -> Order:
    """The user's own order, or 404 (also for other customers' ids). With ``lock`` the row
    as it is once locked, even when this session read it before (an idempotent replay):
    the identity map's older copy would let a payment overwrite a discard committed while
    it waited for the lock."""
    stmt = select(Order).where(Order.id == order_id, Order.user_id == user.id)
    if lock:
        stmt = stmt.with_for_update().execution_options(populate_existing=True)
    order = session.exec(stmt).first()
    if order is None:
        raise OrderNotFound()
    return order


def is_order_late(order: Order, now: datetime) -> bool:
    return is_late(order.status, order.promised_date, now)


def ssh_keys_of(order: Order) -> list[dict[str, str]]:
    try:
        data = json.loads(order.ssh_keys_json or "[]")
    except ValueError:
        return []
    return [k for k in data if isinstance(k, dict)]


@dataclass
class Review:
    order: Order
    promise_date: date | None
    promise_explanation: str
    promise_available: bool
    available_cents: int
    shortfall_cents: int
    quote_expired: bool  # the quote no longer holds (expired or withdrawn): list price
    unit_cents: int  # what paying now charges per node-month
    total_cents: int  # ... and for the first month


def review(session: Session, order: Order, now: datetime) -> Review:
    """What paying now would do: the promise recomputed now, balance and shortfall."""

    if order.status == OrderStatus.awaiting_payment.value:
        p = catalog.current_promise(session, order.sku_id, order.quantity, now)
        pdate, expl, ok = p.date, p.explanation, bool(p.available)
    else:
        pdate, expl, ok = order.promised_date, order.promise_explanation, True
    available = ledger.available_cents(session, order.user_id)
    awaiting = order.status == OrderStatus.awaiting_payment.value
    quote_expired = bool(order.quote_expires_at is not None and utc(order.quote_expires_at) <= now)
    if awaiting and order.quote_id is not None and not quote_expired:
        # withdrawn by sales meanwhile: the page showed the quoted price checkout then refused
        quote_expired = not quotes.quote_price_honoured(session, order.quote_id, now)
    unit = order.unit_price_cents
    if awaiting and quote_expired:  # paying now charges the list price (checkout reprices)
        unit = catalog.list_price_cents(session, order.sku_id)
    total = unit * order.quantity
    return Review(
        order=order,
        promise_date=pdate,
        promise_explanation=expl,
        promise_available=ok,
        available_cents=available,
        shortfall_cents=max(0, (total if awaiting else 0) - available),
        quote_expired=quote_expired,
        unit_cents=unit,
        total_cents=total,
    )


def order_link(order: Order) -> str:
    return f"/console/orders/{order.id}"


def lease_credit_problems(session: Session) -> list[str]:
    """Early-end lease credits that do not reconcile with their orders: more than one per
    order, none of its customer's, or more than the order's monthly total (one line each)."""
    credits = ledger.lease_credits(session)
    ids = {c.order_id for c in credits if c.order_id is not None}
    orders = {o.id: o for o in session.exec(select(Order).where(col(Order.id).in_(ids))).all()}
    by_order: dict[int | None, list[ledger.Credit]] = {}
    for c in credits:
        by_order.setdefault(c.order_id, []).append(c)
    bad = []
    for order_id, cs in by_order.items():
        o = orders.get(order_id) if order_id is not None else None
        if (
            len(cs) > 1
            or o is None
            or any(c.user_id != o.user_id for c in cs)
            or max(c.amount_cents for c in cs) > o.monthly_total_cents
        ):
            bad.append(f"{order_id}, {len(cs)}")
    return bad
