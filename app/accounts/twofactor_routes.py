"""Two-factor sign-in pages: ``/account/2fa`` (turn on/off, recovery codes) and
``/login/2fa`` (the second step of a sign-in). Every form works without JavaScript."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from app.accounts import login, service, twofactor
from app.accounts.audit import client_ip
from app.accounts.deps import CurrentUser
from app.accounts.models import User
from app.clock import wall_now
from app.errors import DomainError
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.routes import safe_next
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute, include_in_schema=False)

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
PENDING_COOKIE = "login_2fa"
PENDING_MAX_AGE = 300  # seconds between the password and the code
CodeField = Annotated[str, Form(max_length=64)]


def _serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.settings.secret_key, salt="login-2fa")


def _password_tag(user: User) -> str:
    # A password change (or reset) between the two steps voids the pending sign-in.
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def _errors(exc: DomainError) -> dict[str, str]:
    errs: dict[str, str] = dict(getattr(exc, "errors", None) or {}) or {"form": exc.message}
    return {k: _(v).format(**exc.params) if exc.params else _(v) for k, v in errs.items()}


def second_step(request: Request, user: User, target: str) -> Response:
    """After a correct password for an account with two-factor on: no session yet, a short
    signed cookie naming the user, and the code form."""
    token = _serializer(request).dumps({"u": user.id, "p": _password_tag(user)})
    response = RedirectResponse(f"/login/2fa?next={target}", status_code=303)
    response.set_cookie(
        PENDING_COOKIE,
        token,
        max_age=PENDING_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=request.app.state.settings.environment == "production",
        path="/login",
    )
    return response


def _pending_user(request: Request, db: Any) -> User | None:
    raw = request.cookies.get(PENDING_COOKIE)
    if not raw:
        return None
    try:
        data = _serializer(request).loads(raw, max_age=PENDING_MAX_AGE)
    except BadSignature:
        return None
    user = db.get(User, int(data.get("u", 0)))
    if user is None or not user.is_active or data.get("p") != _password_tag(user):
        return None
    return user  # type: ignore[no-any-return]


@router.get("/login/2fa", response_class=HTMLResponse)
def login_code_page(
    request: Request, db: SessionDep, next: Annotated[str | None, Query(max_length=2000)] = None
) -> Response:
    target = safe_next(next, "/account")
    if _pending_user(request, db) is None:
        flash(request, _("Your sign-in expired. Enter your email and password again."), "info")
        return RedirectResponse(f"/login?next={target}", status_code=303)
    return render(
        request, "accounts/login_2fa.html", {"next": target, "errors": {}}, headers=NO_STORE
    )


@router.post("/login/2fa", response_class=HTMLResponse)
def login_code_submit(
    request: Request,
    db: SessionDep,
    now: NowDep,
    code: CodeField = "",
    next: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    target = safe_next(next, "/account")
    user = _pending_user(request, db)
    if user is None:
        flash(request, _("Your sign-in expired. Enter your email and password again."), "info")
        return RedirectResponse(f"/login?next={target}", status_code=303)
    try:
        how = twofactor.check(db, user, code, now=now, wall=wall_now())
    except DomainError as e:
        ctx = {"next": target, "errors": _errors(e)}
        status = e.status_code if e.status_code in (422, 429) else 422
        return render(request, "accounts/login_2fa.html", ctx, status_code=status, headers=NO_STORE)
    service.audit(
        db,
        f"login.second_factor.{how}",
        now,
        actor=user,
        target=f"user:{user.id}",
        ip=client_ip(request),
    )
    response = RedirectResponse(target, status_code=303)
    response.delete_cookie(PENDING_COOKIE, path="/login")
    login.start_session(request, response, db, user)
    if how == "recovery":
        left = twofactor.remaining_recovery_codes(db, user)
        flash(request, _("Signed in with a recovery code. Codes left: {n}.").format(n=left), "info")
    return response


def _page(request: Request, db: Any, user: User, *, status_code: int = 200, **ctx: Any) -> Response:
    context: dict[str, Any] = {"errors": {}, "codes": None, "qr": None, "secret": None}
    if twofactor.enabled(user):
        context["remaining"] = twofactor.remaining_recovery_codes(db, user)
    elif user.totp_pending_secret:
        uri = twofactor.provisioning_uri(user.totp_pending_secret, user.email)
        context["qr"] = twofactor.qr_svg(uri)
        secret = user.totp_pending_secret
        context["secret"] = " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))
    context["required"] = twofactor.required(user, request.app.state.settings.environment)
    context.update(ctx)
    return render(
        request, "accounts/twofactor.html", context, status_code=status_code, headers=NO_STORE
    )


@router.get("/account/2fa", response_class=HTMLResponse)
def twofactor_page(request: Request, db: SessionDep, user: CurrentUser) -> Response:
    return _page(request, db, user)


@router.post("/account/2fa/start")
def twofactor_start(request: Request, db: SessionDep, user: CurrentUser) -> Response:
    if not twofactor.enabled(user):
        twofactor.start_enrolment(db, user)
    return RedirectResponse("/account/2fa", status_code=303)


@router.post("/account/2fa/confirm", response_class=HTMLResponse)
def twofactor_confirm(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, code: CodeField = ""
) -> Response:
    if twofactor.enabled(user):
        return RedirectResponse("/account/2fa", status_code=303)
    try:
        codes = twofactor.confirm_enrolment(db, user, code, now=now, wall=wall_now())
    except DomainError as e:
        return _page(request, db, user, status_code=422, errors=_errors(e))
    service.audit(
        db, "account.2fa.enabled", now, actor=user, target=f"user:{user.id}", ip=client_ip(request)
    )
    return _page(request, db, user, codes=codes, just_enabled=True)


@router.post("/account/2fa/recovery-codes", response_class=HTMLResponse)
def twofactor_new_codes(
    request: Request, db: SessionDep, user: CurrentUser, now: NowDep, code: CodeField = ""
) -> Response:
    if not twofactor.enabled(user):
        return RedirectResponse("/account/2fa", status_code=303)
    try:
        codes = twofactor.regenerate_recovery_codes(db, user, code, now=now, wall=wall_now())
    except DomainError as e:
        status = e.status_code if e.status_code in (422, 429) else 422
        return _page(request, db, user, status_code=status, errors=_errors(e))
    service.audit(
        db, "account.2fa.codes", now, actor=user, target=f"user:{user.id}", ip=client_ip(request)
    )
    return _page(request, db, user, codes=codes)


@router.post("/account/2fa/disable", response_class=HTMLResponse)
def twofactor_disable(
    request: Request,
    db: SessionDep,
    user: CurrentUser,
    now: NowDep,
    password: Annotated[str, Form(max_length=1024)] = "",
    code: CodeField = "",
) -> Response:
    if not twofactor.enabled(user):
        return RedirectResponse("/account/2fa", status_code=303)
    if twofactor.required(user, request.app.state.settings.environment):
        flash(request, _("Staff accounts must keep two-factor sign-in on."), "error")
        return RedirectResponse("/account/2fa", status_code=303)
    try:
        twofactor.disable(db, user, password=password, code=code, now=now, wall=wall_now())
    except DomainError as e:
        status = e.status_code if e.status_code in (422, 429) else 422
        return _page(request, db, user, status_code=status, errors=_errors(e))
    service.audit(
        db, "account.2fa.disabled", now, actor=user, target=f"user:{user.id}", ip=client_ip(request)
    )
    flash(request, _("Two-factor sign-in is off."), "success")
    return RedirectResponse("/account/2fa", status_code=303)
