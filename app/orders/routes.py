"""The customer's pages: /deploy (form + live summary), review, pay, top-up, cancel, console."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from app.accounts import login
from app.accounts import service as accounts
from app.accounts.deps import Call, OptionalUser, UserCall
from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE
from app.accounts.sshkeys import looks_private
from app.catalog import service as catalog
from app.catalog import specs
from app.errors import N_, DomainError, InsufficientBalance, InvalidInput
from app.numbers import NumberError, parse_money_cents
from app.orders import console_routes, service
from app.orders.console_routes import NO_STORE, image_name
from app.orders.lifecycle import OrderStatus
from app.orders.models import Order
from app.orders.schemas import DeployForm, PayForm, TopupForm
from app.payments import service as payments
from app.payments.rates import CURRENCIES
from app.quotes import service as quotes
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.numbers import number_message
from app.web.routing import AppRoute
from app.web.templating import is_htmx, render

router = APIRouter(route_class=AppRoute, include_in_schema=False)
router.include_router(console_routes.router)  # /console and an order's page

DEFAULT_SKU = "hgx-b200"
NOTE_FIELDS = (
    "note_model_size",
    "note_token_budget",
    "note_node_count",
    "note_comm_pattern",
    "note_free_text",
)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def self_serve_specs() -> list[specs.NodeSpec]:
    return [s for s in specs.all_specs() if s.self_serve]


def _sku_or_none(sku_id: str) -> specs.NodeSpec | None:
    try:
        return specs.spec(sku_id)
    except KeyError:
        return None


def summary_context(
    session: Session,
    user: User | None,
    sku_id: str,
    nodes: Any,
    quote: str,
    now: datetime,
    image: str = "",
    sizing: str = "",
) -> dict[str, Any]:
    """Promised date, price and balance/shortfall for a SKU and node count (above the
    self-serve limit: the sales path)."""

    ctx: dict[str, Any] = {"sum_ok": False, "sum_error": None, "sum_image_warning": ""}
    spec = _sku_or_none(sku_id)
    if spec is not None and image and not specs.image_fits(spec.id, image):
        ctx["sum_image_warning"] = (
            _("This image is for NVIDIA nodes; MI355X needs a ROCm image.")
            if spec.vendor == "amd"
            else _("ROCm images run only on AMD MI355X; choose an Ubuntu image with CUDA.")
        )
    n = service.parse_count(nodes)
    if spec is None:
        ctx["sum_error"] = _("Choose a node type to see the delivery date and price.")
        return ctx
    if not spec.self_serve:
        ctx["sum_error"] = _(
            "This rack is sold through our sales team, not self-serve checkout. Ask for a quote."
        )
        return ctx
    if n is not None and n > service.MAX_NODES:
        ctx["sum_error"] = _(service.ABOVE_SELF_SERVE)
        ctx["sum_sales_url"] = quotes.cluster_request_path(sku=spec.id, nodes=n, sizing=sizing)
        return ctx
    if n is None or n < 1:
        ctx["sum_error"] = _("Enter a node count between 1 and 16.")
        return ctx
    promise = catalog.current_promise(session, spec.id, n, now)
    terms = service.price_terms(
        session, spec.id, n, quote, now, user_id=user.id if user is not None else None
    )
    total = terms.unit_price_cents * n
    available, _held = service.balance_of(session, user)
    ctx.update(
        sum_ok=True,
        sum_spec=spec,
        sum_nodes=n,
        sum_promise=promise,
        sum_unit=terms.unit_price_cents,
        sum_total=total,
        sum_quote=terms,
        sum_quote_note=(
            _(terms.quote_note).format(**terms.quote_note_params) if terms.quote_note else ""
        ),
        sum_available=available,
        sum_shortfall=None if available is None else max(0, total - available),
        sum_gpu_hour=total / (n * spec.gpus_per_node * 730) / 100,
    )
    return ctx


def _values_from_query(request: Request, session: Session, now: datetime) -> dict[str, Any]:
    q = request.query_params
    v: dict[str, Any] = {
        "sku": q.get("sku", "") or DEFAULT_SKU,
        "nodes": q.get("nodes", "") or "1",
        "image": q.get("image", ""),
        "ssh_key_ids": [],
        "new_key_name": "",
        "new_key_text": "",
        "note_model_size": q.get("note_model_size", ""),
        "note_token_budget": q.get("note_token_budget", ""),
        "note_node_count": q.get("note_node_count", ""),
        "note_private_network": q.get("note_private_network", "") in ("1", "true", "on"),
        "note_comm_pattern": q.get("note_comm_pattern", ""),
        "note_free_text": "",
        "sizing": q.get("sizing", ""),
        "quote": q.get("quote", ""),
        "account_mode": "signup",
        "email": "",
    }
    if v["quote"]:
        terms = quotes.quote_for_checkout(session, v["quote"], now)
        if terms is not None:
            v["sku"] = terms.sku_id
            v["nodes"] = str(terms.quantity)
            v["email"] = terms.prospect_email  # the prospect signs up with the quoted address
    spec = _sku_or_none(v["sku"])
    if not v["image"] and spec is not None and spec.images:
        v["image"] = spec.images[-1] if spec.vendor != "amd" else spec.images[-1]
    return v


def _image_groups() -> list[tuple[str, list[specs.ImageSpec]]]:
    nv = [i for i in specs.all_images() if i.vendor == "nvidia"]
    amd = [i for i in specs.all_images() if i.vendor == "amd"]
    return [
        (_("NVIDIA nodes (H100, H200, B200, B300)"), nv),
        (_("AMD Instinct MI355X"), amd),
    ]


def _render_deploy(
    request: Request,
    session: Session,
    user: User | None,
    now: datetime,
    values: dict[str, Any],
    errors: dict[str, str] | None = None,
    idem_key: str | None = None,
    notice: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    saved_keys: list[Any] = []
    if user is not None and user.id is not None:
        saved_keys = list(accounts.ssh_keys_for(session, user.id))
    translated = {k: _(m) for k, m in (errors or {}).items()}
    sizing_link = "/size?" + values["sizing"] if values.get("sizing") else ""
    ctx = {
        "v": values,
        "errors": translated,
        "skus": self_serve_specs(),
        "sales_skus": [s for s in specs.all_specs() if not s.self_serve],
        "image_groups": _image_groups(),
        "saved_keys": saved_keys,
        "idem_key": idem_key or service.new_idempotency_key(),
        "sizing_link": sizing_link,
        "notice": notice,
        "account_mode": values.get("account_mode", "signup"),
        "account_email": values.get("email", ""),
        "account_password": values.get("password", ""),
        "requested_sales_sku": _sku_or_none(values["sku"]) if values["sku"] else None,
        **summary_context(
            session,
            user,
            values["sku"],
            values["nodes"],
            values["quote"],
            now,
            values["image"],
            values.get("sizing", ""),
        ),
    }
    return render(request, "orders/deploy.html", ctx, status_code=status_code, headers=NO_STORE)


# ---------------------------------------------------------------------------------------
# /deploy
# ---------------------------------------------------------------------------------------


@router.get("/deploy", response_class=HTMLResponse)
def deploy_page(request: Request, session: SessionDep, now: NowDep, user: OptionalUser) -> Response:
    values = _values_from_query(request, session, now)
    return _render_deploy(request, session, user, now, values)


@router.get("/deploy/summary", response_class=HTMLResponse)
def deploy_summary(
    request: Request, session: SessionDep, now: NowDep, user: OptionalUser
) -> Response:
    q = request.query_params
    ctx = summary_context(
        session,
        user,
        q.get("sku", ""),
        q.get("nodes", ""),
        q.get("quote", ""),
        now,
        q.get("image", ""),
        q.get("sizing", ""),
    )
    if not is_htmx(request):
        # Without htmx the summary is part of the page: go there with the same choices.
        return RedirectResponse(
            "/deploy?"
            + urlencode({k: q.get(k, "") for k in ("sku", "nodes", "quote") if q.get(k)}),
            status_code=303,
        )
    return render(request, "orders/_summary.html", ctx)


@router.post("/deploy", response_class=HTMLResponse)
def deploy_submit(
    request: Request,
    session: SessionDep,
    now: NowDep,
    user: OptionalUser,
    form: Annotated[DeployForm, Form()],
) -> Response:
    values = form.values()
    idem_key = form.idempotency_key.strip()[:80] or service.new_idempotency_key()
    draft, errors = service.parse_draft({**values, "ssh_key_ids": values["ssh_key_ids"]})
    if looks_private(values["new_key_text"]):
        values["new_key_text"] = ""  # never echo a private key back into the page
    if user is None:
        # Show what is wrong with the account part together with the rest of the form.

        for k, v in accounts.inline_errors(
            mode=values["account_mode"],
            email=values["email"],
            password=form.password,
        ).items():
            errors.setdefault(k, v)
    if errors:
        if user is None and "password" not in errors and "auth" not in errors:
            # Keep what they typed when the problem is elsewhere (issue 19, defect 10);
            # a refused password is never echoed back.
            values["password"] = form.password
        notice = None
        if user is None and request.cookies.get(SESSION_COOKIE):
            # A session cookie that no longer signs anyone in: the session ended (revoked
            # from another device, expired) while the form was open. Say so, ask for the
            # password only; what they chose and wrote stays in the form.
            notice = _(
                "You were signed out, so nothing was ordered. Log in again to continue; "
                "your choices and notes are kept."
            )
            values["account_mode"] = "login"
            for k in ("account_mode", "email", "password", "auth"):
                errors.pop(k, None)
        return _render_deploy(
            request, session, user, now, values, errors, idem_key, notice, status_code=422
        )

    response = Response(status_code=303)
    if user is None:
        try:
            user = login.signup_or_login(
                session,
                request,
                response,
                mode=values["account_mode"],
                email=values["email"],
                password=form.password,
                now=now,
            )
        except DomainError as e:
            errs = {k: _fmt(v, e.params) for k, v in (getattr(e, "errors", None) or {}).items()}
            if not errs:
                errs = {"auth": e.render_message(_)}
            page = _render_deploy(
                request, session, None, now, values, errs, idem_key, status_code=e.status_code
            )
            for v in _set_cookies(response):  # e.g. a throttle cookie
                page.headers.append("set-cookie", v)
            return page
        request.state.user = user
        request.state.user_loaded = True

    try:
        order, _created = service.create_order(
            session, user=user, draft=draft, idempotency_key=idem_key, now=now
        )
    except service.IdempotencyConflict as e:
        notice = _(
            "You already sent this form: it made order #{id}. Send it again to place a second order."
        ).format(id=e.params.get("order_id"))
        page = _render_deploy(request, session, user, now, values, {}, None, notice, 409)
        return _with_cookies(page, response)
    except InvalidInput as e:
        errs = {k: _fmt(v, e.params) for k, v in e.errors.items()} or {
            "ssh_keys": e.render_message(_)
        }
        if "name" in errs:
            errs["new_key_name"] = errs.pop("name")
        for k in ("text", "public_key"):
            if k in errs:
                errs["new_key_text"] = errs.pop(k)
        known = {"ssh_keys", "new_key_name", "new_key_text", "nodes", "sku", "image"}
        if not set(errs) & known:
            errs = {"ssh_keys": e.render_message(_)}
        page = _render_deploy(request, session, user, now, values, errs, idem_key, status_code=422)
        return _with_cookies(page, response)
    if draft.quote_token and order.quote_id is None:  # the summary said so; so does review
        flash(request, _(QUOTE_NOT_APPLIED), "warning")
    response.headers["location"] = str(request.app.url_path_for("review_page", order_id=order.id))
    return response


def _fmt(msgid: str, params: dict[str, Any]) -> str:
    text = _(msgid)
    try:
        return text.format(**params) if params else text
    except (KeyError, IndexError, ValueError):
        return text


def _set_cookies(response: Response) -> list[str]:
    return [v.decode() for k, v in response.raw_headers if k.lower() == b"set-cookie"]


def _with_cookies(page: Response, source: Response) -> Response:
    for v in _set_cookies(source):
        page.headers.append("set-cookie", v)
    return page


# ---------------------------------------------------------------------------------------
# Review, top-up, pay
# ---------------------------------------------------------------------------------------


def _review_page(
    call: Call,
    order: Order,
    *,
    error: str | None = None,
    status_code: int = 200,
    topup_errors: dict[str, str] | None = None,
    topup_amount: str | None = None,
) -> HTMLResponse:

    rv = service.review(call.db, order, call.now)
    spec = specs.spec(order.sku_id)
    back = call.request.app.url_path_for("review_page", order_id=order.id)
    open_topups = [
        i
        for i in payments.invoices_for(call.db, order.user_id)
        if i.return_to == back and not i.final
    ]
    return render(
        call.request,
        "orders/review.html",
        {
            "open_topups": open_topups if rv.shortfall_cents > 0 else [],
            "order": order,
            "rv": rv,
            "spec": spec,
            "image_label": image_name(order.image_id),
            "keys": service.ssh_keys_of(order),
            "error": error,
            "topup_errors": topup_errors or {},
            "topup_amount": topup_amount
            if topup_amount is not None
            else f"{rv.shortfall_cents / 100:.2f}",
            "currencies": [(c.code, c.name) for c in CURRENCIES.values()],
        },
        status_code=status_code,
        headers=NO_STORE,
    )


def _to_order(request: Request, order_id: int | None) -> RedirectResponse:
    """See other: the order's page in the console."""
    return RedirectResponse(
        request.app.url_path_for("console_order", order_id=order_id), status_code=303
    )


