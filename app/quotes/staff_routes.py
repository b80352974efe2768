"""Sales desk under /staff: quote list, builder, detail, PDF, approvals, cluster requests.

Mounted by app/staff/routes.py, which already requires sales or ops. Approving a
discount above the sales limit needs ``OpsCall``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlmodel import Session

from app.accounts.deps import OpsCall, SalesCall
from app.catalog.specs import spec
from app.configurator.routes import layout_rows
from app.errors import InvalidInput
from app.quotes import pdf_cache, pricing, service
from app.quotes.models import Quote
from app.quotes.pdf import build_pdf, pdf_language, promise_text
from app.quotes.schemas import QuoteIn
from app.web.flash import flash
from app.web.forms import field_errors
from app.web.i18n import current_locale
from app.web.i18n import gettext as _
from app.web.routing import AppRoute
from app.web.templating import is_htmx, render

router = APIRouter(route_class=AppRoute)

REQUEST_STATUS_LABELS = service.CLUSTER_REQUEST_STATUS_LABELS


async def form_data(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


FormData = Annotated[dict[str, str], Depends(form_data)]


def _promise_text(q: Quote) -> str:
    return promise_text(q, _)


def _layout_rows(summary: dict[str, Any] | None) -> list[tuple[str, str]]:
    detail = (summary or {}).get("layout_detail")
    if not isinstance(detail, dict) or not detail:
        return []
    return layout_rows(detail)


def _quote_ctx(session: Session, q: Quote) -> dict[str, Any]:
    s = spec(q.sku_id)
    summary = service.sizing_summary(q)
    people = service.users_by_id(session, {q.created_by_id, q.approved_by_id, q.customer_user_id})
    return {
        "quote": q,
        "ref": pricing.reference(q.id or 0),
        "sku": s,
        "summary": summary,
        "layout_rows": _layout_rows(summary),
        "promise_text": _promise_text(q),
        "status_labels": pricing.STATUS_LABELS,
        "fmt_discount": pricing.format_discount,
        "creator": people.get(q.created_by_id),
        "approver": people.get(q.approved_by_id) if q.approved_by_id else None,
        "customer": people.get(q.customer_user_id) if q.customer_user_id else None,
        "needs_approval": pricing.needs_approval(q.discount_bp),
        "approval_covers": service.approval_covers(q),
        "rack_gpus": pricing.RACK_GPUS,
    }


def _builder(
    request: Request,
    values: dict[str, str],
    errors: dict[str, str] | None = None,
    quote: Quote | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return render(
        request,
        "quotes/builder.html",
        {
            "values": values,
            "errors": {k: _(v) for k, v in (errors or {}).items()},
            "quote": quote,
            "sku_options": [
                (
                    s.id,
                    s.name
                    + (" — " + _("term contract, priced per GPU") if s.price_per_gpu else ""),
                )
                for s in service.sku_choices()
            ],
            "limit": pricing.format_discount(pricing.SALES_DISCOUNT_LIMIT_BP),
            "rack_gpus": pricing.RACK_GPUS,
        },
        status_code=status_code,
    )


def _to_quote(request: Request, q: Quote) -> RedirectResponse:
    """303 to the quote's staff page (named route, no hand-built URL)."""
    return RedirectResponse(
        request.app.url_path_for("quote_detail", quote_id=str(q.id)), status_code=303
    )


def _quote_input(session: Session, form: dict[str, str]) -> service.QuoteInput:
    """The builder form through its one model (QuoteIn), then the service's rules across
    fields; either failure → InvalidInput with a message per field."""
    try:
        model = QuoteIn.model_validate(form)
    except ValidationError as e:
        raise InvalidInput(errors=field_errors(e, QuoteIn.FIELD_MESSAGES)) from None
    return service.quote_input(session, model)


# ----------------------------------------------------------------------------- list


@router.get("/quotes", response_class=HTMLResponse)
def quote_list(
    call: SalesCall,
    status: Annotated[str, Query(max_length=24)] = "",
    q: Annotated[str, Query(max_length=120)] = "",
    page: Annotated[int, Query(ge=1, le=100000)] = 1,
) -> Response:
    session = call.db
    result = service.list_quotes(session, now=call.now, status=status, q=q, page=page)
    people = service.users_by_id(session, {x.created_by_id for x in result.items})
    new_requests = service.count_new_cluster_requests(session)
    return render(
        call.request,
        "quotes/list.html",
        {
            "page": result,
            "people": people,
            "status": status if status in service.status_filter_values() else "",
            "q": q,
            "statuses": service.status_filter_values(),
            "status_labels": pricing.STATUS_LABELS,
            "counts": service.status_counts(session),
            "new_requests": int(new_requests),
            "reference": pricing.reference,
            "fmt_discount": pricing.format_discount,
            "skus": {s.id: s for s in service.sku_choices()},
        },
    )


