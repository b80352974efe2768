"""The customer's cancel: discard before payment, a full refund before delivery (the
first-month hold voided, the nodes released), or the end of a running lease at its paid
period's end — and, until that end, the customer's change of mind (``keep_renewing``).

Early cancel (ours): the product promises a full refund when we miss the date; before
delivery a paid order can be cancelled by the customer and the first month goes back to
the balance in full."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from app import messages
from app.accounts.models import User
from app.catalog import service as catalog
from app.clock import utc
from app.errors import N_
from app.ledger import service as ledger
from app.notifications.service import notify
from app.orders.errors import NotCancellable, NotRenewable, OrderChangedMeanwhile
from app.orders.invoice_lines import credit_note_links, month_line
from app.orders.lifecycle import LEASE_ACTIVE, PRE_DELIVERY, OrderStatus, check_transition
from app.orders.models import Order
from app.orders.queries import get_order_for, is_order_late, order_link
from app.orders.writes import add_event
from app.quotes import service as quotes


def cancel_action(order: Order, now: datetime) -> str:
    """Which cancel the customer is offered: refund | period_end | discard | wait | none."""
    status = OrderStatus(order.status)
    if status == OrderStatus.awaiting_payment:
        return "discard"
    if status in PRE_DELIVERY:
        return "refund"  # before delivery: cancel any time, the first month back in full
    if status == OrderStatus.delivered and not order.cancel_at_period_end:
        return "period_end"
    return "none"


def cancel_order(
    session: Session,
    *,
    user: User,
    order_id: int,
    now: datetime,
    reason: str = "",
    expected_action: str | None = None,
) -> Order:
    """The customer's cancel.

    - awaiting payment → abandoned (nothing was charged);
    - paid, not delivered yet (late or not) → cancelled, the first-month hold voided back to
      the balance in full, the nodes released. Race-safe against ops delivering the same
      order: both lock the order row first, and whichever commits second sees the other's
      state (a delivered order is no longer cancellable for a refund);
    - delivered → ending: the lease runs to the end of the paid month, no renewal, no fee.
    Repeating a cancel that already happened returns the order unchanged.
    """

    assert user.id is not None
    order = get_order_for(session, user, order_id, lock=True)
    status = OrderStatus(order.status)
    if status in (OrderStatus.cancelled, OrderStatus.abandoned) or (
        status in LEASE_ACTIVE and order.cancel_at_period_end
    ):
        return order
    action = cancel_action(order, now)
    if expected_action is not None and action != expected_action:
        raise OrderChangedMeanwhile()
    if action == "none":
        raise NotCancellable()

    if action == "discard":
        check_transition(order.status, OrderStatus.abandoned.value)
        order.status = OrderStatus.abandoned.value
        order.cancelled_at = now
        session.add(order)
        add_event(session, order, "abandoned", N_("Order discarded before payment."), now, user)
        if order.quote_id is not None and order.id is not None:  # the quote is free again
            quotes.release_from_order(session, order.quote_id, order.id, now)
        return order

    if action == "refund":
        check_transition(order.status, OrderStatus.cancelled.value)
        late = is_order_late(order, now)
        with session.begin_nested():
            refund = None
            if order.first_hold_id is not None:
                refund = ledger.void_hold(
                    session,
                    order.first_hold_id,
                    now=now,
                    reason=(
                        f"order #{order.id}: delivery date missed, cancelled by the customer"
                        if late
                        else f"order #{order.id}: cancelled by the customer before delivery"
                    ),
                    actor_id=user.id,
                    lines=[month_line(session, order, None, None)],
                    credit_reason=(
                        ledger.CreditReason.missed_delivery
                        if late
                        else ledger.CreditReason.cancelled
                    ),
                )
            assert order.id is not None
            catalog.release_for_order(session, order.id, now)
            order.status = OrderStatus.cancelled.value
            order.cancelled_at = now
            session.add(order)
            session.flush()
            amount = order.monthly_total_cents
            add_event(
                session,
                order,
                "cancelled",
                N_(
                    "Cancelled after the promised date was missed; the first month went back to the balance in full."
                )
                if late
                else N_(
                    "Cancelled by the customer before delivery; the first month went back to the balance in full."
                ),
                now,
                user,
            )
            notify(
                session,
                user_id=user.id,
                kind="order_refunded",
                message=N_("Order #{id} is cancelled and {amount} is back in your balance."),
                params={"id": order.id, "amount": messages.money(amount)},
                now=now,
                link=order_link(order),
                email_to=user.email,
                email_subject=N_("Order #{id} cancelled and refunded"),
                links=credit_note_links(session, refund),
            )
        return order

    # action == "period_end": a running lease ends at the end of the paid month, for free.
    return _switch_renewal(session, order, user, now, ending=True)


# The renewal of a running lease switched off (the customer's cancel at the period end) or
# back on (``keep_renewing``): the timeline event, then the notice and email.
_RENEWAL_TEXTS = {
    True: (
        "cancel_at_period_end",
        N_("Cancelled by the customer: the lease runs until {date} and will not renew."),
        "order_ending",
        N_("Order #{id} will end on {date}; nothing more will be charged."),
        N_("Order #{id} will end at the period end"),
    ),
    False: (
        "renewal_resumed",
        N_("Renewal turned back on by the customer: the lease renews on {date}."),
        "order_renews",
        N_("Order #{id} renews again on {date}: {amount} will be charged from your balance."),
        N_("Order #{id} renews again"),
    ),
}


def _switch_renewal(
    session: Session, order: Order, user: User, now: datetime, *, ending: bool
) -> Order:
    target = OrderStatus.ending if ending else OrderStatus.delivered
    check_transition(order.status, target.value)
    order.status = target.value
    order.cancel_at_period_end = ending
    session.add(order)
    session.flush()
    event_kind, event_text, kind, message, subject = _RENEWAL_TEXTS[ending]
    day = messages.day(order.period_end) if order.period_end else ""
    add_event(session, order, event_kind, event_text, now, user, params={"date": day})
    params: dict[str, object] = {"id": order.id, "date": day}
    if not ending:
        params["amount"] = messages.money(order.monthly_total_cents)
    notify(
        session,
        user_id=order.user_id,
        kind=kind,
        message=message,
        params=params,
        now=now,
        link=order_link(order),
        email_to=user.email,
        email_subject=subject,
    )
    return order


def can_keep_renewing(order: Order, now: datetime) -> bool:
    """Whether the customer may take back a cancel at the period end: their own cancel
    (not an ops end), and the paid month still running."""
    return (
        order.status == OrderStatus.ending.value
        and order.cancel_at_period_end
        and order.period_end is not None
        and now < utc(order.period_end)
    )


def keep_renewing(session: Session, *, user: User, order_id: int, now: datetime) -> Order:
    """Undo the customer's cancel at the period end: the lease renews monthly again (from
    the balance, as before). Locks the order row as the cancel and the renewal worker do, so
    a renewal run at the period end sees one state or the other. Repeating it returns the
    order unchanged; once the month has run out (or ops ended the lease) it is refused."""
    order = get_order_for(session, user, order_id, lock=True)
    if order.status == OrderStatus.delivered.value and not order.cancel_at_period_end:
        return order
    if not can_keep_renewing(order, now):
        raise NotRenewable()
    return _switch_renewal(session, order, user, now, ending=False)