@router.get("/orders/{order_id}/review", response_class=HTMLResponse)
def review_page(order_id: int, call: UserCall) -> Response:
    order = service.get_order_for(call.db, call.user, order_id)
    if order.status != OrderStatus.awaiting_payment.value:
        return _to_order(call.request, order.id)
    return _review_page(call, order)


QUOTE_NOT_APPLIED = N_(
    "The quote in your link does not apply to this order (it expired, was withdrawn, was used "
    "for another order or covers another configuration), so the list price applies. Check the "
    "price before you pay."
)
MISSING_PROMISE = N_(
    "We could not read the delivery date this payment was sent with. Check the date on this "
    "page, then pay again."
)


@router.post("/orders/{order_id}/pay", response_class=HTMLResponse)
def pay(order_id: int, call: UserCall, form: Annotated[PayForm, Form()]) -> Response:
    expected = form.expected_promise()
    key = form.idempotency_key
    if form.promise_date and expected is None:  # sent, but not a date: never pay blind to it
        order = service.get_order_for(call.db, call.user, order_id)
        if order.status != OrderStatus.awaiting_payment.value:
            return _to_order(call.request, order_id)  # nothing to pay: its page says why
        return _review_page(call, order, error=_(MISSING_PROMISE), status_code=422)
    try:
        order = service.pay_order(
            call.db,
            user=call.user,
            order_id=order_id,
            idempotency_key=key,
            now=call.now,
            expected_promise=expected,
        )
    except (
        service.PromiseChanged,
        service.PriceChanged,
        service.NotPromisable,
        InsufficientBalance,
    ) as e:
        order = service.get_order_for(call.db, call.user, order_id)
        return _review_page(call, order, error=e.render_message(_), status_code=e.status_code)
    except service.NotPayable as e:  # a stale tab: discarded meanwhile; its page says so
        flash(call.request, e.render_message(_), "error")
        return _to_order(call.request, order_id)
    if order.status in (OrderStatus.cancelled.value, OrderStatus.abandoned.value):
        return _to_order(call.request, order.id)  # paid once, since cancelled: its page says so
    flash(
        call.request,
        _("Paid. Your order is confirmed; we will hand over the nodes by the promised date."),
        "success",
    )
    return _to_order(call.request, order.id)


