"""Public share pages: the prospect opens ``/q/{token}``, reads the quote, accepts it.

No login: the unguessable token is the credential, and it shows exactly one quote.
Node quotes accept into ``/deploy`` prefilled with ``quote=<token>`` (checkout honours the
quoted price until the quote expires). GB300 NVL72 terms accept into a confirmation:
sales contact the prospect to sign the term contract.

``/cluster-request`` is the sales path for any SKU, node count and term ("Talk to sales"
from /size, /deploy above the self-serve limit and the GB300 page).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from app.accounts.audit import client_ip
from app.accounts.deps import OptionalUser
from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.clock import utc
from app.quotes import pricing, service
from app.quotes.pricing import QuoteKind
from app.quotes.schemas import MAX_CLUSTER_MONTHS, ClusterRequestIn
from app.quotes.staff_routes import FormData, _quote_ctx, pdf_response
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.forms import field_errors
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

# The link is the credential: never cache the page.
PRIVATE_HEADERS = {"Cache-Control": "no-store"}


@router.get("/q/{token}", response_class=HTMLResponse)
def shared_quote(
    request: Request, token: str, session: SessionDep, now: NowDep, user: OptionalUser
) -> Response:
    by_staff = user is not None and user.is_staff
    q = service.view_shared(session, token, now, ip=client_ip(request), by_staff=by_staff)
    ctx = _quote_ctx(session, q)
    exp = q.expires_at
    ctx.update(
        {
            "token": token,
            "staff_view": False,
            "can_accept": q.status in pricing.OPEN_STATUSES,
            "deploy_url": service.deploy_url(q) if q.kind == QuoteKind.node else None,
            "honoured": exp is not None and pricing.honoured(q.status, utc(exp), now),
            # an order holds it (one quote, one order): no price to promise here any more
            "used": q.kind == QuoteKind.node and q.used_order_id is not None,
        }
    )
    return render(request, "quotes/public.html", ctx, headers=PRIVATE_HEADERS)


@router.post("/q/{token}/accept")
def accept_quote(request: Request, token: str, session: SessionDep, now: NowDep) -> Response:
    q = service.accept_shared(session, token, now, ip=client_ip(request))
    if q.kind == QuoteKind.node:
        target = service.deploy_url(q)
    else:
        target = str(request.app.url_path_for("shared_quote", token=token))
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": target, **PRIVATE_HEADERS})
    return RedirectResponse(target, status_code=303, headers=PRIVATE_HEADERS)


@router.get("/q/{token}/pdf")
def shared_pdf(request: Request, token: str, session: SessionDep, now: NowDep) -> Response:
    q = service.shared_quote(session, token, now)
    resp = pdf_response(session, q, now)
    return resp


# ----------------------------------------------------------------------------- cluster requests

CLUSTER_FIELDS = ("sku", "nodes", "months", "start_date", "workload", "email", "name", "company")


def _cluster_form(
    request: Request,
    values: dict[str, str],
    errors: dict[str, str],
    status_code: int = 200,
) -> Response:
    sizing = values.get("sizing", "").lstrip("?")
    return render(
        request,
        "quotes/cluster_request.html",
        {
            "values": values,
            "errors": {k: _(v) for k, v in errors.items()},
            "skus": service.sku_choices(),
            "terms": [1, 3, 6, 12, 18, 24, 30, MAX_CLUSTER_MONTHS],
            "sizing_link": "/size?" + sizing if sizing else "",
            "self_serve_max": SELF_SERVE_MAX_NODES,
        },
        status_code=status_code,
    )


def _default_start(now: datetime) -> date:
    return now.date() + timedelta(days=30)


@router.get("/cluster-request", response_class=HTMLResponse)
def cluster_request_form(request: Request, now: NowDep, user: OptionalUser) -> Response:
    q = request.query_params
    values = {
        "sku": q.get("sku", "")[:32],
        "nodes": q.get("nodes", "")[:12],
        "months": q.get("months", "")[:4] or "12",
        "start_date": _default_start(now).isoformat(),
        "workload": "",
        "email": user.email if user else "",
        "name": user.name if user else "",
        "company": user.company if user else "",
        "sizing": q.get("sizing", "")[:2000],
    }
    return _cluster_form(request, values, {})


@router.post("/cluster-request", response_class=HTMLResponse)
def cluster_request_submit(
    request: Request, session: SessionDep, now: NowDep, user: OptionalUser, form: FormData
) -> Response:
    values: dict[str, Any] = {k: form.get(k, "") for k in (*CLUSTER_FIELDS, "sizing")}
    try:
        data = ClusterRequestIn.model_validate(values, context={"today": now.date()})
    except ValidationError as e:
        errors = field_errors(e, ClusterRequestIn.FIELD_MESSAGES)
        return _cluster_form(request, values, errors, status_code=422)
    row = service.create_cluster_request(session, data, user_id=user.id if user else None, now=now)
    flash(
        request,
        _("Thank you. Sales received your request (no. {id}) and will reply by email.").format(
            id=row.id
        ),
        "success",
    )
    sizing = row.sizing_query
    target = (
        "/size?" + sizing
        if sizing
        else str(request.app.url_path_for("node_detail", sku_id=row.sku_id))
    )
    return RedirectResponse(target, status_code=303)


@router.get("/nodes/gb300-nvl72/request")
def old_rack_request_form() -> Response:
    """The GB300 rack form became the cluster request form (any SKU)."""
    return RedirectResponse(service.cluster_request_path(sku="gb300-nvl72"), status_code=308)
