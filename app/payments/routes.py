"""Top-up pages, the invoice page (status fragment, simulation controls) and the webhook."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

import segno
from fastapi import APIRouter, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlmodel import col, select

from app import errors
from app.accounts import audit
from app.accounts.deps import CurrentUser
from app.clock import utc, wall_now
from app.db import transaction
from app.errors import N_
from app.numbers import NumberError, parse_money_cents
from app.payments import rules
from app.payments import service as payments
from app.payments.addresses import payment_uri
from app.payments.models import ChainPayment, Invoice, WebhookDelivery
from app.payments.rates import CURRENCIES, format_units, format_units_for_reading
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.numbers import number_message
from app.web.routing import AppRoute
from app.web.templating import is_htmx, render

money_log = logging.getLogger("app.money")

router = APIRouter(route_class=AppRoute, include_in_schema=False)
# A top-up's amount, address and status are true only now: never shown from the cache.
NO_STORE = {"Cache-Control": "no-store"}
MAX_WEBHOOK_BYTES = 64 * 1024  # a BTCPay notification is well under 2 KB

STATUS_TEXT = {
    "New": N_("Waiting for payment"),
    "Processing": N_("Payment seen, waiting for confirmation"),
    "Settled": N_("Paid"),
    "Expired": N_("Expired"),
    "Invalid": N_("Invalid"),
}
EXCEPTION_TEXT = {
    "PaidPartial": N_("Paid in part"),
    "PaidOver": N_("Overpaid"),
    "PaidLate": N_("Paid late"),
}
SIM_ACTIONS = (
    ("pay_full", N_("Pay in full")),
    ("pay_part", N_("Pay part (two fifths)")),
    ("overpay", N_("Overpay (by a quarter)")),
    ("pay_unconfirmed", N_("Pay in full, unconfirmed")),
    ("confirm", N_("Confirm pending payments")),
    ("pay_late", N_("Pay after expiry")),
    ("expire", N_("Let it expire")),
    ("close_window", N_("End the 24-hour monitoring window")),
    ("pay_after_window", N_("Pay after the monitoring window")),
    ("redeliver", N_("Deliver the last notification twice")),
    ("out_of_order", N_("Send Settled before ReceivedPayment")),
)


def currency_options() -> list[tuple[str, str]]:
    return [(c.code, f"{c.code} — {c.name}") for c in CURRENCIES.values()]


def qr_svg(uri: str) -> str:
    """The payment URI as an inline SVG QR code (segno), sized by CSS."""
    qr = segno.make(uri, error="m")
    svg: str = qr.svg_inline(scale=4, border=2, dark="#0f172a", light="#ffffff", omitsize=True)
    return svg


def invoice_view(inv: Invoice, now: datetime) -> dict[str, Any]:
    cur = CURRENCIES[inv.currency]
    expires = utc(inv.expires_at)
    due, received = int(inv.due_units), int(inv.received_units)
    # What the customer still sends: the whole amount, or the rest after a part arrived.
    # Once the rate lock has ended (Expired, Invalid) or the invoice is closed, nothing:
    # the address is no longer shown and a new top-up is offered instead.
    payable = inv.status == rules.Status.new.value and not inv.final
    remaining = max(0, due - received)
    # A new top-up asks for the same amount, less what this one already credited.
    new_cents = inv.amount_cents - (inv.credited_cents or 0)
    new_cents = new_cents if new_cents >= payments.MIN_CENTS else inv.amount_cents
    new_topup = "/topups/new?" + urlencode(
        {"amount_cents": new_cents, "currency": inv.currency}
        | ({"return_to": inv.return_to} if inv.return_to else {})
    )
    return {
        "inv": inv,
        "cur": cur,
        "payable": payable and remaining > 0,
        "partly_paid": payable and 0 < received < due,
        "remaining_units": remaining,
        "remaining_text": format_units(remaining, cur.decimals),
        "remaining_uri": payment_uri(inv.currency, inv.address, remaining) if remaining else "",
        "new_topup_url": new_topup,
        "new_topup_cents": new_cents,
        "due_text": format_units(due, cur.decimals),
        # Exact (the customer sends it), trailing zeros trimmed; the rest is for reading.
        "due_read": format_units_for_reading(due, cur.decimals),
        "received_text": format_units_for_reading(received, cur.decimals),
        "expires_iso": expires.isoformat(),
        "lock_active": now < expires and not inv.final,
        # The simulated clock may run ahead of the browser's: the countdown adds this.
        "clock_offset_ms": int((now - wall_now()).total_seconds() * 1000),
        "status_text": STATUS_TEXT.get(inv.status, inv.status),
        "exception_text": EXCEPTION_TEXT.get(inv.exception_status, ""),
        "badge": {
            "Settled": "ok",
            "Processing": "warn",
            "New": "",
            "Expired": "bad",
            "Invalid": "bad",
        }.get(inv.status, ""),
    }


def _amount_from_query(raw: str | None) -> str:
    try:
        cents = int(raw or "")
    except ValueError:
        return ""
    return f"{cents / 100:.2f}" if 0 < cents <= payments.MAX_CENTS else ""


@router.get("/topups/new", response_class=HTMLResponse)
def topup_form(
    request: Request,
    user: CurrentUser,
    amount_cents: str | None = None,
    return_to: str | None = None,
    currency: str = "USDC",
) -> Response:
    return render(
        request,
        "payments/new.html",
        {
            "form": {
                "amount": _amount_from_query(amount_cents),
                "currency": currency if currency in CURRENCIES else "USDC",
                "return_to": return_to if rules.is_same_site_path(return_to) else "",
            },
            "errors": {},
            "currencies": currency_options(),
        },
        headers=NO_STORE,
    )


@router.post("/topups/new", response_class=HTMLResponse)
def topup_create(
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    now: NowDep,
    amount: Annotated[str, Form()] = "",
    currency: Annotated[str, Form()] = "",
    return_to: Annotated[str, Form()] = "",
) -> Response:
    if not rules.is_same_site_path(return_to):
        return_to = ""  # never echoed into the Cancel link unless it is a path on this site
    form = {"amount": amount, "currency": currency, "return_to": return_to}
    errs: dict[str, str] = {}
    cents = 0
    try:
        cents = parse_money_cents(amount)
    except NumberError as e:
        # a figure past any amount at all: the invoice's own limit is the useful answer
        errs["amount"] = _(payments.LARGEST) if e.code == "number.too_large" else number_message(e)
    if not errs:
        try:
            inv = payments.create_topup(
                session,
                user_id=user.id,  # type: ignore[arg-type]
                amount_cents=cents,
                currency=currency,
                now=now,
                return_to=return_to or None,
                provider=request.app.state.payment_provider,
            )
        except errors.InvalidInput as e:
            errs = {k: _(v) for k, v in e.errors.items()}
        else:
            return RedirectResponse(f"/topups/{inv.id}", status_code=303)
    return render(
        request,
        "payments/new.html",
        {"form": form, "errors": errs, "currencies": currency_options()},
        status_code=422,
        headers=NO_STORE,
    )


@router.get("/topups/{invoice_id}", response_class=HTMLResponse)
def invoice_page(
    request: Request, invoice_id: int, session: SessionDep, user: CurrentUser, now: NowDep
) -> Response:
    inv = payments.invoice_visible_to(session, user, invoice_id)
    ctx = invoice_view(inv, now)
    ctx.update({"sim_actions": SIM_ACTIONS})
    if ctx["payable"]:
        ctx["qr"] = qr_svg(ctx["remaining_uri"])
    if user.is_staff:
        ctx["chain"], ctx["deliveries"] = payments.provider_log(session, inv)
    return render(request, "payments/invoice.html", ctx, headers=NO_STORE)


@router.get("/topups/{invoice_id}/status", response_class=HTMLResponse)
def invoice_status(
    request: Request, invoice_id: int, session: SessionDep, user: CurrentUser, now: NowDep
) -> Response:
    inv = payments.invoice_visible_to(session, user, invoice_id)
    seen = request.query_params.get("seen")
    if is_htmx(request) and seen and seen != f"{inv.status}-{inv.received_units}":
        # A payment arrived or the rate lock ended since the page was drawn: what to send
        # (the rest, or nothing) changed, so the whole page is drawn again.
        return Response(status_code=200, headers={"HX-Refresh": "true", **NO_STORE})
    return render(request, "payments/_status.html", invoice_view(inv, now), headers=NO_STORE)


def _deliver(engine: Any, body: bytes, secret: str, now: Any) -> dict[str, Any]:
    """One notification, signed like the provider signs it, through the webhook code path,
    in its own transaction (as a separate HTTP delivery would be)."""
    with transaction(engine) as s:
        return payments.handle_webhook(s, body, payments.sign(body, secret), secret=secret, now=now)


@router.post("/topups/{invoice_id}/simulate")
def simulate(
    request: Request,
    invoice_id: int,
    session: SessionDep,
    user: CurrentUser,
    now: NowDep,
    action: Annotated[str, Form()] = "",
) -> Response:
    settings = request.app.state.settings
    if not settings.simulation:
        raise errors.NotFound()
    inv = payments.invoice_visible_to(session, user, invoice_id)
    if inv.user_id != user.id and not user.is_ops:
        # Paying another customer's invoice credits their balance: operations only, audited.
        raise errors.Forbidden(N_("Only operations staff can do this."))
    if action not in dict(SIM_ACTIONS):
        raise errors.InvalidInput(N_("Unknown simulation action."), field="action")
    if inv.user_id != user.id:
        audit.record(
            session,
            "topup.simulated",
            now,
            actor=user,
            target=f"invoice:{inv.id}",
            ip=audit.client_ip(request),
            customer=inv.user_id,
            simulated_action=action,
        )
    engine, secret = request.app.state.engine, settings.webhook_secret
    # Release this request's transaction: each notification is its own unit of work.
    session.commit()
    events = simulate_provider(engine, inv.id, action, now)  # type: ignore[arg-type]
    for body in events:
        _deliver(engine, body, secret, now)
    flash(request, _("Simulated: {action}.").format(action=_(dict(SIM_ACTIONS)[action])), "info")
    headers = {"HX-Redirect": f"/topups/{invoice_id}"} if is_htmx(request) else None
    if headers:
        return Response(status_code=204, headers=headers)
    return RedirectResponse(f"/topups/{invoice_id}", status_code=303)


def simulate_provider(engine: Any, invoice_id: int, action: str, now: Any) -> list[bytes]:
    """The simulated provider: change its own state, return the notifications it sends."""
    with transaction(engine) as s:
        inv = s.get(Invoice, invoice_id)
        assert inv is not None
        due, received = int(inv.due_units), int(inv.received_units)
        inv.expires_at, inv.monitoring_until = utc(inv.expires_at), utc(inv.monitoring_until)
        bodies: list[bytes] = []

        def ev(etype: str) -> None:
            bodies.append(payments.event_body(inv, etype, now))

        def pay(units: int, confirmed: bool = True) -> None:
            payments.record_chain_payment(s, inv, max(1, units), now=now, confirmed=confirmed)
            ev("InvoiceReceivedPayment")
            if confirmed:
                ev("InvoicePaymentSettled")
                ev("InvoiceSettled")
            else:
                ev("InvoiceProcessing")

        if action == "pay_full":
            pay(due - received)
        elif action == "pay_part":
            pay(max(1, due * 2 // 5))
        elif action == "overpay":
            pay(due + due // 4 - received)
        elif action == "pay_unconfirmed":
            pay(due - received, confirmed=False)
        elif action == "confirm":
            payments.confirm_chain_payments(s, inv)
            ev("InvoicePaymentSettled")
            ev("InvoiceSettled")
        elif action in ("pay_late", "expire", "close_window", "pay_after_window"):
            # Simulated time passes for this invoice only: its whole timeline (deadlines and
            # the payments already seen) moves into the past, as if we had waited.
            deadline = inv.expires_at if action in ("pay_late", "expire") else inv.monitoring_until
            if deadline > now:
                shift = deadline - now + timedelta(seconds=1)
                inv.created_at = utc(inv.created_at) - shift
                inv.expires_at -= shift
                inv.monitoring_until -= shift
                for cp in s.exec(
                    select(ChainPayment).where(ChainPayment.invoice_id == inv.id)
                ).all():
                    cp.seen_at = utc(cp.seen_at) - shift
                    s.add(cp)
            s.add(inv)
            s.flush()
            if action == "pay_late":
                pay(due - received)
            elif action == "pay_after_window":
                pay(due)
                bodies.append(payments.event_body(inv, "InvoiceInvalid", now))
            else:
                ev("InvoiceExpired")
        elif action == "redeliver":
            last = s.exec(
                select(WebhookDelivery)
                .where(WebhookDelivery.provider_invoice_id == inv.provider_id)
                .order_by(col(WebhookDelivery.id).desc())
            ).first()
            etype = last.event_type if last else "InvoiceSettled"
            first = payments.event_body(inv, etype, now)
            bodies += [first, first]  # the very same delivery, twice
        elif action == "out_of_order":
            if received < due:
                payments.record_chain_payment(s, inv, due - received, now=now, confirmed=True)
            ev("InvoiceSettled")
            ev("InvoicePaymentSettled")
            ev("InvoiceReceivedPayment")
        return bodies


@router.post("/payments/webhook")
async def webhook(request: Request) -> Response:
    """The provider's notifications: HMAC-SHA256 over the raw body, constant-time compare."""
    body = await request.body()
    if len(body) > MAX_WEBHOOK_BYTES:
        money_log.warning("webhook rejected: body of %d bytes is too large", len(body))
        return JSONResponse({"error": {"code": "too_large", "message": "body too large"}}, 413)
    signature = request.headers.get("btcpay-sig")
    settings = request.app.state.settings
    now = request.app.state.clock.now()

    def work() -> dict[str, Any]:
        with transaction(request.app.state.engine) as s:
            return payments.handle_webhook(
                s,
                body,
                signature,
                secret=settings.webhook_secret,
                now=now,
                provider=request.app.state.payment_provider,
            )

    try:
        result = await run_in_threadpool(work)
    except errors.DomainError as e:
        money_log.warning(
            "webhook rejected: %s %s (%s)", e.status_code, e.code, e.render_message(lambda t: t)
        )
        return JSONResponse(
            {"error": {"code": e.code, "message": e.render_message(lambda t: t)}}, e.status_code
        )
    money_log.info("webhook accepted: %s", result)
    return JSONResponse(result)
