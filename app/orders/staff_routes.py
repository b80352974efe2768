"""The ops desk (mounted under /staff): the provisioning queue and each order's actions.

Access: ops work the desk; sales may open the queue and an order read-only (they answer
customers' "when is my node ready?"), and every action (POST) needs ``OpsUser`` → sales get
403 and nothing changes.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session, col, select

from app.accounts.audit import client_ip
from app.accounts.deps import OpsUser, StaffUser
from app.accounts.models import User
from app.catalog import service as catalog
from app.catalog import specs
from app.errors import DomainError, InvalidInput, NotFound
from app.numbers import parse_int
from app.orders import controls, desk, lease_end, ops, service
from app.orders.lifecycle import LEASE_ACTIVE, PRE_DELIVERY, OrderStatus, is_late
from app.orders.models import Order, OrderEvent
from app.orders.schemas import OpsCredentialsForm, OpsDelayForm, OpsEndForm, OpsNodesForm
from app.web.deps import NowDep, SessionDep
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
def ops_queue(request: Request, user: StaffUser, session: SessionDep, now: NowDep) -> Response:
    f = desk.Filters.from_query(request.query_params)
    page = desk.queue(session, f, now)
    groups = desk.private_network_groups(session) if f.page == 1 else []
    return render(
        request,
        "staff/ops/queue.html",
        {
            "page": page,
            "f": f,
            "groups": groups,
            "risk": desk.risk_counts(session, now),
            "open_tasks": controls.open_tasks(session) if f.page == 1 else [],
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
def ops_order(
    request: Request, order_id: int, user: StaffUser, session: SessionDep, now: NowDep
) -> Response:
    order = ops.load_order(session, order_id, lock=False)
    return render(request, "staff/ops/order.html", _detail_context(session, order, now))


def _done(request: Request, order_id: int, message: str) -> Response:
    flash(request, message, "success")
    return RedirectResponse(
        request.app.url_path_for("ops_order", order_id=order_id), status_code=303
    )


def _failed(
    request: Request,
    session: Session,
    order_id: int,
    exc: DomainError,
    now: Any,
    form: dict[str, Any],
    which: str,
) -> Response:
    """Nothing of a refused action stays: roll back, then explain on the same page."""
    session.rollback()
    if isinstance(exc, NotFound):
        raise exc
    if isinstance(exc, InvalidInput):
        order = ops.load_order(session, order_id, lock=False)
        ctx = _detail_context(session, order, now)
        errors = {k: _(v) for k, v in exc.errors.items()}
        if not errors:
            errors = {"_": exc.render_message(_)}
        elif exc.field and exc.field in errors:
            errors[exc.field] = exc.render_message(_)
        ctx.update(errors=errors, form=form, failed=which)
        return render(request, "staff/ops/order.html", ctx, status_code=422)
    flash(request, exc.render_message(_), "error")
    return RedirectResponse(
        request.app.url_path_for("ops_order", order_id=order_id), status_code=303
    )


@router.post("/ops/orders/{order_id}/acknowledge")
def ops_acknowledge(
    request: Request, order_id: int, user: OpsUser, session: SessionDep, now: NowDep
) -> Response:
    try:
        ops.acknowledge(session, actor=user, order_id=order_id, now=now, ip=client_ip(request))
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {}, "acknowledge")
    return _done(request, order_id, _("Acknowledged. The customer was told."))


@router.post("/ops/orders/{order_id}/provision")
def ops_provision(
    request: Request, order_id: int, user: OpsUser, session: SessionDep, now: NowDep
) -> Response:
    try:
        ops.start_provisioning(
            session, actor=user, order_id=order_id, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {}, "provision")
    return _done(request, order_id, _("Provisioning started."))


@router.post("/ops/orders/{order_id}/nodes")
def ops_assign_nodes(
    request: Request,
    order_id: int,
    user: OpsUser,
    session: SessionDep,
    now: NowDep,
    form: Annotated[OpsNodesForm, Form()],
) -> Response:
    raw = [str(v) for v in form.node_ids]
    try:
        ids = [int(v) for v in raw]
    except ValueError:
        ids = []
    try:
        ops.assign_nodes(
            session, actor=user, order_id=order_id, node_ids=ids, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {"node_ids": raw}, "nodes")
    return _done(request, order_id, _("Nodes assigned."))


def _opt_int(text: str) -> int | None:
    try:
        return parse_int(text, max_value=2**62) if text else None
    except ValueError:
        return None


@router.post("/ops/orders/{order_id}/credentials")
def ops_credentials(
    request: Request,
    order_id: int,
    user: OpsUser,
    session: SessionDep,
    now: NowDep,
    form: Annotated[OpsCredentialsForm, Form()],
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
    try:
        ops.set_credentials(
            session, actor=user, order_id=order_id, data=data, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _failed(request, session, order_id, e, now, values, "credentials")
    return _done(request, order_id, _("Login details saved; the customer sees them now."))


@router.post("/ops/orders/{order_id}/deliver")
def ops_deliver(
    request: Request, order_id: int, user: OpsUser, session: SessionDep, now: NowDep
) -> Response:
    try:
        ops.mark_delivered(session, actor=user, order_id=order_id, now=now, ip=client_ip(request))
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {}, "deliver")
    return _done(request, order_id, _("Delivered. The first month is charged; the lease runs."))


@router.post("/ops/orders/{order_id}/delay")
def ops_delay(
    request: Request,
    order_id: int,
    user: OpsUser,
    session: SessionDep,
    now: NowDep,
    form: Annotated[OpsDelayForm, Form()],
) -> Response:
    reason = form.reason
    raw = form.new_estimate.strip()
    try:
        estimate: date | None = date.fromisoformat(raw) if raw else None
    except ValueError:
        estimate = None
    try:
        ops.mark_delayed(
            session,
            actor=user,
            order_id=order_id,
            reason=reason,
            new_estimate=estimate,
            now=now,
            ip=client_ip(request),
        )
    except DomainError as e:
        return _failed(
            request, session, order_id, e, now, {"reason": reason, "new_estimate": raw}, "delay"
        )
    return _done(request, order_id, _("Delay recorded; the customer was told by email."))


@router.post("/ops/orders/{order_id}/end")
def ops_end(
    request: Request,
    order_id: int,
    user: OpsUser,
    session: SessionDep,
    now: NowDep,
    form: Annotated[OpsEndForm, Form()],
) -> Response:
    reason = form.reason[:300]
    try:
        lease_end.end_lease(
            session,
            actor=user,
            order_id=order_id,
            now=now,
            ip=client_ip(request),
            reason=reason,
            confirm=form.confirm,
        )
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {"reason": reason}, "end")
    return _done(request, order_id, _("Lease ended; the nodes are waiting for their wipe."))


@router.post("/ops/orders/{order_id}/wiped")
def ops_wiped(
    request: Request, order_id: int, user: OpsUser, session: SessionDep, now: NowDep
) -> Response:
    try:
        lease_end.confirm_wipe(
            session, actor=user, order_id=order_id, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _failed(request, session, order_id, e, now, {}, "wipe")
    return _done(request, order_id, _("Wipe confirmed; the nodes are available again."))
