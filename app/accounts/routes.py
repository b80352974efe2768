"""Login, sign-up, logout, the account page (password, email, sessions, SSH keys, API
tokens) and password reset. Every form works without JavaScript; POST success → 303."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import login, service, twofactor, twofactor_routes
from app.accounts.audit import client_ip
from app.accounts.deps import CurrentUser, OptionalUser
from app.accounts.models import User
from app.accounts.sshkeys import looks_private
from app.errors import DomainError, InvalidInput
from app.web.deps import NowDep, SessionDep, SettingsDep
from app.web.flash import flash
from app.web.forms import FormModel
from app.web.i18n import gettext as _
from app.web.routes import safe_next
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
FormStr = Annotated[str, Form()]


def _errors(exc: DomainError) -> dict[str, str]:
    errs: dict[str, str] = dict(getattr(exc, "errors", None) or {})
    if not errs:
        errs["form"] = exc.message
    # Messages are msgids with optional {params}: translate and fill them here.
    return {k: _(v).format(**exc.params) if exc.params else _(v) for k, v in errs.items()}


def _status(exc: DomainError) -> int:
    return exc.status_code if exc.status_code in (403, 422, 429) else 422


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


# --- Login / sign-up / logout ---------------------------------------------------------


class EntryForm(FormModel):
    """The login and sign-up forms (the same three fields)."""

    email: str = ""
    password: str = ""
    next: str = ""


def _entry_page(request: Request, user: User | None, template: str, target: str) -> Response:
    """The login or sign-up form; someone signed in already goes straight to ``target``."""
    if user is not None:
        return _redirect(target)
    return render(request, template, {"next": target, "errors": {}, "email": ""})


def _entry_refused(
    request: Request, template: str, target: str, email: str, exc: DomainError
) -> Response:
    """The login or sign-up form again with why it was refused (the password not echoed)."""
    ctx = {"next": target, "errors": _errors(exc), "email": email[:254]}
    return render(request, template, ctx, status_code=_status(exc), headers=NO_STORE)


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request, user: OptionalUser, next: Annotated[str | None, Query()] = None
) -> Response:
    # signed in: straight to the orders
    return _entry_page(request, user, "accounts/login.html", safe_next(next, "/console"))


@router.post("/login", response_class=HTMLResponse)
def login_submit(
    request: Request, db: SessionDep, now: NowDep, form: Annotated[EntryForm, Form()]
) -> Response:
    target = safe_next(form.next, "/console")
    try:
        user = service.authenticate(
            db, email=form.email, password=form.password, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _entry_refused(request, "accounts/login.html", target, form.email, e)
    if twofactor.enabled(user):
        return twofactor_routes.second_step(request, db, user, target)
    response = _redirect(target)
    login.start_session(request, response, db, user)
    return response


@router.get("/signup", response_class=HTMLResponse)
def signup_page(
    request: Request, user: OptionalUser, next: Annotated[str | None, Query()] = None
) -> Response:
    return _entry_page(request, user, "accounts/signup.html", safe_next(next, "/account"))


@router.post("/signup", response_class=HTMLResponse)
def signup_submit(
    request: Request, db: SessionDep, now: NowDep, form: Annotated[EntryForm, Form()]
) -> Response:
    target = safe_next(form.next, "/account")
    try:
        user = service.register(
            db, email=form.email, password=form.password, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return _entry_refused(request, "accounts/signup.html", target, form.email, e)
    response = _redirect(target)
    login.start_session(request, response, db, user)
    flash(request, _("Welcome! Your account is ready."), "success")
    return response


@router.post("/logout")
def logout(request: Request, db: SessionDep) -> Response:
    response = _redirect("/")
    login.end_session(request, response, db)
    flash(request, _("You are logged out."), "info")
    return response


# --- The account page -------------------------------------------------------------------


def _account_page(
    request: Request,
    db: Any,
    user: User,
    now: Any,
    *,
    status_code: int = 200,
    **ctx: Any,
) -> Response:
    assert user.id is not None
    context: dict[str, Any] = {
        "keys": service.ssh_keys_for(db, user.id),
        "sessions": service.active_sessions(db, user.id, now),
        "current_session_id": getattr(request.state, "session_row_id", None),
        "tokens": service.api_tokens_for(db, user.id),
        "errors": {},
        "form": {},
        "new_token": None,
    }
    context.update(ctx)
    return render(
        request, "accounts/account.html", context, status_code=status_code, headers=NO_STORE
    )


def _account_refused(
    request: Request, db: Any, user: User, now: Any, exc: DomainError, **ctx: Any
) -> Response:
    """The account page again with why a form was refused next to it."""
    return _account_page(
        request, db, user, now, status_code=_status(exc), errors=_errors(exc), **ctx
    )


@router.get("/account", response_class=HTMLResponse)
def account(request: Request, db: SessionDep, user: CurrentUser, now: NowDep) -> Response:
    return _account_page(request, db, user, now)


@router.post("/account/password", response_class=HTMLResponse)
def account_password(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    current_password: FormStr = "",
    new_password: FormStr = "",
) -> Response:
    try:
        n = service.change_password(
            db,
            user,
            current_password=current_password,
            new_password=new_password,
            now=now,
            keep_session_id=getattr(request.state, "session_row_id", None),
            ip=client_ip(request),
        )
    except DomainError as e:
        return _account_refused(request, db, user, now, e)
    flash(request, _("Password changed. Other sessions signed out: {n}.").format(n=n), "success")
    return _redirect("/account")


@router.post("/account/email", response_class=HTMLResponse)
def account_email(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    new_email: FormStr = "",
    email_password: FormStr = "",
) -> Response:
    try:
        service.change_email(
            db, user, new_email=new_email, password=email_password, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        form = {"new_email": new_email[:254]}
        return _account_refused(request, db, user, now, e, form=form)
    flash(request, _("Email changed. Use the new address to log in."), "success")
    return _redirect("/account")


@router.post("/account/billing", response_class=HTMLResponse)
def account_billing(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    company: Annotated[str, Form(max_length=2000)] = "",
    billing_address: Annotated[str, Form(max_length=4000)] = "",
    tax_id: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    try:
        service.update_billing(
            db,
            user,
            company=company,
            billing_address=billing_address,
            tax_id=tax_id,
            now=now,
            ip=client_ip(request),
        )
    except DomainError as e:
        form = {"company": company, "billing_address": billing_address, "tax_id": tax_id}
        return _account_refused(request, db, user, now, e, billing_form=form)
    flash(request, _("Billing details saved. New receipts will show them."), "success")
    return _redirect("/account#billing")


@router.post("/account/sessions/revoke-others")
def account_revoke_others(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep
) -> Response:
    n = service.revoke_other_sessions(
        db, user, getattr(request.state, "session_row_id", None), now, ip=client_ip(request)
    )
    flash(request, _("Other sessions signed out: {n}.").format(n=n), "success")
    return _redirect("/account#sessions")


@router.post("/account/sessions/{session_id}/revoke")
def account_revoke_session(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, session_id: int
) -> Response:
    row = service.revoke_session_of(db, user, session_id, now, ip=client_ip(request))
    if row.id == getattr(request.state, "session_row_id", None):
        response = _redirect("/login")
        login.end_session(request, response, db)
        return response
    flash(request, _("Session signed out."), "success")
    return _redirect("/account#sessions")


@router.post("/account/ssh-keys", response_class=HTMLResponse)
def account_add_key(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    name: FormStr = "",
    public_key: FormStr = "",
    next: FormStr = "",
) -> Response:
    try:
        key = service.add_ssh_key(db, user, name, public_key, now, ip=client_ip(request))
    except DomainError as e:
        # Never echo a pasted private key back into the page.
        kept = "" if looks_private(public_key) else public_key[:16384]
        form = {"key_name": name[:80], "public_key": kept}
        return _account_refused(request, db, user, now, e, form=form)
    flash(request, _("Key “{name}” saved.").format(name=key.name), "success")
    return _redirect(safe_next(next, "/account#ssh-keys"))


@router.post("/account/ssh-keys/{key_id}/rename", response_class=HTMLResponse)
def account_rename_key(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    key_id: int,
    name: FormStr = "",
) -> Response:
    try:
        service.rename_ssh_key(db, user, key_id, name, now)
    except InvalidInput as e:
        return _account_page(
            request, db, user, now, status_code=422, errors={f"rename-{key_id}": _errors(e)["name"]}
        )
    flash(request, _("Key renamed."), "success")
    return _redirect("/account#ssh-keys")


@router.post("/account/ssh-keys/{key_id}/delete")
def account_delete_key(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, key_id: int
) -> Response:
    service.delete_ssh_key(db, user, key_id, now, ip=client_ip(request))
    flash(request, _("Key deleted."), "success")
    return _redirect("/account#ssh-keys")


@router.post("/account/api-tokens", response_class=HTMLResponse)
def account_new_token(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, token_name: FormStr = ""
) -> Response:
    try:
        new = service.new_api_token(db, user, token_name, now, ip=client_ip(request))
    except DomainError as e:
        form = {"token_name": token_name[:80]}
        return _account_refused(request, db, user, now, e, form=form)
    # Shown once, in this response only (not via a redirect/cookie), never cached.
    return _account_page(request, db, user, now, status_code=201, new_token=new)


@router.post("/account/api-tokens/{token_id}/revoke")
def account_revoke_token(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, token_id: int
) -> Response:
    service.revoke_api_token(db, user, token_id, now, ip=client_ip(request))
    flash(request, _("Token revoked. Programs using it can no longer sign in."), "success")
    return _redirect("/account#api-tokens")


# --- Password reset -------------------------------------------------------------------------


@router.get("/password/forgot", response_class=HTMLResponse)
def forgot_page(request: Request) -> Response:
    return render(request, "accounts/forgot.html", {"errors": {}, "email": "", "sent": False})


@router.post("/password/forgot", response_class=HTMLResponse)
def forgot_submit(
    request: Request, db: SessionDep, now: NowDep, settings: SettingsDep, email: FormStr = ""
) -> Response:
    try:
        service.request_password_reset(
            db, email=email, base_url=settings.base_url, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        return render(
            request,
            "accounts/forgot.html",
            {"errors": _errors(e), "email": email[:254], "sent": False},
            status_code=_status(e),
        )
    return render(
        request, "accounts/forgot.html", {"errors": {}, "email": "", "sent": True}, headers=NO_STORE
    )


@router.get("/password/reset/{token}", response_class=HTMLResponse)
def reset_page(request: Request, db: SessionDep, now: NowDep, token: str) -> Response:
    valid = service.reset_token_row(db, token, now) is not None
    return render(
        request,
        "accounts/reset.html",
        {"token": token, "valid": valid, "errors": {}},
        status_code=200 if valid else 404,
        headers=NO_STORE,
    )


@router.post("/password/reset/{token}", response_class=HTMLResponse)
def reset_submit(
    request: Request, db: SessionDep, now: NowDep, token: str, password: FormStr = ""
) -> Response:
    try:
        service.reset_password(
            db, token=token, new_password=password, now=now, ip=client_ip(request)
        )
    except service.InvalidLink:
        return render(
            request,
            "accounts/reset.html",
            {"token": "", "valid": False, "errors": {}},
            status_code=404,
            headers=NO_STORE,
        )
    except DomainError as e:
        return render(
            request,
            "accounts/reset.html",
            {"token": token, "valid": True, "errors": _errors(e)},
            status_code=_status(e),
            headers=NO_STORE,
        )
    response = _redirect("/login")
    login.end_session(request, response, db)
    flash(
        request,
        _(
            "Your password is changed and every session was signed out. Log in with the new password."
        ),
        "success",
    )
    return response