# ----------------------------------------------------------------------------- builder


@router.get("/quotes/new", response_class=HTMLResponse)
def quote_new(
    call: SalesCall,
    from_request: Annotated[int | None, Query(ge=1)] = None,
    sizing: Annotated[str, Query(max_length=2000)] = "",
    email: Annotated[str, Query(max_length=254)] = "",
) -> Response:
    values = {
        "valid_days": str(pricing.DEFAULT_VALID_DAYS),
        "discount": "0",
        "months": "1",
        "quantity": "1",
        "sku": "hgx-b200",
        "sizing": sizing,
        "prospect_email": email,
    }
    if email:
        customer = service.find_customer(call.db, email)
        if customer:
            values["prospect_name"] = customer.name
            values["prospect_company"] = customer.company
    if from_request:
        values.update(service.quote_values_from_request(call.db, from_request))
    return _builder(call.request, values)


@router.get("/quotes/customers", response_class=HTMLResponse)
def customer_lookup(
    call: SalesCall, prospect_email: Annotated[str, Query(max_length=254)] = ""
) -> Response:
    """Existing customers whose email matches (an htmx fragment under the email field)."""
    matches = service.search_customers(call.db, prospect_email)
    exact = service.find_customer(call.db, prospect_email)
    return render(
        call.request,
        "quotes/_customers.html",
        {"matches": matches, "exact": exact, "typed": prospect_email},
    )


@router.post("/quotes/new")
def quote_create(call: SalesCall, form: FormData) -> Response:
    try:
        data = _quote_input(call.db, form)
    except InvalidInput as e:
        return _builder(call.request, form, e.errors, status_code=422)
    q = service.create_quote(call.db, actor=call.user, data=data, now=call.now, ip=call.ip)
    rr_id = form.get("from_request", "")
    if rr_id.isascii() and rr_id.isdigit() and len(rr_id) < 19:
        service.mark_cluster_request_quoted(
            call.db, int(rr_id), q, actor=call.user, now=call.now, ip=call.ip
        )
    flash(call.request, _("Quote saved as a draft. Check it, then send it."), "success")
    return _to_quote(call.request, q)


# ----------------------------------------------------------------------------- cluster requests


@router.get("/quotes/requests", response_class=HTMLResponse)
def cluster_requests(
    call: SalesCall,
    status: Annotated[str, Query(max_length=16)] = "",
    page: Annotated[int, Query(ge=1, le=100000)] = 1,
) -> Response:
    result = service.list_cluster_requests(call.db, status=status, page=page)
    ctx = {
        "items": result.items,
        "status": status if status in REQUEST_STATUS_LABELS else "",
        "labels": REQUEST_STATUS_LABELS,
        "page": result.page,
        "pages": result.pages,
        "total": result.total,
        "skus": {s.id: s for s in service.sku_choices()},
    }
    return render(call.request, "quotes/requests.html", ctx)


@router.post("/quotes/requests/{request_id}")
def cluster_request_update(request_id: int, call: SalesCall, form: FormData) -> Response:
    rr = service.update_cluster_request(
        call.db,
        request_id,
        status=form.get("status", ""),
        staff_note=form.get("staff_note"),
        actor=call.user,
        now=call.now,
        ip=call.ip,
    )
    if is_htmx(call.request):
        return render(
            call.request,
            "quotes/_request_row.html",
            {
                "r": rr,
                "labels": REQUEST_STATUS_LABELS,
                "skus": {s.id: s for s in service.sku_choices()},
                "saved": True,
            },
        )
    flash(call.request, _("Request updated."), "success")
    back = form.get("back", "")
    target = back if back.startswith("/staff/quotes/requests") else "/staff/quotes/requests"
    return RedirectResponse(target, status_code=303)


def _load(session: Session, quote_id: int, now: Any, lock: bool = False) -> Quote:
    return service.get_quote(session, quote_id, now, lock=lock)


@router.get("/quotes/{quote_id}/edit", response_class=HTMLResponse)
def quote_edit(quote_id: int, call: SalesCall) -> Response:
    q = _load(call.db, quote_id, call.now)
    values = {
        "prospect_name": q.prospect_name,
        "prospect_email": q.prospect_email,
        "prospect_company": q.prospect_company,
        "sku": q.sku_id,
        "quantity": str(q.quantity),
        "months": str(q.months),
        "discount": pricing.format_discount(q.discount_bp),
        "valid_days": str(q.valid_days),
        "sizing": q.sizing_query,
        "sizing_notes": q.sizing_notes,
        "notes": q.notes,
        "note_model_size": q.note_model_size,
        "note_token_budget": q.note_token_budget,
        "note_comm_pattern": q.note_comm_pattern,
    }
    return _builder(call.request, values, quote=q)


