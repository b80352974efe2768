"""The end of a lease: at its period's end (renewals), ended early by ops with the unused
whole days credited back, and the nodes wiped before they return to the pool."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from app import messages
from app.accounts.models import User
from app.catalog import service as catalog
from app.clock import utc
from app.errors import N_, InvalidInput
from app.ledger import service as ledger
from app.ledger.postings import unused_days_credit
from app.orders.invoice_lines import credit_note_links, unused_days_line
from app.orders.lifecycle import LEASE_ACTIVE, OrderStatus
from app.orders.models import Order
from app.orders.ops import audit_action, load_order, move_to, step_done, tell
from app.orders.writes import add_event


def finish_lease(
    session: Session,
    order: Order,
    now: datetime,
    *,
    why: str,
    actor: User | None = None,
    params: dict[str, Any] | None = None,
) -> None:
    """→ ended; the nodes go to wiping. Used by ops and by the renewal job."""
    move_to(order, OrderStatus.ended)
    order.ended_at = now
    order.cancel_at_period_end = False
    order.grace_until = None
    session.add(order)
    catalog.mark_nodes(session, order.id or 0, "wiping", now)
    add_event(session, order, "ended", why, now, actor, params=params)


@dataclass(frozen=True)
class EarlyEndCredit:
    days: int
    cents: int


def early_end_credit(order: Order, now: datetime) -> EarlyEndCredit:
    """What ending the lease now gives back: the unused whole days of the paid month, pro
    rata, rounded down to the cent (nothing for a suspended lease: its month is unpaid)."""

    if (
        order.status not in (OrderStatus.delivered.value, OrderStatus.ending.value)
        or order.period_start is None
        or order.period_end is None
    ):
        return EarlyEndCredit(0, 0)
    days, cents = unused_days_credit(
        order.monthly_total_cents, utc(order.period_start), utc(order.period_end), now
    )
    return EarlyEndCredit(days, cents)


def end_lease(
    session: Session,
    *,
    actor: User,
    order_id: int,
    now: datetime,
    ip: str = "",
    reason: str = "",
    confirm: bool = False,
) -> Order:
    """Ops end a lease before its paid month is over: they confirm and give the reason the
    customer reads (order page, notification, email); the unused whole days of the paid
    month go back to the customer's balance as one ledger entry named for the order."""

    order = load_order(session, order_id, allowed=LEASE_ACTIVE | {OrderStatus.suspended})
    reason = " ".join((reason or "").split())
    errors: dict[str, str] = {}
    if len(reason) < 5:
        errors["reason"] = N_("Tell the customer why the lease ends early.")
    elif len(reason) > 300:
        errors["reason"] = N_("At most 300 characters.")
    if not confirm:
        errors["confirm"] = N_("Tick the box to confirm that the lease ends now.")
    if errors:
        raise InvalidInput(errors=errors)
    credit = early_end_credit(order, now)
    shown = reason.rstrip(" .。!！")
    refund = None
    if credit.cents > 0:
        refund = ledger.credit_unused_days(
            session,
            user_id=order.user_id,
            order_id=order.id or 0,
            amount_cents=credit.cents,
            days=credit.days,
            now=now,
            actor_id=actor.id,
            lines=[unused_days_line(session, order, now=now, days=credit.days)],
        )
        why = N_(
            "The lease was ended early by operations: {reason}. Unused days credited to the "
            "balance: {days} ({amount})."
        )
        message = N_(
            "Order #{id}: operations ended the lease early: {reason}. {amount} for {days} "
            "unused days is back in your balance. The disks will be securely wiped."
        )
    else:
        why = N_("The lease was ended by operations: {reason}.")
        message = N_(
            "Order #{id}: operations ended the lease: {reason}. The disks will be securely wiped."
        )
    params: dict[str, Any] = {
        "reason": shown,
        "days": messages.count(credit.days),
        "amount": messages.money(credit.cents),
    }
    order.end_reason = reason
    finish_lease(session, order, now, why=why, actor=actor, params=params)
    tell(
        session,
        order,
        "order.ended",
        message,
        now,
        email=True,
        links=credit_note_links(session, refund),
        **params,
    )
    audit_action(
        session,
        "lease_ended",
        order,
        actor,
        now,
        ip,
        reason=reason,
        credit_cents=credit.cents,
        credit_days=credit.days,
    )
    session.flush()
    return order


def confirm_wipe(
    session: Session, *, actor: User, order_id: int, now: datetime, ip: str = ""
) -> Order:
    """The secure wipe is done: the order is closed and the nodes are free again."""
    order = load_order(session, order_id, allowed={OrderStatus.ended, OrderStatus.wiping})
    if order.status == OrderStatus.ended.value:
        move_to(order, OrderStatus.wiping)
    move_to(order, OrderStatus.wiped)
    order.wiped_at = now
    session.add(order)
    catalog.mark_nodes(session, order.id or 0, "available", now)
    return step_done(session, order, actor, now, ip, "wiped")
