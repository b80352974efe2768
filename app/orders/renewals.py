"""Monthly renewals and late notices, run by the worker.

At each period end the next month is charged from the prepaid balance, once per order and
period however many workers run:

- the due orders are locked (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite serialises
  writers with ``BEGIN IMMEDIATE``), so two workers never handle the same order at once;
- the charge has the idempotency key ``renewal:{order_id}:{period_index}`` in the ledger;
- ``RenewalCharge`` has a unique (order_id, period_index): a second attempt at the same
  period cannot insert a second row.

Short balance: a notice, a grace period of ``GRACE_DAYS`` with a retry on every run, then
suspension and the end of the lease. A lease cancelled by the customer ends at its period
end with no charge.

Before that: 7, 3 and 1 day(s) before a renewal the balance cannot cover, a reminder (console
and email, with the shortfall, a top-up link, the grace period and the day the lease would
end), each once: a unique (order, period, days) row in ``renewal_reminders``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from app import messages
from app.clock import utc
from app.db import is_postgres, transaction
from app.errors import N_, InsufficientBalance
from app.ledger import service as ledger
from app.orders import lease_end, ops
from app.orders.invoice_lines import month_line, receipt_links
from app.orders.lifecycle import GRACE_DAYS, PRE_DELIVERY, OrderStatus
from app.orders.models import Order, RenewalCharge, RenewalReminder
from app.orders.periods import add_months

log = logging.getLogger("app.renewals")

# Reminders before a renewal the balance cannot cover: this many days before it.
REMINDER_DAYS = (7, 3, 1)


@dataclass
class RenewalReport:
    renewed: int = 0
    short: int = 0
    retried: int = 0
    suspended: int = 0
    ended: int = 0
    skipped: int = 0
    order_ids: list[int] = field(default_factory=list)

    def total(self) -> int:
        return self.renewed + self.short + self.suspended + self.ended


def _lock(stmt, session: Session):  # type: ignore[no-untyped-def]
    if is_postgres(session):
        return stmt.with_for_update(skip_locked=True)
    return stmt


def due_order_ids(session: Session, now: datetime, limit: int = 500) -> list[int]:
    stmt = (
        select(Order.id)
        .where(
            col(Order.status).in_(
                [OrderStatus.delivered.value, OrderStatus.ending.value, OrderStatus.suspended.value]
            ),
            col(Order.period_end).is_not(None),
            col(Order.period_end) <= now,
        )
        .order_by(col(Order.period_end), col(Order.id))
        .limit(limit)
    )
    return [i for i in session.exec(stmt).all() if i is not None]


def _lock_order(session: Session, order_id: int, now: datetime) -> Order | None:
    """Lock one due order; None when another worker holds it or it is no longer due."""
    stmt = _lock(select(Order).where(Order.id == order_id), session)
    order = session.exec(stmt).first()
    if order is None:
        return None
    session.refresh(order)
    if order.period_end is None or utc(order.period_end) > now:
        return None
    return order


def renew_order(session: Session, order_id: int, now: datetime) -> str | None:
    """Lock one lease and do what its period end calls for; None when it is not due (any
    more) or another worker holds it. Returns renewed | short | retried | suspended |
    ended."""
    order = _lock_order(session, order_id, now)
    if order is None:
        return None
    return _renew_one(session, order, now)


def _count(report: RenewalReport, order_id: int, outcome: str | None) -> None:
    if outcome is None:
        report.skipped += 1
        return
    setattr(report, outcome, getattr(report, outcome) + 1)
    report.order_ids.append(order_id)


def run_due_renewals(session: Session, now: datetime, *, limit: int = 500) -> RenewalReport:
    """Handle every lease whose period has ended, in the caller's transaction (each lease
    in a savepoint). Safe to run from several workers; the worker itself prefers
    ``run_due_renewals_each`` (one short transaction per lease)."""
    report = RenewalReport()
    for order_id in due_order_ids(session, now, limit):
        sp = session.begin_nested()
        try:
            outcome = renew_order(session, order_id, now)
            sp.commit()
        except IntegrityError:
            # Another worker recorded this period first: nothing to do.
            sp.rollback()
            outcome = None
        _count(report, order_id, outcome)
    return report


def run_due_renewals_each(engine: Engine, now: datetime, *, limit: int = 500) -> RenewalReport:
    """The worker's way: each lease in its own short transaction. Two workers then never
    hold many customers' ledger rows at once (no deadlock between them), one bad lease
    cannot undo the others, and a worker killed midway keeps what it committed."""
    with transaction(engine) as session:
        ids = due_order_ids(session, now, limit)
    report = RenewalReport()
    for order_id in ids:
        try:
            with transaction(engine) as session:
                outcome = renew_order(session, order_id, now)
        except IntegrityError:
            outcome = None  # another worker recorded this period first
        except OperationalError:
            # A lock conflict with another worker (PostgreSQL chose us as the deadlock
            # victim, or SQLite stayed busy): nothing of it was kept; retried next round.
            log.warning("renewal of order %s deferred: lock conflict", order_id)
            outcome = None
        _count(report, order_id, outcome)
    return report


def _renew_one(session: Session, order: Order, now: datetime) -> str:

    assert order.period_end is not None and order.id is not None
    period_end = utc(order.period_end)
    if order.status == OrderStatus.ending.value or order.cancel_at_period_end:
        lease_end.finish_lease(
            session, order, period_end, why=N_("The lease ended at the end of the paid month.")
        )
        ops.tell(
            session,
            order,
            "order.ended",
            N_(
                "Order #{id}: the lease ended at the end of the paid month, as you asked. "
                "Nothing more will be charged; the disks will be securely wiped."
            ),
            now,
            email=True,
        )
        return "ended"

    period_index = order.periods_paid  # 1 = the first renewal (second month)
    charge = session.exec(
        select(RenewalCharge).where(
            RenewalCharge.order_id == order.id, RenewalCharge.period_index == period_index
        )
    ).first()
    if charge is not None and charge.status == "paid":
        # Already charged (should not happen: the period would have moved on). Repair.
        _advance(order)
        session.add(order)
        return "renewed"
    first_attempt = charge is None
    if charge is None:
        charge = RenewalCharge(
            order_id=order.id,
            period_index=period_index,
            attempted_at=now,
            status="pending",
            amount_cents=order.monthly_total_cents,
        )
        session.add(charge)
        session.flush()  # the unique (order_id, period_index) guards against a second worker

    try:
        if not first_attempt:
            # A retry: only ask the ledger when the balance now covers it (the ledger
            # records every declined attempt; one per period is enough).
            available = ledger.available_cents(session, order.user_id)
            if available < order.monthly_total_cents:
                raise InsufficientBalance(
                    shortfall_cents=order.monthly_total_cents - available,
                    available_cents=available,
                )
        anchor = utc(order.delivered_at or order.period_start or period_end)
        entry = ledger.charge(
            session,
            user_id=order.user_id,
            amount_cents=order.monthly_total_cents,
            idempotency_key=f"renewal:{order.id}:{period_index}",
            now=now,
            reason=f"Renewal of order #{order.id}, month {period_index + 1}",
            order_id=order.id,
            # the month this pays for: the period after the one ending now (as _advance)
            lines=[month_line(session, order, period_end, add_months(anchor, period_index + 1))],
        )
    except InsufficientBalance as e:
        charge.attempted_at = now
        charge.status = "short"
        session.add(charge)
        shortfall = int(getattr(e, "params", {}).get("shortfall_cents", 0) or 0) or int(
            getattr(e, "shortfall_cents", 0) or 0
        )
        if first_attempt or order.grace_until is None:
            order.grace_until = period_end + timedelta(days=GRACE_DAYS)
            session.add(order)
            ops.event(
                session,
                order,
                "renewal_short",
                N_("Renewal of month {month} failed: the balance is too low."),
                now,
                month=period_index + 1,
            )
            ops.tell(
                session,
                order,
                "order.renewal_short",
                N_(
                    "Order #{id}: your balance is too low to renew the lease ({amount} due, "
                    "{shortfall} short). Top up before {grace} or the lease will be suspended "
                    "and ended."
                ),
                now,
                email=True,
                amount=messages.money(order.monthly_total_cents),
                shortfall=messages.money(shortfall or order.monthly_total_cents),
                grace=messages.day(order.grace_until),
            )
            return "short"
        if now < utc(order.grace_until):
            return "retried"
        # Grace is over: suspend, then end the lease.
        ops.move_to(order, OrderStatus.suspended)
        ops.event(
            session,
            order,
            "suspended",
            N_("Suspended: the renewal stayed unpaid after the grace period."),
            now,
        )
        lease_end.finish_lease(
            session, order, now, why=N_("The lease ended: the renewal was not paid.")
        )
        ops.tell(
            session,
            order,
            "order.suspended",
            N_(
                "Order #{id}: the renewal stayed unpaid after the grace period, so the lease "
                "was suspended and has ended. The disks will be securely wiped."
            ),
            now,
            email=True,
        )
        return "suspended"

    charge.status = "paid"
    charge.attempted_at = now
    charge.ledger_entry_id = getattr(entry, "id", None)
    session.add(charge)
    was_short = not first_attempt
    if order.status == OrderStatus.suspended.value:
        ops.move_to(order, OrderStatus.delivered)
    _advance(order)
    order.grace_until = None
    session.add(order)
    ops.event(
        session,
        order,
        "renewed",
        N_("Renewed: month {month} charged to the balance."),
        now,
        month=period_index + 1,
    )
    ops.tell(
        session,
        order,
        "order.renewed",
        N_("Order #{id}: the lease is renewed until {end}; {amount} was charged to your balance."),
        now,
        email=was_short,
        links=receipt_links(session, entry),
        end=messages.day(utc(order.period_end) if order.period_end else now),
        amount=messages.money(order.monthly_total_cents),
    )
    return "renewed"


def _advance(order: Order) -> None:
    """Move to the next period, anchored on the delivery instant (no drift)."""
    anchor = utc(order.delivered_at or order.period_start or order.period_end)  # type: ignore[arg-type]
    order.periods_paid += 1
    order.period_start = order.period_end
    order.period_end = add_months(anchor, order.periods_paid)


def send_late_notices(session: Session, now: datetime, *, limit: int = 500) -> int:
    """Tell each customer once that their order missed its promised date (with the refund
    offer)."""
    stmt = (
        select(Order)
        .where(
            col(Order.status).in_([s.value for s in PRE_DELIVERY]),
            col(Order.promised_date).is_not(None),
            col(Order.promised_date) < now.date(),
            col(Order.late_notified_at).is_(None),
        )
        .order_by(col(Order.promised_date), col(Order.id))
        .limit(limit)
    )
    sent = 0
    for order in session.exec(_lock(stmt, session)).all():
        order.late_notified_at = now
        session.add(order)
        ops.event(session, order, "late", N_("The promised delivery date has passed."), now)
        ops.tell(
            session,
            order,
            "order.late",
            N_(
                "Order #{id} missed its promised delivery date ({promised}). You may cancel it "
                "in the console for a full refund to your balance, or keep waiting: we are "
                "still working on it."
            ),
            now,
            email=True,
            promised=messages.day(order.promised_date) if order.promised_date else "",
        )
        sent += 1
    session.flush()
    return sent


# --- reminders before a renewal ---------------------------------------------------------


def reminder_stage(period_end: datetime, now: datetime) -> int | None:
    """Which reminder is due now: 7, 3 or 1 (days before the renewal), the nearest one the
    time left has reached; None when the renewal is more than 7 days away or has passed.
    A worker that missed a stage sends only the current one."""
    left = period_end - now
    if left <= timedelta(0):
        return None
    for days in sorted(REMINDER_DAYS):
        if left <= timedelta(days=days):
            return days
    return None


def renewal_shortfall(order: Order, available_cents: int) -> int:
    """What the balance lacks for the order's next renewal (0: it is covered, or the lease
    is not renewed)."""
    if order.status != OrderStatus.delivered.value or order.cancel_at_period_end:
        return 0
    return max(0, order.monthly_total_cents - available_cents)


def topup_path(order_id: int, cents: int) -> str:
    """The top-up page prefilled with ``cents``, coming back to the order's page."""
    query = urlencode({"amount_cents": cents, "return_to": f"/console/orders/{order_id}"})
    return f"/topups/new?{query}"


