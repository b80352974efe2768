"""The ops desk (mounted under /staff): the provisioning queue and each order's actions.

Access: ops work the desk; sales may open the queue and an order read-only (they answer
customers' "when is my node ready?"), and every action (POST) needs ``OpsCall`` → sales get
403 and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session, col, select

from app.accounts.deps import Call, OpsCall, StaffCall
from app.accounts.models import User
from app.catalog import service as catalog
from app.catalog import specs
from app.errors import N_, DomainError, InvalidInput, NotFound
from app.numbers import parse_int
from app.orders import controls, desk, lease_end, ops, service
from app.orders.lifecycle import LEASE_ACTIVE, PRE_DELIVERY, OrderStatus, is_late
from app.orders.models import Order, OrderEvent
from app.orders.schemas import OpsCredentialsForm, OpsDelayForm, OpsEndForm, OpsNodesForm
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.i18n import ngettext
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)


def time_left(days: int | None) -> str:
    if days is None:
        return ""
    if days < 0:
        return ngettext("late by %(n)s day", "late by %(n)s days", -days) % {"n": -days}
    if days == 0:
        return _("due today")
    return ngettext("%(n)s day left", "%(n)s days left", days) % {"n": days}


def _sku_options() -> list[tuple[str, str]]:
    return [(s.id, s.name) for s in specs.all_specs() if getattr(s, "self_serve", True)]


@router.get("/ops", response_class=HTMLResponse)
def ops_queue(call: StaffCall) -> Response:
    f = desk.Filters.from_query(call.request.query_params)
    page = desk.queue(call.db, f, call.now)
    groups = desk.private_network_groups(call.db) if f.page == 1 else []
    return render(
        call.request,
        "staff/ops/queue.html",
        {
            "page": page,
            "f": f,
            "groups": groups,
            "risk": desk.risk_counts(call.db, call.now),
            "open_tasks": controls.open_tasks(call.db) if f.page == 1 else [],
            "task_kinds": controls.KIND_LABELS,
            "task_status": controls.STATUS_LABELS,
            "time_left": time_left,
            "status_labels": ops.STATUS_LABELS,
            "sku_options": _sku_options(),
            "views": [
                ("queue", _("To provision")),
                ("leases", _("Active leases")),
                ("wipe", _("To wipe")),
                ("closed", _("Closed")),
                ("unpaid", _("Unpaid")),
                ("all", _("All")),
            ],
        },
    )


def _detail_context(session: Session, order: Order, now: Any) -> dict[str, Any]:
    customer = session.get(User, order.user_id)
    hosts = ops.hosts_of(session, order.id or 0)
    events = list(
        session.exec(
            select(OrderEvent)
            .where(OrderEvent.order_id == order.id)
            .order_by(col(OrderEvent.at), col(OrderEvent.id))
        ).all()
    )
    actors = {
        u.id: u.email
        for u in session.exec(
            select(User).where(col(User.id).in_({e.actor_id for e in events if e.actor_id}))
        ).all()
    }
    status = OrderStatus(order.status)
    pending = status in PRE_DELIVERY
    candidates = ops.candidate_nodes(session, order) if pending else []

    waiting = catalog.waiting_units(session, order.id or 0) if pending else 0
    held_ids = {n.id for n in catalog.nodes_for_order(session, order.id or 0)}
    assigned_ids = {h.node_id for h in hosts if h.node_id}
    days = (order.promised_date - now.date()).days if order.promised_date and pending else None
    groups = (
        desk.private_network_groups(session, user_id=order.user_id)
        if order.note_private_network
        else []
    )
    return {
        "order": order,
        "customer": customer,
        "hosts": hosts,
        "events": events,
        "actors": actors,
        "pending": pending,
        "lease_active": status in LEASE_ACTIVE or status == OrderStatus.suspended,
        "end_credit": lease_end.early_end_credit(order, now),
        "late": is_late(order.status, order.promised_date, now),
        "days_left": days,
        "time_left": time_left,
        "candidates": candidates,
        "waiting_units": waiting,
        "checked_ids": assigned_ids or held_ids,
        "rocm": ops.is_rocm(order),
        "ssh_keys": service.ssh_keys_of(order),
        "network_group": groups[0] if groups else None,
        "status_labels": ops.STATUS_LABELS,
        "errors": {},
        "form": {},
        "sku_name": _sku_name(order.sku_id),
        "tasks": controls.tasks_for(session, order.id or 0),
        "task_kinds": controls.KIND_LABELS,
        "task_status": controls.STATUS_LABELS,
        "task_next": controls.NEXT,
        "task_params": controls.params_of,
        "network": controls.network_status(order),
        "network_states": controls.NETWORK_STATES,
        "network_labels": controls.NETWORK_LABELS,
    }


def _sku_name(sku_id: str) -> str:
    try:
        return str(specs.spec(sku_id).name)
    except Exception:
        return sku_id


@router.get("/ops/orders/{order_id}", response_class=HTMLResponse)
def ops_order(order_id: int, call: StaffCall) -> Response:
    order = ops.load_order(call.db, order_id, lock=False)
    return render(call.request, "staff/ops/order.html", _detail_context(call.db, order, call.now))


def _order_page(request: Request, order_id: int) -> Response:
    return RedirectResponse(
        request.app.url_path_for("ops_order", order_id=order_id), status_code=303
    )


def _failed(call: Call, order_id: int, exc: DomainError, form: dict[str, Any]) -> Response:
    """Nothing of a refused action stays: roll back, then explain on the same page."""
    call.db.rollback()
    if isinstance(exc, NotFound):
        raise exc
    if isinstance(exc, InvalidInput):
        order = ops.load_order(call.db, order_id, lock=False)
        ctx = _detail_context(call.db, order, call.now)
        errors = {k: _(v) for k, v in exc.errors.items()}
        if not errors:
            errors = {"_": exc.render_message(_)}
        elif exc.field and exc.field in errors:
            errors[exc.field] = exc.render_message(_)
        ctx.update(errors=errors, form=form)
        return render(call.request, "staff/ops/order.html", ctx, status_code=422)
    flash(call.request, exc.render_message(_), "error")
    return _order_page(call.request, order_id)


# The desk's actions by the last part of their path: what each does, and what the desk
# says when it is done.
ACTIONS: dict[str, tuple[Callable[..., object], str]] = {
    "acknowledge": (ops.acknowledge, N_("Acknowledged. The customer was told.")),
    "provision": (ops.start_provisioning, N_("Provisioning started.")),
    "nodes": (ops.assign_nodes, N_("Nodes assigned.")),
    "credentials": (ops.set_credentials, N_("Login details saved; the customer sees them now.")),
    "deliver": (ops.mark_delivered, N_("Delivered. The first month is charged; the lease runs.")),
    "delay": (ops.mark_delayed, N_("Delay recorded; the customer was told by email.")),
    "end": (lease_end.end_lease, N_("Lease ended; the nodes are waiting for their wipe.")),
    "wiped": (lease_end.confirm_wipe, N_("Wipe confirmed; the nodes are available again.")),
}


def _act(
    call: Call, order_id: int, name: str, form: dict[str, Any] | None = None, **args: Any
) -> Response:
    """The desk action ``name`` on the order (``args``: what it takes beyond who, which
    order, when and from where); refused, ``_failed`` explains it with the ``form`` sent."""
    action, done = ACTIONS[name]
    try:
        call.run(action, order_id=order_id, **args)
    except DomainError as e:
        return _failed(call, order_id, e, form or {})
    flash(call.request, _(done), "success")
    return _order_page(call.request, order_id)


@router.post("/ops/orders/{order_id}/acknowledge")
def ops_acknowledge(order_id: int, call: OpsCall) -> Response:
    return _act(call, order_id, "acknowledge")


@router.post("/ops/orders/{order_id}/provision")
def ops_provision(order_id: int, call: OpsCall) -> Response:
    return _act(call, order_id, "provision")


@router.post("/ops/orders/{order_id}/nodes")
def ops_assign_nodes(
    order_id: int, call: OpsCall, form: Annotated[OpsNodesForm, Form()]
) -> Response:
    raw = [str(v) for v in form.node_ids]
    try:
        ids = [int(v) for v in raw]
    except ValueError:
        ids = []
    return _act(call, order_id, "nodes", {"node_ids": raw}, node_ids=ids)


def _opt_int(text: str) -> int | None:
    try:
        return parse_int(text, max_value=2**62) if text else None
    except ValueError:
        return None


@router.post("/ops/orders/{order_id}/credentials")
def ops_credentials(
    order_id: int, call: OpsCall, form: Annotated[OpsCredentialsForm, Form()]
) -> Response:
    values = form.values()
    try:
        count = min(parse_int(values.get("count", "0") or "0"), 64)
    except ValueError:
        count = 0
    try:
        port = parse_int(values.get("ssh_port", "22") or "22", max_value=10**6)
    except ValueError:
        port = 0
    hosts = []
    for i in range(count):
        hid = values.get(f"host_id_{i}", "")
        hosts.append(
            ops.HostInput(
                ip=values.get(f"ip_{i}", ""),
                fingerprints=values.get(f"fp_{i}", ""),
                host_id=_opt_int(hid),
                hostname=values.get(f"hostname_{i}", "").strip(),
            )
        )
    data = ops.CredentialsInput(
        ssh_user=values.get("ssh_user", "").strip(), hosts=hosts, ssh_port=port
    )
    return _act(call, order_id, "credentials", values, data=data)


@router.post("/ops/orders/{order_id}/deliver")
def ops_deliver(order_id: int, call: OpsCall) -> Response:
    return _act(call, order_id, "deliver")


@router.post("/ops/orders/{order_id}/delay")
def ops_delay(order_id: int, call: OpsCall, form: Annotated[OpsDelayForm, Form()]) -> Response:
    raw = form.new_estimate.strip()
    try:
        estimate: date | None = date.fromisoformat(raw) if raw else None
    except ValueError:
        estimate = None
    sent = {"reason": form.reason, "new_estimate": raw}
    return _act(call, order_id, "delay", sent, reason=form.reason, new_estimate=estimate)


@router.post("/ops/orders/{order_id}/end")
def ops_end(order_id: int, call: OpsCall, form: Annotated[OpsEndForm, Form()]) -> Response:
    reason = form.reason[:300]
    return _act(call, order_id, "end", {"reason": reason}, reason=reason, confirm=form.confirm)


@router.post("/ops/orders/{order_id}/wiped")
def ops_wiped(order_id: int, call: OpsCall) -> Response:
    return _act(call, order_id, "wiped")
