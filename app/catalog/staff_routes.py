"""Staff: nodes, incoming batches, lead times and list prices (mounted under /staff).

Sales and ops may look; only ops may change anything (``OpsUser`` on every POST).
Every change is audited (``app.accounts.audit.record``) by the service.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from app.accounts.audit import client_ip
from app.accounts.deps import OpsUser, StaffUser
from app.catalog import service as svc
from app.catalog.models import NODE_STATE_LABELS, NodeState
from app.catalog.specs import all_specs
from app.errors import N_, InvalidInput
from app.money import parse_amount
from app.numbers import NumberError, parse_int
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.forms import FormModel, refused
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)


def _page(
    request: Request,
    session: Session,
    now: Any,
    *,
    form: str = "",
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    specs = [s for s in all_specs()]
    nodes = svc.all_nodes(session)
    return render(
        request,
        "catalog/staff_nodes.html",
        {
            "specs": specs,
            "stock_specs": [s for s in specs if s.self_serve],
            "summary": svc.stock_summary(session),
            "nodes": nodes,
            "batches": svc.all_batches(session),
            "prices": svc.list_prices(session),
            "history": svc.price_history(session),
            "lead_times": {s.id: svc.lead_time_days(session, s.id) for s in specs if s.self_serve},
            "states": [(st.value, _(NODE_STATE_LABELS[st])) for st in NodeState],
            "manual_states": [
                (st, _(NODE_STATE_LABELS[NodeState(st)])) for st in svc.MANUAL_STATES
            ],
            "state_label": lambda st: _(NODE_STATE_LABELS.get(NodeState(st)) or st),
            "promises": svc.promises_for_all(session, now),
            "can_edit": bool(request.state.user and request.state.user.is_ops),
            "form": form,
            "errors": {k: _(v) for k, v in (errors or {}).items()},
            "values": values or {},
            "today": now.date().isoformat(),
        },
        status_code=status,
    )


def _again(
    request: Request, session: Session, now: Any, form: str, errors: Any, values: Any
) -> Response:
    """The page again, the refused form's messages next to its fields (nothing changed)."""
    return _page(request, session, now, form=form, errors=errors, values=values, status=422)


def _back(anchor: str = "") -> Response:
    return RedirectResponse(f"/staff/nodes{anchor}", status_code=303)


class NodeAddForm(FormModel):
    sku_id: str = ""
    hostname: str = ""
    mgmt_ip: str = ""
    state: str = NodeState.available.value


class NodeChangeForm(FormModel):
    """An empty or absent field keeps what the node has."""

    state: str | None = None
    mgmt_ip: str | None = None
    note: str | None = None


class BatchForm(FormModel):
    sku_id: str = ""
    quantity: str = ""
    expected_on: str = ""
    note: str = ""


class PriceForm(FormModel):
    price: str = ""
    reason: str = ""


class LeadTimeForm(FormModel):
    days: str = ""


def _echo(form: FormModel) -> dict[str, str]:
    return {k: str(v) for k, v in form.model_dump(exclude_none=True).items()}


def _int(value: str, field: str, message: str) -> int:
    """A whole number typed by staff, by the one number rule (full-width digits accepted;
    signs, decimals and other scripts' digits refused with ``message``)."""
    try:
        return parse_int(value, max_value=10**9)
    except NumberError:
        raise InvalidInput(errors={field: message}) from None


