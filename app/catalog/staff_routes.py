"""Staff: nodes, incoming batches, lead times and list prices (mounted under /staff).

Sales and ops may look; only ops may change anything (``OpsCall`` on every POST).
Every change is audited (``app.accounts.audit.record``) by the service.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Form
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts.deps import Call, OpsCall, StaffCall
from app.catalog import service as svc
from app.catalog.models import NODE_STATE_LABELS, NodeState
from app.catalog.specs import all_specs
from app.errors import N_, InvalidInput
from app.money import parse_amount
from app.numbers import NumberError, parse_int
from app.web.flash import flash
from app.web.forms import FormModel, refused
from app.web.i18n import gettext as _
from app.web.i18n import ngettext
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)


def _page(
    call: Call,
    *,
    form: str = "",
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    specs = [s for s in all_specs()]
    session, now = call.db, call.now
    nodes = svc.all_nodes(session)
    return render(
        call.request,
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
            "can_edit": call.user.is_ops,
            "form": form,
            "errors": {k: _(v) for k, v in (errors or {}).items()},
            "values": values or {},
            "today": now.date().isoformat(),
        },
        status_code=status,
    )


def _back(anchor: str = "") -> Response:
    return RedirectResponse(f"/staff/nodes{anchor}", status_code=303)


# What a form's work returns when it went through: the flash message and its category.
Done = tuple[str, str]


def _submit(
    call: Call,
    form: FormModel,
    form_key: str,
    work: Callable[[dict[str, str]], Done],
    anchor: str,
) -> Response:
    """One ops form: ``work`` gets the typed values; on a refused input nothing changes and
    the page comes again with the messages by the ``form_key`` form, else back to ``anchor``
    with ``work``'s flash."""
    f = {k: str(v) for k, v in form.model_dump(exclude_none=True).items()}
    with refused(call.db) as failed:
        message, category = work(f)
    if failed.errors is not None:
        return _page(call, form=form_key, errors=failed.errors, values=f, status=422)
    flash(call.request, message, category)
    return _back(anchor)


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
def stock_page(call: StaffCall) -> Response:
    return _page(call)


@router.post("/nodes/add", response_class=HTMLResponse)
def node_add(call: OpsCall, form: Annotated[NodeAddForm, Form()]) -> Response:
    def work(f: dict[str, str]) -> Done:
        node = svc.add_node(
            call.db,
            sku_id=form.sku_id,
            hostname=form.hostname,
            mgmt_ip=form.mgmt_ip,
            state=form.state,
            now=call.now,
            actor=call.user,
            ip=call.ip,
        )
        return _("Node {name} added.").format(name=node.hostname), "success"

    return _submit(call, form, "node-add", work, "#nodes")


@router.post("/nodes/{node_id}", response_class=HTMLResponse)
def node_change(node_id: int, call: OpsCall, form: Annotated[NodeChangeForm, Form()]) -> Response:
    def work(f: dict[str, str]) -> Done:
        node = svc.update_node(
            call.db,
            node_id,
            now=call.now,
            actor=call.user,
            state=form.state or None,
            mgmt_ip=form.mgmt_ip,
            note=form.note,
            ip=call.ip,
        )
        return _("Node {name} saved.").format(name=node.hostname), "success"

    return _submit(call, form, f"node-{node_id}", work, f"#node-{node_id}")


def _batch_save(call: Call, form: BatchForm, batch_id: int | None) -> Response:
    """A new incoming batch (``batch_id`` None) or an expected one changed: the same form."""

    def work(f: dict[str, str]) -> Done:
        qty, when = _batch_numbers(f)
        if batch_id is None:
            svc.add_batch(
                call.db,
                sku_id=f.get("sku_id", ""),
                quantity=qty,
                expected_on=when,
                now=call.now,
                actor=call.user,
                note=f.get("note", ""),
                ip=call.ip,
            )
            return _("Incoming batch added."), "success"
        svc.update_batch(
            call.db,
            batch_id,
            now=call.now,
            actor=call.user,
            quantity=qty,
            expected_on=when,
            ip=call.ip,
        )
        return _("Batch saved."), "success"

    key = "batch-add" if batch_id is None else f"batch-{batch_id}"
    return _submit(call, form, key, work, "#batches")


@router.post("/batches/add", response_class=HTMLResponse)
def batch_add(call: OpsCall, form: Annotated[BatchForm, Form()]) -> Response:
    return _batch_save(call, form, None)


@router.post("/batches/{batch_id}", response_class=HTMLResponse)
def batch_change(batch_id: int, call: OpsCall, form: Annotated[BatchForm, Form()]) -> Response:
    return _batch_save(call, form, batch_id)


@router.post("/batches/{batch_id}/arrived", response_class=HTMLResponse)
def batch_arrived(batch_id: int, call: OpsCall) -> Response:
    nodes = svc.mark_batch_arrived(call.db, batch_id, now=call.now, actor=call.user, ip=call.ip)
    flash(
        call.request,
        ngettext(
            "Batch arrived: {n} node added to stock.",
            "Batch arrived: {n} nodes added to stock.",
            len(nodes),
        ).format(n=len(nodes)),
        "success",
    )
    return _back("#nodes")


@router.post("/prices/{sku_id}", response_class=HTMLResponse)
def price_change(sku_id: str, call: OpsCall, form: Annotated[PriceForm, Form()]) -> Response:
    def work(f: dict[str, str]) -> Done:
        try:
            cents = parse_amount(f.get("price", ""))
        except ValueError:
            raise InvalidInput(
                errors={"price": N_("Enter a price in US$, for example 34900.")}
            ) from None
        try:
            change = svc.set_list_price(
                call.db,
                sku_id=sku_id,
                cents=cents,
                reason=f.get("reason", ""),
                actor=call.user,
                now=call.now,
                ip=call.ip,
            )
        except InvalidInput as e:
            if "cents" in e.errors:
                e.errors["price"] = e.errors.pop("cents")
            raise
        if change is None:
            return _("The price is unchanged."), "info"
        return _("List price changed; it applies to new orders and quotes."), "success"

    return _submit(call, form, f"price-{sku_id}", work, "#prices")


@router.post("/lead-times/{sku_id}", response_class=HTMLResponse)
def lead_time_change(sku_id: str, call: OpsCall, form: Annotated[LeadTimeForm, Form()]) -> Response:
    def work(f: dict[str, str]) -> Done:
        days = _int(f.get("days", ""), "lead_time", N_("Enter a whole number of business days."))
        svc.set_lead_time(call.db, sku_id, days, now=call.now, actor=call.user, ip=call.ip)
        return _("Lead time saved."), "success"

    return _submit(call, form, f"lead-{sku_id}", work, "#prices")
