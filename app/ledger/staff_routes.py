"""Staff: the journal, any customer's balance and statement, manual adjustments (ops)."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import select

from app import errors
from app.accounts.audit import client_ip
from app.accounts.deps import OpsUser, StaffUser
from app.accounts.models import User
from app.errors import N_
from app.ledger import service as ledger
from app.ledger.routes import coin, statement_context
from app.numbers import NumberError, parse_int, parse_money_cents
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.numbers import number_message
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)
PAGE = 50


@router.get("/ledger", response_class=HTMLResponse)
def journal_page(
    request: Request, session: SessionDep, user: StaffUser, page: int = 1, email: str = ""
) -> Response:
    if email.strip():
        found = session.exec(select(User).where(User.email == email.strip().lower())).first()
        if found is not None:
            return RedirectResponse(
                request.app.url_path_for("customer_page", customer_id=found.id), status_code=303
            )
        flash(request, _("No customer with that email."), "error")
    page = max(1, page)
    total = ledger.journal_count(session)
    return render(
        request,
        "ledger/staff_journal.html",
        {
            "rows": ledger.journal(session, PAGE, (page - 1) * PAGE),
            "page": page,
            "has_next": page * PAGE < total,
            "total": total,
            "email": email,
            "coin": coin,
        },
    )


def _customer_page(
    request: Request,
    session: SessionDep,
    customer_id: int,
    page: int,
    form: dict[str, Any],
    errs: dict[str, str],
    status_code: int = 200,
) -> Response:
    customer = session.get(User, customer_id)
    if customer is None:
        raise errors.NotFound(N_("No such customer."))
    ctx = statement_context(session, customer_id, page)
    ctx.update(
        {
            "customer": customer,
            "form": form,
            "errors": errs,
            "order_base": "/staff/ops/orders/",
            "declined": ledger.declined_attempts(session, customer_id),
        }
    )
    return render(request, "ledger/staff_customer.html", ctx, status_code=status_code)


@router.get("/ledger/customers/{customer_id}", response_class=HTMLResponse)
def customer_page(
    request: Request, customer_id: int, session: SessionDep, user: StaffUser, page: int = 1
) -> Response:
    form = {"amount": "", "reason": "", "corrects": "", "key": secrets.token_urlsafe(16)}
    return _customer_page(request, session, customer_id, page, form, {})


@router.post("/ledger/customers/{customer_id}/adjust", response_class=HTMLResponse)
def adjust(
    request: Request,
    customer_id: int,
    session: SessionDep,
    user: OpsUser,
    now: NowDep,
    amount: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
    key: Annotated[str, Form()] = "",
    corrects: Annotated[str, Form()] = "",
) -> Response:
    form = {
        "amount": amount,
        "reason": reason,
        "corrects": corrects,
        "key": key or secrets.token_urlsafe(16),
    }
    errs: dict[str, str] = {}
    cents = 0
    text = amount.strip()
    sign = -1 if text.startswith("-") else 1
    try:
        cents = sign * parse_money_cents(
            text[1:] if text[:1] in "+-" and text else text, max_cents=ledger.MAX_CENTS
        )
        if cents == 0:
            errs["amount"] = _("Enter a non-zero amount: positive credits, negative debits.")
    except NumberError as e:
        errs["amount"] = number_message(e)
    if not reason.strip():
        errs["reason"] = _("A reason is required.")
    corrects_id: int | None = None
    if corrects.strip():
        try:
            corrects_id = parse_int(corrects.strip().lstrip("#"), max_value=2**62)
        except ValueError:
            errs["corrects_entry_id"] = _("Enter an entry number, like 42.")
    if session.get(User, customer_id) is None:
        raise errors.NotFound(N_("No such customer."))
    if not errs:
        try:
            ledger.adjust(
                session,
                user_id=customer_id,
                amount_cents=cents,
                reason=reason,
                actor=user,
                now=now,
                idempotency_key=f"adjust:{form['key']}",
                ip=client_ip(request),
                corrects_entry_id=corrects_id,
            )
        except ledger.InsufficientBalance as e:
            errs["amount"] = e.render_message(_)
        except errors.InvalidInput as e:
            errs = {
                k: e.render_message(_) if v == e.message else _(v) for k, v in e.errors.items()
            } or {"amount": e.render_message(_)}
        else:
            flash(request, _("Adjustment recorded."), "success")
            return RedirectResponse(
                request.app.url_path_for("customer_page", customer_id=customer_id), status_code=303
            )
    if errs:
        session.rollback()
    return _customer_page(request, session, customer_id, 1, form, errs, status_code=422)