def _date(value: str, field: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(errors={field: N_("Enter a date (YYYY-MM-DD).")}) from None


def _batch_numbers(f: dict[str, str]) -> tuple[int, date]:
    """A batch form's node count and expected day (refused with a message by each field)."""
    qty = _int(f.get("quantity", ""), "quantity", N_("Enter a whole number of nodes."))
    return qty, _date(f.get("expected_on", ""), "expected_on")


@router.get("/nodes", response_class=HTMLResponse)
def stock_page(request: Request, session: SessionDep, now: NowDep, user: StaffUser) -> Response:
    return _page(request, session, now)


@router.post("/nodes/add", response_class=HTMLResponse)
def node_add(
    request: Request,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[NodeAddForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        node = svc.add_node(
            session,
            sku_id=form.sku_id,
            hostname=form.hostname,
            mgmt_ip=form.mgmt_ip,
            state=form.state,
            now=now,
            actor=user,
            ip=client_ip(request),
        )
    if failed.errors is not None:
        return _again(request, session, now, "node-add", failed.errors, f)
    flash(request, _("Node {name} added.").format(name=node.hostname), "success")
    return _back("#nodes")


@router.post("/nodes/{node_id}", response_class=HTMLResponse)
def node_change(
    request: Request,
    node_id: int,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[NodeChangeForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        node = svc.update_node(
            session,
            node_id,
            now=now,
            actor=user,
            state=form.state or None,
            mgmt_ip=form.mgmt_ip,
            note=form.note,
            ip=client_ip(request),
        )
    if failed.errors is not None:
        return _again(request, session, now, f"node-{node_id}", failed.errors, f)
    flash(request, _("Node {name} saved.").format(name=node.hostname), "success")
    return _back(f"#node-{node_id}")


@router.post("/batches/add", response_class=HTMLResponse)
def batch_add(
    request: Request,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[BatchForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        qty, when = _batch_numbers(f)
        svc.add_batch(
            session,
            sku_id=f.get("sku_id", ""),
            quantity=qty,
            expected_on=when,
            now=now,
            actor=user,
            note=f.get("note", ""),
            ip=client_ip(request),
        )
    if failed.errors is not None:
        return _again(request, session, now, "batch-add", failed.errors, f)
    flash(request, _("Incoming batch added."), "success")
    return _back("#batches")


@router.post("/batches/{batch_id}", response_class=HTMLResponse)
def batch_change(
    request: Request,
    batch_id: int,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[BatchForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        qty, when = _batch_numbers(f)
        svc.update_batch(
            session,
            batch_id,
            now=now,
            actor=user,
            quantity=qty,
            expected_on=when,
            ip=client_ip(request),
        )
    if failed.errors is not None:
        return _again(request, session, now, f"batch-{batch_id}", failed.errors, f)
    flash(request, _("Batch saved."), "success")
    return _back("#batches")


@router.post("/batches/{batch_id}/arrived", response_class=HTMLResponse)
def batch_arrived(
    request: Request, batch_id: int, session: SessionDep, now: NowDep, user: OpsUser
) -> Response:
    nodes = svc.mark_batch_arrived(session, batch_id, now=now, actor=user, ip=client_ip(request))
    flash(request, _("Batch arrived: {n} nodes added to stock.").format(n=len(nodes)), "success")
    return _back("#nodes")


@router.post("/prices/{sku_id}", response_class=HTMLResponse)
def price_change(
    request: Request,
    sku_id: str,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[PriceForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        try:
            cents = parse_amount(f.get("price", ""))
        except ValueError:
            raise InvalidInput(
                errors={"price": N_("Enter a price in US$, for example 34900.")}
            ) from None
        try:
            change = svc.set_list_price(
                session,
                sku_id=sku_id,
                cents=cents,
                reason=f.get("reason", ""),
                actor=user,
                now=now,
                ip=client_ip(request),
            )
        except InvalidInput as e:
            if "cents" in e.errors:
                e.errors["price"] = e.errors.pop("cents")
            raise
    if failed.errors is not None:
        return _again(request, session, now, f"price-{sku_id}", failed.errors, f)
    if change is None:
        flash(request, _("The price is unchanged."), "info")
    else:
        flash(request, _("List price changed; it applies to new orders and quotes."), "success")
    return _back("#prices")


@router.post("/lead-times/{sku_id}", response_class=HTMLResponse)
def lead_time_change(
    request: Request,
    sku_id: str,
    session: SessionDep,
    now: NowDep,
    user: OpsUser,
    form: Annotated[LeadTimeForm, Form()],
) -> Response:
    f = _echo(form)
    with refused(session) as failed:
        days = _int(f.get("days", ""), "lead_time", N_("Enter a whole number of business days."))
        svc.set_lead_time(session, sku_id, days, now=now, actor=user, ip=client_ip(request))
    if failed.errors is not None:
        return _again(request, session, now, f"lead-{sku_id}", failed.errors, f)
    flash(request, _("Lead time saved."), "success")
    return _back("#prices")