@router.post("/orders/{order_id}/topup", response_class=HTMLResponse)
def topup(order_id: int, call: UserCall, form: Annotated[TopupForm, Form()]) -> Response:
    order = service.get_order_for(call.db, call.user, order_id)
    if order.status != OrderStatus.awaiting_payment.value:
        return _to_order(call.request, order.id)
    rv = service.review(call.db, order, call.now)
    raw = form.amount
    currency = form.currency
    errors: dict[str, str] = {}
    try:
        cents = parse_money_cents(raw)
    except NumberError as e:
        cents = 0
        errors["amount"] = number_message(e)
    if not errors and cents < max(rv.shortfall_cents, 1):
        errors["amount"] = _("Top up at least the shortfall.")
    if currency not in CURRENCIES:
        errors["currency"] = _("Choose a currency.")
    if errors:
        return _review_page(call, order, topup_errors=errors, topup_amount=raw, status_code=422)
    assert call.user.id is not None
    invoice = payments.create_topup(
        call.db,
        user_id=call.user.id,
        amount_cents=cents,
        currency=currency,
        now=call.now,
        return_to=str(call.request.app.url_path_for("review_page", order_id=order.id)),
        provider=call.request.app.state.payment_provider,
    )
    return RedirectResponse(_invoice_url(invoice), status_code=303)


