"""The customer's console: /console (orders, balance, notifications) and one order's page
(timeline, hosts, controls, the countdown to its promised date)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app import i18n
from app.accounts import service as accounts
from app.accounts.deps import UserCall
from app.accounts.models import User
from app.catalog import service as catalog
from app.catalog import specs
from app.clock import utc, wall_now
from app.errors import N_
from app.ledger import service as ledger
from app.notifications.service import mark_read, unread_for
from app.orders import controls, renewals, service, status_text
from app.orders.lifecycle import GRACE_DAYS
from app.orders.models import Order
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

# The checkout's and the console's pages show balances, prices and a Pay button that are
# true only now: the browser must not show a stored copy on Back (it asks again).
NO_STORE = {"Cache-Control": "no-store"}


def image_name(image_id: str) -> str:
    for i in specs.all_images():
        if i.id == image_id:
            return i.name
    return image_id


def _deadline(d: date | None) -> datetime | None:
    """The end of the promised day (UTC): the order is late after this instant."""
    if d is None:
        return None
    return datetime.combine(d + timedelta(days=1), time(0, 0), tzinfo=UTC)


def _clock_offset_ms(now: datetime) -> int:
    """So the countdown in the browser follows the app clock (simulated time too)."""
    return int((now - wall_now()).total_seconds() * 1000)


def status_badge(order: Order, now: datetime) -> tuple[str, str]:
    """(label msgid, css class)."""
    if service.is_order_late(order, now):
        return N_("Late"), "bad"
    if order.grace_until is not None and order.status in ("delivered", "ending"):
        return N_("Renewal unpaid"), "bad"
    labels = {
        "awaiting_payment": (N_("Awaiting payment"), "warn"),
        "paid": (N_("Paid, awaiting provisioning"), ""),
        "provisioning": (N_("Provisioning"), ""),
        "delivered": (N_("Active"), "ok"),
        "ending": (N_("Ends at period end"), "warn"),
        "suspended": (N_("Suspended"), "bad"),
        "ended": (N_("Ended"), ""),
        "wiping": (N_("Wiping disks"), ""),
        "wiped": (N_("Wiped"), ""),
        "cancelled": (N_("Cancelled, refunded"), ""),
        "abandoned": (N_("Discarded"), ""),
    }
    return labels.get(order.status, (order.status, ""))


@router.get("/console", response_class=HTMLResponse)
def console(call: UserCall) -> Response:
    orders = service.visible_orders(call.db, call.user)
    available, held = service.balance_of(call.db, call.user)
    notifications = unread_for(call.db, call.user.id or 0)
    unread = {n.id for n in notifications if n.read_at is None}
    # Shown once as new, then seen: a short write of its own (this GET only reads).
    mark_read(call.request.app.state.engine, call.user.id or 0, [i for i in unread if i], call.now)
    # What the balance lacks for each lease's next renewal; within the reminders' reach
    # (7 days) a banner with the date the lease would end unpaid.
    shortfalls: dict[int, int] = {}
    for o in orders:
        short = renewals.renewal_shortfall(o, available or 0)
        if short > 0 and o.id is not None:
            shortfalls[o.id] = short
    reminders = {
        o.id: utc(o.period_end) + timedelta(days=GRACE_DAYS)
        for o in orders
        if o.id in shortfalls
        and o.period_end is not None
        and renewals.reminder_stage(utc(o.period_end), call.now) is not None
    }
    return render(
        call.request,
        "orders/console.html",
        {
            "unread": unread,
            "orders": orders,
            "badges": {o.id: status_badge(o, call.now) for o in orders},
            "statuses": {o.id: status_text.for_order(o, call.now) for o in orders},
            "deadlines": {o.id: _deadline(o.promised_date) for o in orders},
            "offset_ms": _clock_offset_ms(call.now),
            "notifications": notifications,
            "available": available,
            "held": held,
            "sku_names": {s.id: s.name for s in specs.all_specs()},
            "shortfalls": shortfalls,
            "reminders": reminders,
            "topup_links": {k: renewals.topup_path(k, v) for k, v in shortfalls.items()},
            "reader_zone": reader_zone(call.request, call.user),
        },
        headers=NO_STORE,
    )


@router.get("/console/orders/{order_id}", response_class=HTMLResponse)
def console_order(order_id: int, call: UserCall) -> Response:
    order = service.get_order_for(call.db, call.user, order_id)
    spec = specs.spec(order.sku_id)
    assert order.id is not None
    available = service.balance_of(call.db, call.user)[0] or 0
    short = renewals.renewal_shortfall(order, available) if order.period_end else 0
    return render(
        call.request,
        "orders/order.html",
        {
            "order": order,
            "spec": spec,
            "badge": status_badge(order, call.now),
            "late": service.is_order_late(order, call.now),
            "deadline": _deadline(order.promised_date),
            "offset_ms": _clock_offset_ms(call.now),
            "events": service.timeline(call.db, order.id),
            "hosts": service.hosts_of(call.db, order.id),
            "keys": service.ssh_keys_of(order),
            "image_label": image_name(order.image_id),
            "action": service.cancel_action(order, call.now),
            "can_keep": service.can_keep_renewing(order, call.now),
            "busbw": str(spec.raw.get("nccl_allreduce_busbw_gbps") or ""),
            "status": _status_text(call.db, order, call.now),
            "available": available,
            "renewal_short": short,
            "renewal_grace": (
                utc(order.period_end) + timedelta(days=GRACE_DAYS) if order.period_end else None
            ),
            "renewal_topup": renewals.topup_path(order.id, short),
            "reader_zone": reader_zone(call.request, call.user),
            # the order's invoices and credit notes, as the ledger issued them
            "order_receipts": ledger.receipts_for_order(call.db, order.user_id, order.id),
            "order_credit_notes": ledger.credit_notes_for_order(call.db, order.user_id, order.id),
            **controls_context(call.db, order, call.user),
        },
        headers=NO_STORE,
    )


def reader_zone(request: Request, user: User) -> str:
    """The zone a renewal's dates are shown in: the browser's (the ``tz`` cookie), else the
    one the customer last signed in with (``User.time_zone``, as their emails use); "" when
    neither is known: UTC, labelled so."""
    return i18n.known_zone(request.cookies.get(i18n.ZONE_COOKIE)) or i18n.known_zone(user.time_zone)


def controls_context(session: Session, order: Order, user: User) -> dict[str, Any]:
    """What the order page's node controls need (requests, saved keys, images, network)."""

    assert order.id is not None
    return {
        "tasks": controls.tasks_for(session, order.id),
        "task_kinds": controls.KIND_LABELS,
        "task_status": controls.STATUS_LABELS,
        "task_params": controls.params_of,
        "saved_keys": accounts.ssh_keys_for(session, user.id or 0),
        "images": [i for i in specs.all_images() if specs.image_fits(order.sku_id, i.id)],
        "network": controls.network_status(order),
        "network_labels": controls.NETWORK_LABELS,
        "controls_open": order.status in ("delivered", "ending"),
    }


def _status_text(session: Session, order: Order, now: datetime) -> status_text.OrderStatusText:
    """The order's status lines that still apply (the frozen promise's explanation in the
    reader's language: catalog re-renders it)."""

    assert order.id is not None
    frozen = catalog.frozen_promise(session, order.id)
    return status_text.for_order(
        order,
        now,
        promise_text=frozen.explanation if frozen is not None else order.promise_explanation,
        promise_params=frozen.params if frozen is not None else None,
        network=controls.network_status(order),
    )
