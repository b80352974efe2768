"""Order controls over HTTP: the customer's requests (``/orders/{id}/tasks``) and the ops
side (``/staff/ops/tasks/{id}``, ``/staff/ops/orders/{id}/network``). Every form works
without JavaScript; success and refusal both land back on the order page with a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import Field

from app.accounts.deps import Call, OpsCall, UserCall
from app.errors import N_, DomainError, InvalidInput, NotFound
from app.numbers import NumberError, parse_int
from app.orders import controls
from app.web.flash import flash
from app.web.forms import FormModel
from app.web.i18n import gettext as _
from app.web.routing import AppRoute

router = APIRouter(route_class=AppRoute, include_in_schema=False)


class TaskForm(FormModel):
    """POST /orders/{id}/tasks."""

    kind: str = Field(default="", max_length=16)
    host_id: str = Field(default="", max_length=12)
    image: str = Field(default="", max_length=40)
    key_mode: str = Field(default="add", max_length=8)
    saved_key_id: str = Field(default="", max_length=12)
    public_key: str = Field(default="", max_length=16_384)
    key_name: str = Field(default="", max_length=200)
    confirm: str = Field(default="", max_length=8)
    note: str = Field(default="", max_length=2_000)


class TaskUpdateForm(FormModel):
    """POST /staff/ops/tasks/{id}."""

    status: str = Field(default="", max_length=16)
    ops_note: str = Field(default="", max_length=2_000)


class NetworkForm(FormModel):
    """POST /staff/ops/orders/{id}/network."""

    network_status: str = Field(default="", max_length=16)
    network_subnet: str = Field(default="", max_length=64)


def _optional_id(raw: str, field: str) -> int | None:
    if not raw.strip():
        return None
    try:
        return parse_int(raw, min_value=1, max_value=2**62)
    except NumberError:
        raise InvalidInput(N_("Choose one of the options."), field=field) from None


def _order_page(request: Request, order_id: int) -> RedirectResponse:
    return RedirectResponse(
        request.app.url_path_for("console_order", order_id=order_id) + "#controls", status_code=303
    )


def _ops_order_page(request: Request, order_id: int | str, anchor: str) -> RedirectResponse:
    return RedirectResponse(
        request.app.url_path_for("ops_order", order_id=order_id) + anchor, status_code=303
    )


def _change(call: Call, work: Callable[[], object], done: str) -> None:
    """``work`` as one change, said on the page the request goes back to: ``done``, or why
    it was refused (nothing of it stays). A missing order or task stays a 404."""
    try:
        work()
    except NotFound:
        raise
    except DomainError as e:
        call.db.rollback()
        flash(call.request, e.render_message(_), "error")
    else:
        flash(call.request, done, "success")


@router.post("/orders/{order_id}/tasks")
def request_task(order_id: int, call: UserCall, form: Annotated[TaskForm, Form()]) -> Response:
    def work() -> object:
        return controls.request_task(
            call.db,
            user=call.user,
            order_id=order_id,
            kind=form.kind,
            now=call.now,
            host_id=_optional_id(form.host_id, "host_id"),
            image=form.image,
            key_mode=form.key_mode,
            saved_key_id=_optional_id(form.saved_key_id, "saved_key_id"),
            new_key_text=form.public_key,
            new_key_name=form.key_name,
            confirm=form.confirm in ("1", "yes", "on", "true"),
            note=form.note,
            ip=call.ip,
        )

    _change(call, work, _("Request sent to our operations team. Its status shows below."))
    return _order_page(call.request, order_id)


@router.post("/staff/ops/tasks/{task_id}")
def update_task(task_id: int, call: OpsCall, form: Annotated[TaskUpdateForm, Form()]) -> Response:
    _change(
        call,
        lambda: call.run(
            controls.update_task, task_id=task_id, status=form.status, ops_note=form.ops_note
        ),
        _("Request updated; the customer sees it on their order."),
    )
    row = call.db.get(controls.OrderTask, task_id)
    return _ops_order_page(call.request, row.order_id if row else "", "#tasks")


@router.post("/staff/ops/orders/{order_id}/network")
def set_network(order_id: int, call: OpsCall, form: Annotated[NetworkForm, Form()]) -> Response:
    _change(
        call,
        lambda: call.run(
            controls.set_network,
            order_id=order_id,
            status=form.network_status,
            subnet=form.network_subnet,
        ),
        _("Private network status saved."),
    )
    return _ops_order_page(call.request, order_id, "#network")