def _invoice_url(invoice: Any) -> str:
    return f"/topups/{invoice.id}"  # the invoice page (payments), with its simulation controls


@router.get("/orders/{order_id}/cancel", response_class=HTMLResponse)
def cancel_confirm(order_id: int, call: UserCall) -> Response:
    """The confirmation step before a paid, undelivered order is cancelled."""
    order = service.get_order_for(call.db, call.user, order_id)
    action = service.cancel_action(order, call.now)
    if action != "refund":
        return _to_order(call.request, order_id)
    assert order.id is not None
    return render(
        call.request,
        "orders/cancel.html",
        {
            "order": order,
            "spec": specs.spec(order.sku_id),
            "late": service.is_order_late(order, call.now),
        },
    )


@router.post("/orders/{order_id}/cancel", response_class=HTMLResponse)
def cancel(
    order_id: int, call: UserCall, confirm: Annotated[str, Form(max_length=8)] = ""
) -> Response:
    current = service.get_order_for(call.db, call.user, order_id)
    if service.cancel_action(current, call.now) == "refund" and confirm != "yes":
        # A refund-cancel of a paid order needs the confirmation step first.
        return RedirectResponse(
            call.request.app.url_path_for("cancel_confirm", order_id=order_id), status_code=303
        )
    try:
        order = service.cancel_order(
            call.db,
            user=call.user,
            order_id=order_id,
            now=call.now,
            expected_action="refund" if confirm == "yes" else None,
        )
    except (service.NotCancellable, service.OrderChangedMeanwhile) as e:
        flash(call.request, e.render_message(_), "error")
        return _to_order(call.request, order_id)
    if order.status == OrderStatus.cancelled.value:
        flash(
            call.request,
            _("Cancelled. The first month is back in your balance in full."),
            "success",
        )
    elif order.status == OrderStatus.abandoned.value:
        flash(call.request, _("Order discarded. Nothing was charged."), "success")
        return RedirectResponse("/console", status_code=303)
    else:
        flash(
            call.request,
            _("Your lease will end at the end of the paid month. Nothing more will be charged."),
            "success",
        )
    return _to_order(call.request, order.id)


@router.post("/orders/{order_id}/keep", response_class=HTMLResponse)
def keep(order_id: int, call: UserCall) -> Response:
    """Take back a cancel at the period end while the paid month runs."""
    try:
        service.keep_renewing(call.db, user=call.user, order_id=order_id, now=call.now)
        flash(call.request, _("Your lease renews monthly again, from your balance."), "success")
    except service.NotRenewable as e:
        flash(call.request, e.render_message(_), "error")
    return _to_order(call.request, order_id)
