"""``/console/orders/{order_id}/launch``: the ordered layout's launch files, for its owner.

The order keeps the /size query it came from, its SKU and node count: the ordered layout is
that request sized on exactly that SKU and count (option 0 of the answer), so nothing more
needs storing; the framework is chosen on the page (default: the request's). Once ops have
handed the nodes over (login and host keys entered) and while the lease lives, their host
names (else addresses) fill the rendezvous endpoint and the hostfile. Another customer's
order is a 404, as every order page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import QueryParams

from app.accounts.deps import UserCall
from app.configurator import forms, launch_view
from app.orders import service
from app.sizing import SizingError, list_presets
from app.sizing.launch import Bundle, LaunchError, export_launch
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

LEASE_OVER = ("ended", "wiping", "wiped", "cancelled", "abandoned")


def _bundle(
    session: Any, user: Any, order_id: int, framework: str | None
) -> tuple[Bundle | None, LaunchError | None, str]:
    """(files, refusal, a note for the page) of the caller's own order (404 otherwise)."""
    order = service.get_order_for(session, user, order_id)
    assert order.id is not None
    no_answer = _(
        "This order was placed without a sizing answer: size the job on the sizing page to get its launch files."
    )
    if not order.sizing_query:
        return None, None, no_answer
    form = forms.parse_query(
        QueryParams(order.sizing_query), frozenset(p["id"] for p in list_presets())
    )
    if not form.ok or form.request is None:
        return None, None, no_answer
    req = {**form.request, "sku": order.sku_id, "nodes": order.quantity}
    hosts: list[str] = []
    if order.status not in LEASE_OVER:
        ready = [h for h in service.hosts_of(session, order.id) if h.host_key_fingerprints]
        hosts = [h.hostname or h.ip for h in ready]
    if hosts and len(hosts) >= order.quantity:
        note = _("The rendezvous and the hostfile name your delivered nodes.")
    else:
        hosts = []
        note = _(
            "Your nodes' host names fill the rendezvous and the hostfile once they are delivered."
        )
    try:
        return export_launch(req, 0, framework, hosts=hosts or None), None, note
    except LaunchError as e:
        return None, e, note
    except SizingError:
        return None, None, no_answer


def _framework(request: Request) -> str | None:
    return request.query_params.get("framework") or None


@router.get("/console/orders/{order_id}/launch", response_class=HTMLResponse)
def console_order_launch(order_id: int, call: UserCall) -> Response:
    fw = _framework(call.request)
    bundle, refused, note = _bundle(call.db, call.user, order_id, fw)
    base = f"/console/orders/{order_id}/launch"
    ctx = launch_view.page_context(
        bundle,
        refused,
        fw,
        page_url=lambda f: base + "?" + urlencode([("framework", f)]),
        file_url=lambda f, name: base + "/file?" + urlencode([("framework", f), ("name", name)]),
    )
    ctx.update(
        form_action=base,
        hidden=[],
        back_url=f"/console/orders/{order_id}",
        back_text=_("Back to the order"),
        note=note,
    )
    status = 422 if refused is not None else 200
    return render(call.request, "configurator/launch.html", ctx, status_code=status)


@router.get("/console/orders/{order_id}/launch/file")
def console_order_launch_file(order_id: int, call: UserCall) -> Response:
    bundle, refused, _note = _bundle(call.db, call.user, order_id, _framework(call.request))
    return launch_view.file_response(bundle, refused, call.request.query_params.get("name", ""))