def reminder_candidates(session: Session, now: datetime, limit: int = 500) -> list[int]:
    stmt = (
        select(Order.id)
        .where(
            col(Order.status) == OrderStatus.delivered.value,
            col(Order.cancel_at_period_end).is_(False),
            col(Order.period_end) > now,
            col(Order.period_end) <= now + timedelta(days=max(REMINDER_DAYS)),
        )
        .order_by(col(Order.period_end), col(Order.id))
        .limit(limit)
    )
    return [i for i in session.exec(stmt).all() if i is not None]


def remind_order(session: Session, order_id: int, now: datetime, base_url: str = "") -> bool:
    """Send the due reminder for one lease if its balance will not cover the renewal and
    this reminder was not sent yet; True when this call sent it. The reminder's row and its
    notice are written together: the unique (order, period, days) row lets only one worker
    write them (a second one's insert fails and its savepoint is rolled back)."""
    order = session.get(Order, order_id)
    if order is None or order.period_end is None or order.id is None:
        return False
    period_end = utc(order.period_end)
    stage = reminder_stage(period_end, now)
    if stage is None:
        return False
    short = renewal_shortfall(order, ledger.available_cents(session, order.user_id))
    if short <= 0:
        return False
    try:
        with session.begin_nested():
            session.add(
                RenewalReminder(
                    order_id=order.id,
                    period_index=order.periods_paid,
                    days_before=stage,
                    shortfall_cents=short,
                    sent_at=now,
                )
            )
            session.flush()
    except IntegrityError:
        return False  # sent already (by this or another worker)
    grace = period_end + timedelta(days=GRACE_DAYS)
    ops.tell(
        session,
        order,
        "order.renewal_reminder",
        N_(
            "Order #{id} renews on {date}: {amount} is due and your balance is {short} short. "
            "Top up at least {short} before then: {topup}\n"
            "If the renewal stays unpaid, the lease is suspended and ends after the "
            "{grace_days}-day grace period, on {grace}, and its disks are then securely "
            "wiped."
        ),
        now,
        email=True,
        date=messages.day(period_end),
        amount=messages.money(order.monthly_total_cents),
        short=messages.money(short),
        topup=base_url.rstrip("/") + topup_path(order.id, short),
        grace_days=GRACE_DAYS,
        grace=messages.day(grace),
    )
    return True


def send_renewal_reminders(
    engine: Engine, now: datetime, *, base_url: str = "", limit: int = 500
) -> int:
    """Worker: the reminders due now, each lease in its own short transaction. Several
    workers may run this at once; each reminder is sent exactly once."""
    with transaction(engine) as session:
        ids = reminder_candidates(session, now, limit)
    sent = 0
    for order_id in ids:
        try:
            with transaction(engine) as session:
                sent += remind_order(session, order_id, now, base_url)
        except (IntegrityError, OperationalError):
            # Another worker wrote this reminder at the same instant (or a lock
            # conflict): nothing of ours was kept; the row says whether it went out.
            log.info("renewal reminder for order %s left to another worker", order_id)
    return sent
