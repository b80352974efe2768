"""Login, sign-up, logout, the account page (password, email, sessions, SSH keys, API
tokens) and password reset. Every form works without JavaScript; POST success → 303."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import Field
from sqlmodel import Session

from app.accounts import login, service, twofactor, twofactor_routes
from app.accounts.audit import client_ip
from app.accounts.deps import Call, OptionalUser, UserCall
from app.accounts.models import User
from app.accounts.sshkeys import looks_private
from app.errors import N_, DomainError, InvalidInput
from app.web.deps import NowDep, SessionDep, SettingsDep
from app.web.flash import flash
from app.web.forms import FormModel, shown_errors
from app.web.i18n import gettext as _
from app.web.routes import safe_next
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
FormStr = Annotated[str, Form()]


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


@dataclass(frozen=True)
class Entry:
    """The login or the sign-up form: its template, where it leads unless ``next`` says
    otherwise, the service that checks the email and password (and returns the user), and
    what to say on arrival."""

    template: str
    default_next: str
    check: Callable[..., User]
    welcome: str = ""


LOGIN = Entry("accounts/login.html", "/console", service.authenticate)  # to the orders
SIGNUP = Entry(
    "accounts/signup.html",
    "/account",
    service.register,
    welcome=N_("Welcome! Your account is ready."),
)


def _entry_page(request: Request, user: User | None, entry: Entry, next: str | None) -> Response:
    """The login or sign-up form; someone signed in already goes straight on."""
    target = safe_next(next, entry.default_next)
    if user is not None:
        return _redirect(target)
    return render(request, entry.template, {"next": target, "errors": {}, "email": ""})


def _entry_submit(
    request: Request, db: Session, now: datetime, form: EntryForm, entry: Entry
) -> Response:
    """Signed in (after the second step when the account has one), or the form again with
    why it was refused (the password not echoed)."""
    target = safe_next(form.next, entry.default_next)
    try:
        user = entry.check(
            db, email=form.email, password=form.password, now=now, ip=client_ip(request)
        )
    except DomainError as e:
        ctx = {"next": target, "errors": shown_errors(e), "email": form.email[:254]}
        return render(request, entry.template, ctx, status_code=_status(e), headers=NO_STORE)
    if twofactor.enabled(user):
        return twofactor_routes.second_step(request, db, user, target)
    response = _redirect(target)
    login.start_session(request, response, db, user)
    if entry.welcome:
        flash(request, _(entry.welcome), "success")
    return response


NextQuery = Annotated[str | None, Query()]
EntryFormDep = Annotated[EntryForm, Form()]


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, user: OptionalUser, next: NextQuery = None) -> Response:
    return _entry_page(request, user, LOGIN, next)


@router.post("/login", response_class=HTMLResponse)
def login_submit(request: Request, db: SessionDep, now: NowDep, form: EntryFormDep) -> Response:
    return _entry_submit(request, db, now, form, LOGIN)


@router.get("/signup", response_class=HTMLResponse)
def signup_page(request: Request, user: OptionalUser, next: NextQuery = None) -> Response:
    return _entry_page(request, user, SIGNUP, next)


@router.post("/signup", response_class=HTMLResponse)
def signup_submit(request: Request, db: SessionDep, now: NowDep, form: EntryFormDep) -> Response:
    return _entry_submit(request, db, now, form, SIGNUP)


@router.post("/logout")
def logout(request: Request, db: SessionDep) -> Response:
    response = _redirect("/")
    login.end_session(request, response, db)
    flash(request, _("You are logged out."), "info")
    return response


# --- The account page -------------------------------------------------------------------


def _account_page(a: Call, *, status_code: int = 200, **ctx: Any) -> Response:
    assert a.user.id is not None
    context: dict[str, Any] = {
        "keys": service.ssh_keys_for(a.db, a.user.id),
        "sessions": service.active_sessions(a.db, a.user.id, a.now),
        "current_session_id": a.session_id,
        "tokens": service.api_tokens_for(a.db, a.user.id),
        "errors": {},
        "form": {},
        "new_token": None,
    }
    context.update(ctx)
    return render(
        a.request, "accounts/account.html", context, status_code=status_code, headers=NO_STORE
    )


def _account_refused(a: Call, exc: DomainError, **ctx: Any) -> Response:
    """The account page again with why a form was refused next to it."""
    return _account_page(a, status_code=_status(exc), errors=shown_errors(exc), **ctx)


def _done(a: Call, message: str, url: str) -> Response:
    """After a change went through: say so on the next page, and go there."""
    flash(a.request, message, "success")
    return _redirect(url)


@router.get("/account", response_class=HTMLResponse)
def account(a: UserCall) -> Response:
    return _account_page(a)


@router.post("/account/password", response_class=HTMLResponse)
def account_password(
    a: UserCall, current_password: FormStr = "", new_password: FormStr = ""
) -> Response:
    try:
        n = service.change_password(
            a.db,
            a.user,
            current_password=current_password,
            new_password=new_password,
            now=a.now,
            keep_session_id=a.session_id,
            ip=a.ip,
        )
    except DomainError as e:
        return _account_refused(a, e)
    return _done(a, _("Password changed. Other sessions signed out: {n}.").format(n=n), "/account")


@router.post("/account/email", response_class=HTMLResponse)
def account_email(a: UserCall, new_email: FormStr = "", email_password: FormStr = "") -> Response:
    try:
        service.change_email(
            a.db, a.user, new_email=new_email, password=email_password, now=a.now, ip=a.ip
        )
    except DomainError as e:
        return _account_refused(a, e, form={"new_email": new_email[:254]})
    return _done(a, _("Email changed. Use the new address to log in."), "/account")


class BillingForm(FormModel):
    """The billing details shown on new receipts."""

    company: str = Field("", max_length=2000)
    billing_address: str = Field("", max_length=4000)
    tax_id: str = Field("", max_length=2000)


@router.post("/account/billing", response_class=HTMLResponse)
def account_billing(a: UserCall, form: Annotated[BillingForm, Form()]) -> Response:
    try:
        service.update_billing(a.db, a.user, **form.values(), now=a.now, ip=a.ip)
    except DomainError as e:
        return _account_refused(a, e, billing_form=form.values())
    return _done(a, _("Billing details saved. New receipts will show them."), "/account#billing")


@router.post("/account/sessions/revoke-others")
def account_revoke_others(a: UserCall) -> Response:
    n = service.revoke_other_sessions(a.db, a.user, a.session_id, a.now, ip=a.ip)
    return _done(a, _("Other sessions signed out: {n}.").format(n=n), "/account#sessions")


@router.post("/account/sessions/{session_id}/revoke")
def account_revoke_session(a: UserCall, session_id: int) -> Response:
    row = service.revoke_session_of(a.db, a.user, session_id, a.now, ip=a.ip)
    if row.id == a.session_id:
        response = _redirect("/login")
        login.end_session(a.request, response, a.db)
        return response
    return _done(a, _("Session signed out."), "/account#sessions")


@router.post("/account/ssh-keys", response_class=HTMLResponse)
def account_add_key(
    a: UserCall, name: FormStr = "", public_key: FormStr = "", next: FormStr = ""
) -> Response:
    try:
        key = service.add_ssh_key(a.db, a.user, name, public_key, a.now, ip=a.ip)
    except DomainError as e:
        # Never echo a pasted private key back into the page.
        kept = "" if looks_private(public_key) else public_key[:16384]
        return _account_refused(a, e, form={"key_name": name[:80], "public_key": kept})
    message = _("Key “{name}” saved.").format(name=key.name)
    return _done(a, message, safe_next(next, "/account#ssh-keys"))


@router.post("/account/ssh-keys/{key_id}/rename", response_class=HTMLResponse)
def account_rename_key(a: UserCall, key_id: int, name: FormStr = "") -> Response:
    try:
        service.rename_ssh_key(a.db, a.user, key_id, name, a.now)
    except InvalidInput as e:
        errors = {f"rename-{key_id}": shown_errors(e)["name"]}
        return _account_page(a, status_code=422, errors=errors)
    return _done(a, _("Key renamed."), "/account#ssh-keys")


@router.post("/account/ssh-keys/{key_id}/delete")
def account_delete_key(a: UserCall, key_id: int) -> Response:
    service.delete_ssh_key(a.db, a.user, key_id, a.now, ip=a.ip)
    return _done(a, _("Key deleted."), "/account#ssh-keys")


@router.post("/account/api-tokens", response_class=HTMLResponse)
def account_new_token(a: UserCall, token_name: FormStr = "") -> Response:
    try:
        new = service.new_api_token(a.db, a.user, token_name, a.now, ip=a.ip)
    except DomainError as e:
        return _account_refused(a, e, form={"token_name": token_name[:80]})
    # Shown once, in this response only (not via a redirect/cookie), never cached.
    return _account_page(a, status_code=201, new_token=new)


@router.post("/account/api-tokens/{token_id}/revoke")
def account_revoke_token(a: UserCall, token_id: int) -> Response:
    service.revoke_api_token(a.db, a.user, token_id, a.now, ip=a.ip)
    message = _("Token revoked. Programs using it can no longer sign in.")
    return _done(a, message, "/account#api-tokens")


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
            {"errors": shown_errors(e), "email": email[:254], "sent": False},
            status_code=_status(e),
        )
    return render(
        request, "accounts/forgot.html", {"errors": {}, "email": "", "sent": True}, headers=NO_STORE
    )


def _reset_page(
    request: Request,
    token: str,
    valid: bool,
    status_code: int,
    errors: dict[str, str] | None = None,
) -> Response:
    """The new-password form of a reset link (``valid``), or why the link cannot be used."""
    ctx = {"token": token, "valid": valid, "errors": errors or {}}
    return render(request, "accounts/reset.html", ctx, status_code=status_code, headers=NO_STORE)


@router.get("/password/reset/{token}", response_class=HTMLResponse)
def reset_page(request: Request, db: SessionDep, now: NowDep, token: str) -> Response:
    valid = service.reset_token_row(db, token, now) is not None
    return _reset_page(request, token, valid, 200 if valid else 404)


@router.post("/password/reset/{token}", response_class=HTMLResponse)
def reset_submit(
    request: Request, db: SessionDep, now: NowDep, token: str, password: FormStr = ""
) -> Response:
    try:
        service.reset_password(
            db, token=token, new_password=password, now=now, ip=client_ip(request)
        )
    except service.InvalidLink:
        return _reset_page(request, "", False, 404)
    except DomainError as e:
        return _reset_page(request, token, True, _status(e), shown_errors(e))
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