@router.post("/quotes/{quote_id}/edit")
def quote_update(quote_id: int, call: SalesCall, form: FormData) -> Response:
    q = _load(call.db, quote_id, call.now, lock=True)
    try:
        data = _quote_input(call.db, form)
    except InvalidInput as e:
        return _builder(call.request, form, e.errors, quote=q, status_code=422)
    service.update_quote(call.db, q, actor=call.user, data=data, now=call.now, ip=call.ip)
    flash(call.request, _("Quote updated."), "success")
    return _to_quote(call.request, q)


# ----------------------------------------------------------------------------- detail & actions


@router.get("/quotes/{quote_id}", response_class=HTMLResponse)
def quote_detail(quote_id: int, call: SalesCall) -> Response:
    q = _load(call.db, quote_id, call.now)
    ctx = _quote_ctx(call.db, q)
    ctx["share_url"] = call.request.app.state.settings.base_url.rstrip("/") + service.share_path(q)
    ctx["shared"] = q.status not in (
        pricing.QuoteStatus.draft,
        pricing.QuoteStatus.pending_approval,
        pricing.QuoteStatus.withdrawn,
    )
    ctx["staff_view"] = True
    return render(call.request, "quotes/detail.html", ctx)


@router.post("/quotes/{quote_id}/send")
def quote_send(quote_id: int, call: SalesCall) -> Response:
    q = _load(call.db, quote_id, call.now, lock=True)
    service.send_quote(call.db, q, actor=call.user, now=call.now, ip=call.ip)
    if q.status == pricing.QuoteStatus.pending_approval:
        flash(
            call.request,
            _(
                "The discount is above 10 %: the quote now waits for an ops approval before it is shared."
            ),
            "warning",
        )
    else:
        flash(
            call.request,
            _("Quote sent. Copy the link below and share it with the prospect."),
            "success",
        )
    return _to_quote(call.request, q)


@router.post("/quotes/{quote_id}/approve")
def quote_approve(quote_id: int, call: OpsCall, form: FormData) -> Response:
    q = _load(call.db, quote_id, call.now, lock=True)
    approve = form.get("decision") != "decline"
    service.decide_discount(
        call.db,
        q,
        approve=approve,
        actor=call.user,
        reason=form.get("reason", ""),
        now=call.now,
        ip=call.ip,
    )
    if approve:
        flash(call.request, _("Discount approved and the quote is sent."), "success")
    else:
        flash(call.request, _("Discount declined; the quote is back to draft."), "warning")
    return _to_quote(call.request, q)


@router.post("/quotes/{quote_id}/withdraw")
def quote_withdraw(quote_id: int, call: SalesCall) -> Response:
    q = _load(call.db, quote_id, call.now, lock=True)
    service.withdraw_quote(call.db, q, actor=call.user, now=call.now, ip=call.ip)
    flash(call.request, _("Quote withdrawn: its link no longer works."), "success")
    return _to_quote(call.request, q)


@router.get("/quotes/{quote_id}/pdf")
def quote_pdf(quote_id: int, call: SalesCall) -> Response:
    q = _load(call.db, quote_id, call.now)
    return pdf_response(call.db, q, call.now, staff=call.user)


def pdf_response(session: Session, q: Quote, now: Any, staff: Any = None) -> Response:
    s = spec(q.sku_id)
    creator = service.users_by_id(session, {q.created_by_id}).get(q.created_by_id)
    locale = current_locale()
    summary = service.sizing_summary(q)
    staff_email = creator.email if creator else ""
    # One render per quote version and language (see app/quotes/pdf_cache.py).
    key = (pdf_cache.version_of(q.model_dump()), locale, staff_email)
    body = pdf_cache.CACHE.get_or_render(
        key,
        lambda: build_pdf(
            q,
            locale=locale,
            summary=summary,
            # The rows are in the request's language: only when the PDF is in it too.
            layout_rows=_layout_rows(summary) if pdf_language(locale) == locale else None,
            sku_name=s.name,
            gpus_per_node=s.gpus_per_node,
            staff_email=staff_email,
            now=now,
        ),
    )
    if staff is not None:
        service.record_pdf_download(session, q, actor=staff, now=now)
    ref = pricing.reference(q.id or 0)
    headers = {
        "Content-Disposition": f'attachment; filename="{ref}.pdf"',
        "Content-Language": "zh-CN" if pdf_language(locale) == "zh_CN" else "en",
        "Cache-Control": "no-store",
    }
    return Response(body, media_type="application/pdf", headers=headers)
