"""The paid checkout: awaiting_payment → paid in one transaction (the first month held in
the ledger, the nodes reserved, the promise frozen, the paid event, notification and email).

This module owns the checkout's composition. It writes no table itself: each domain exports
builders over its own tables (``ledger.HOLD_IN_ONE``, ``orders.writes.paid_update`` and
``event_insert``, ``notifications.notify_statements``), and on PostgreSQL they are composed
here into ONE statement whose balance UPDATE decides every other write. Elsewhere (SQLite,
or a short balance, a replayed key, a first-time customer on PostgreSQL) the same
builders run one after another after the ledger's locked path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session

from app import messages
from app.accounts.models import User
from app.catalog import service as catalog
from app.clock import utc
from app.db import is_postgres
from app.errors import N_
from app.ledger import service as ledger
from app.notifications import service as notifications
from app.orders.errors import (
    NotPayable,
    NotPromisable,
    PriceChanged,
    PromiseChanged,
    QuoteWithdrawn,
)
from app.orders.lifecycle import OrderStatus, check_transition
from app.orders.models import Order
from app.orders.queries import get_order_for, order_link
from app.orders.writes import (
    add_event,
    event_insert,
    event_params,
    event_values,
    paid_update,
    paid_update_params,
    update_order_now,
)
from app.quotes import service as quotes


def pay_order(
    session: Session,
    *,
    user: User,
    order_id: int,
    idempotency_key: str,
    now: datetime,
    expected_promise: date | None = None,
    order: Order | None = None,
    seen_promise: Any = None,
) -> Order:
    """awaiting_payment → paid in one transaction: node hold, promise frozen, first-month
    ledger hold, timeline event, notification. Idempotent: an order already paid is
    returned as it is. On any failure nothing of it stays (a savepoint is rolled back), so
    a caller may catch the error and still commit other work.

    ``order``: the order as ``create_order_for_checkout`` just inserted it in this
    transaction (its new row is invisible to others until commit, so it needs no lock
    read); ``seen_promise``: the promise that call checked. Both only save round trips."""

    new_order = order is not None and order.id == order_id and order.user_id == user.id
    if order is None or not new_order:
        order = get_order_for(session, user, order_id, lock=True)
        seen_promise = None
    if order.status != OrderStatus.awaiting_payment.value:
        if order.paid_at is not None:
            return order  # paid already: a double click or a resubmitted form pays once
        raise NotPayable()
    check_transition(order.status, OrderStatus.paid.value)

    # A quote's price holds for an order paid before the quote expires or is withdrawn
    # (quotes.NODE_QUOTE_RULES, stated on the quote, its PDF and checkout); after that the
    # list price applies and the customer reviews it before paying.
    expired = order.quote_expires_at is not None and utc(order.quote_expires_at) <= now
    withdrawn = order.quote_id is not None and not quotes.quote_price_honoured(
        session, order.quote_id, now
    )
    if expired or withdrawn:
        list_price = catalog.list_price_cents(session, order.sku_id)
        order.unit_price_cents = list_price
        order.monthly_total_cents = list_price * order.quantity
        order.quote_expires_at = None
        order.quote_id = None
        order.pay_attempts += 1
        session.add(order)
        why = (
            N_("The quote expired; the list price applies.")
            if expired
            else N_("The quote was withdrawn; the list price applies.")
        )
        add_event(session, order, "repriced", why, now)
        session.flush()
        raise PriceChanged() if expired else QuoteWithdrawn()

    assert order.id is not None and user.id is not None
    amount = order.monthly_total_cents
    attempts = order.pay_attempts + 1
    pay = _Payment(order, user, amount, now, expected_promise, attempts, new_order)
    try:
        return _pay_twice(session, pay, seen_promise)
    except ledger.InsufficientBalance as short:
        # Short: the savepoint took the ledger's record of the refused attempt with it.
        # Record the refusal again outside it (no new attempt at a hold: one that succeeded
        # because a top-up landed this very moment would stay held if the payment then
        # failed), so the caller may commit it; the same key works again after a top-up.
        order.pay_attempts = attempts
        session.add(order)
        raise ledger.record_declined(
            session,
            user_id=user.id,
            key=_first_month_key(order),
            command="hold",
            amount_cents=amount,
            available=short.available_cents,
            now=now,
            order_id=order.id,
            reason=f"order #{order.id}: first month",
        ) from None
    except Exception:
        order.pay_attempts = attempts  # the attempt counts, whatever refused it
        session.add(order)
        raise


@dataclass(frozen=True)
class _Payment:
    """One attempt at paying an order: who pays how much, when, the promise they were shown
    (``expected_promise``), this attempt's number, and whether the order is new in this
    transaction."""

    order: Order
    user: User
    amount: int
    now: datetime
    expected_promise: date | None
    attempts: int
    new_order: bool


def _pay_twice(session: Session, pay: _Payment, seen: Any) -> Order:
    try:
        return _pay_held(session, pay, seen=seen)
    except _DateMoved:
        # Another order took the stock between the read and the lock (rare): everything of
        # the first try was rolled back with its savepoint; write the messages after the lock.
        return _pay_held(session, pay, early=False)


def _first_month_key(order: Order) -> str:
    return f"order:{order.id}:first-month"


class _DateMoved(Exception):
    """The promise read before the SKU lock differs from the one made under it."""


def _pay_held(session: Session, pay: _Payment, *, seen: Any = None, early: bool = True) -> Order:
    """The savepoint of a payment: messages, money held, the order paid, nodes reserved.

    Every buyer of the SKU waits on its stock row, and every payment of this customer on
    the balance row, until this transaction commits; so the work is ordered by what needs
    which lock (lock order as cancel: balance row first, stock row last):

    1. no lock: the promise the customer is told (``seen_promise``, read by create, or
       read now);
    2. balance row: the ledger hold, the order's UPDATE (paid, hold, promised date) and
       the timeline event, notification and email rows (``_paid_statement``: each domain's
       own statement builder, composed here) — on PostgreSQL ONE statement whose
       balance UPDATE takes the lock and decides every other write (a short balance writes
       nothing and the ledger's locked path follows); elsewhere (SQLite, or that locked
       path) the same statements one after another;
    3. SKU stock row: the lock, the promise confirmed under it (a statement of its own: it
       must see what the previous holder committed), the batch units and the reservation
       (PostgreSQL: one statement) — and COMMIT (which releases the savepoint).

    Without ``early`` (the second try after ``_DateMoved``: stock taken between the read
    and the lock) the messages carry the date made under the lock."""

    with _pay_savepoint(session):
        return _pay_in_savepoint(session, pay, seen=seen, early=early)


@contextmanager
def _pay_savepoint(session: Session) -> Iterator[None]:
    """The payment's savepoint. On PostgreSQL a plain ``SAVEPOINT`` that is rolled back on
    failure and otherwise left to the COMMIT (which releases it): no ``RELEASE`` round trip
    while the SKU's stock row is locked. What the ORM holds is made true again on failure
    as ``begin_nested`` does: rows inserted inside are forgotten, the rest is reloaded when
    next read. Elsewhere (SQLite) ``begin_nested``."""
    if not is_postgres(session):
        with session.begin_nested():
            yield
        return
    session.flush()  # nothing pending may be written inside (it would not be undone)
    known = set(session.identity_map.keys())
    conn = session.connection()
    conn.exec_driver_sql("SAVEPOINT checkout_pay")
    try:
        yield
    except BaseException:
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT checkout_pay")
        for key in set(session.identity_map.keys()) - known:
            obj = session.identity_map.get(key)
            if obj is not None:
                session.expunge(obj)
        session.expire_all()
        raise


def _pay_in_savepoint(session: Session, pay: _Payment, *, seen: Any, early: bool) -> Order:
    order, user, now, expected_promise = pay.order, pay.user, pay.now, pay.expected_promise
    assert order.id is not None and user.id is not None
    told: date | None = None
    if early and seen is None:
        seen = catalog.current_promise(session, order.sku_id, order.quantity, now)
    if (
        early
        and seen is not None
        and seen.available
        and seen.date is not None
        and (expected_promise is None or seen.date == expected_promise)
    ):
        told = seen.date
    session.flush()  # anything pending: written before any lock is taken
    changes = _paid_changes(now, pay.attempts, told, seen)
    msgs = _message_params(session, order, user, told, now) if told is not None else None
    hold: ledger.Debit = {
        "user_id": user.id,
        "amount_cents": pay.amount,
        "idempotency_key": _first_month_key(order),
        "now": now,
        "order_id": order.id,
        "reason": f"order #{order.id}: first month",
        "actor_id": user.id,
    }
    hold_id: int | None = None
    if is_postgres(session):  # the usual case in ONE statement; None: nothing written
        stmt = _paid_statement(tuple(changes), msgs is not None, "e_to_addr" in (msgs or {}))
        params = {
            **ledger.hold_in_one_params(**hold),
            **paid_update_params(order.id, changes),
            **(msgs or {}),
        }
        hold_id = ledger.hold_in_one_result(
            session, session.connection().execute(stmt, params).one()
        )
        if hold_id is not None:
            _show_paid(order, {**changes, "first_hold_id": hold_id})
    if hold_id is None:  # SQLite; PostgreSQL when short, replayed or a new customer
        hold_id = ledger.place_hold_id(session, **hold)
        update_order_now(session, order, {**changes, "first_hold_id": hold_id})
        if msgs is not None:
            _write_messages(session, msgs)
    return _reserve(session, pay, told)


def _show_paid(order: Order, written: dict[str, Any]) -> None:
    """The order's row was paid inside the one composed statement: the object shows what
    that statement wrote as loaded, so the answer needs no read under the SKU lock and
    the next flush writes no second UPDATE. A rolled-back savepoint expires every object
    (``_pay_savepoint``), these values with them."""
    for k, v in written.items():
        set_committed_value(order, k, v)


def _paid_changes(now: datetime, attempts: int, told: date | None, seen: Any) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "status": OrderStatus.paid.value,
        "paid_at": now,
        "pay_attempts": attempts,
    }
    if told is not None:
        changes["promised_date"] = told
        changes["promise_explanation"] = (seen.explanation or "")[:300]
    return changes


# --- the paid checkout's statements, composed from each domain's builders ----------------------


def _message_params(
    session: Session, order: Order, user: User, day: date, now: datetime
) -> dict[str, Any]:
    """The paid event (orders) and the notification with its email (notifications), as
    codes (each reader sees their language): the parameters of their builders."""
    assert user.id is not None
    event = event_values(
        order,
        "paid",
        N_("First month paid from the balance; delivery promised by {date}."),
        now,
        user,
        True,
        {"date": messages.day(day)},
    )
    note = notifications.notify_params(
        session,
        user_id=user.id,
        kind="order_paid",
        message=N_(
            "Order #{id} is paid. We promise delivery by {date}; if we miss it you can "
            "cancel for a full refund."
        ),
        params={"id": order.id, "date": messages.day(day)},
        now=now,
        link=order_link(order),
        email_to=user.email,
        email_subject=N_("Order #{id} paid"),
        locale=user.locale or "en",
    )
    return event_params(event) | note


_MESSAGES: dict[bool, list[Any]] = {}


def _write_messages(session: Session, params: dict[str, Any]) -> None:
    """The paid messages as plain INSERTs, one after another."""
    email = "e_to_addr" in params
    stmts = _MESSAGES.get(email)
    if stmts is None:
        stmts = _MESSAGES[email] = [
            event_insert(None),
            *notifications.notify_statements(None, email=email),
        ]
    conn = session.connection()
    for stmt in stmts:
        conn.execute(stmt, params)


_PAID: dict[tuple[tuple[str, ...], bool, bool], Any] = {}


def _paid_statement(changes: tuple[str, ...], with_messages: bool, email: bool) -> Any:
    """PostgreSQL: the ledger's hold (``HOLD_IN_ONE``) with the order's paid UPDATE and, when
    the date is told, the paid event, notification and email added as CTEs that read the
    hold's ``written`` row — ONE statement, every row written only with the hold. Built
    once per shape from the domains' builders (Core statements of their own tables)."""
    key = (changes, with_messages, email)
    stmt = _PAID.get(key)
    if stmt is None:
        hold = ledger.HOLD_IN_ONE
        parts = [paid_update(changes, hold.hold_id)]
        if with_messages:
            parts.append(event_insert(hold.written))
            parts.extend(notifications.notify_statements(hold.written, email=email))
        stmt = _PAID[key] = hold.select.add_cte(*(p.cte(f"p{i}") for i, p in enumerate(parts)))
    return stmt


def _reserve(session: Session, pay: _Payment, told: date | None) -> Order:
    """Under the SKU lock (taken last): the promise confirmed, the nodes reserved."""
    order, user, now, expected_promise = pay.order, pay.user, pay.now, pay.expected_promise
    assert order.id is not None
    try:
        promise = catalog.reserve_for_order(
            session,
            order_id=order.id,
            sku_id=order.sku_id,
            quantity=order.quantity,
            now=now,
            new_order=pay.new_order,
        )
    except catalog.TalkToSales:
        raise NotPromisable() from None
    if not promise.available or promise.date is None:
        raise NotPromisable()
    if expected_promise is not None and promise.date != expected_promise:
        raise PromiseChanged(promise.date, promise.explanation)
    if told is not None and promise.date != told:
        raise _DateMoved()
    frozen = {
        "promised_date": promise.date,
        "promise_explanation": (promise.explanation or "")[:300],
    }
    if any(getattr(order, k) != v for k, v in frozen.items()):
        update_order_now(session, order, frozen)
    if told is None:
        _write_messages(session, _message_params(session, order, user, promise.date, now))
    return order
