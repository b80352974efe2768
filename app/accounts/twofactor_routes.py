"""Two-factor sign-in pages: ``/account/2fa`` (turn on/off, recovery codes),
``/account/2fa/enrol/<token>`` (a staff account's one-time enrolment link) and
``/login/2fa`` (the second step of a sign-in). Every form works without JavaScript.

The pending sign-in cookie (between the password and the code) names the user, a tag of
their password hash and the newest session they had: a successful sign-in opens a newer
session, so the same cookie cannot open a second one. Turning two-factor on signs out
every other session and revokes every API token made before (the page says how many)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlmodel import func, select

from app.accounts import login, service, twofactor
from app.accounts.audit import client_ip
from app.accounts.deps import Call, UserCall
from app.accounts.models import User, UserSession
from app.clock import wall_now
from app.errors import N_, DomainError, Forbidden, NotFound
from app.web.deps import NowDep, SessionDep
from app.web.flash import flash
from app.web.forms import shown_errors
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


def _status(exc: DomainError) -> int:
    return exc.status_code if exc.status_code in (422, 429) else 422


def _newest_session(db: Any, user_id: int | None) -> int:
    return int(
        db.exec(select(func.max(UserSession.id)).where(UserSession.user_id == user_id)).one() or 0
    )


def second_step(request: Request, db: Any, user: User, target: str) -> Response:
    """After a correct password for an account with two-factor on: no session yet, a short
    signed cookie naming the user, and the code form."""
    data = {"u": user.id, "p": _password_tag(user), "n": _newest_session(db, user.id)}
    token = _serializer(request).dumps(data)
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


def _pending_user(request: Request, db: Any, *, lock: bool = False) -> User | None:
    raw = request.cookies.get(PENDING_COOKIE)
    if not raw:
        return None
    try:
        data = _serializer(request).loads(raw, max_age=PENDING_MAX_AGE)
    except BadSignature:
        return None
    # The user's row locked (PostgreSQL; SQLite's writers are serialised already): of
    # parallel submits with one cookie, the second sees the session the first opened.
    query = select(User).where(User.id == int(data.get("u", 0)))
    user = db.exec(query.with_for_update() if lock else query).first()
    if user is None or not user.is_active or data.get("p") != _password_tag(user):
        return None
    if _newest_session(db, user.id) != data.get("n"):
        return None  # spent: a sign-in (this cookie's, or another) opened a session since
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
    user = _pending_user(request, db, lock=True)
    if user is None:
        flash(request, _("Your sign-in expired. Enter your email and password again."), "info")
        return RedirectResponse(f"/login?next={target}", status_code=303)
    try:
        how = twofactor.check(db, user, code, now=now, wall=wall_now())
    except DomainError as e:
        ctx = {"next": target, "errors": shown_errors(e)}
        status = _status(e)
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


def _page(a: Call, *, status_code: int = 200, enrol_token: str = "", **ctx: Any) -> Response:
    user, settings = a.user, a.request.app.state.settings
    context: dict[str, Any] = {
        "errors": {},
        "codes": None,
        "qr": None,
        "secret": None,
        "otpauth": None,
        "confirm_action": "/account/2fa/confirm",
        "needs_link": False,
    }
    if twofactor.enabled(user):
        context["remaining"] = twofactor.remaining_recovery_codes(a.db, user)
    elif twofactor.enrolment_needs_link(user, settings) and not enrol_token:
        context["needs_link"] = True  # no QR code without the link ops made
    elif user.totp_pending_secret:
        uri = twofactor.provisioning_uri(user.totp_pending_secret, user.email)
        context["qr"] = twofactor.qr_svg(uri)
        context["otpauth"] = uri
        secret = user.totp_pending_secret
        context["secret"] = " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))
        if enrol_token:
            context["confirm_action"] = f"/account/2fa/enrol/{enrol_token}"
    context["required"] = twofactor.required(user, settings)
    context.update(ctx)
    if context["codes"]:
        context["codes_text"] = "\n".join(context["codes"]) + "\n"
    return render(
        a.request, "accounts/twofactor.html", context, status_code=status_code, headers=NO_STORE
    )


def _refused(a: Call, exc: DomainError, **ctx: Any) -> Response:
    """The two-factor page again with why the code (or password) was refused."""
    return _page(a, status_code=_status(exc), errors=shown_errors(exc), **ctx)


def _to_page() -> Response:
    return RedirectResponse("/account/2fa", status_code=303)


@router.get("/account/2fa", response_class=HTMLResponse)
def twofactor_page(a: UserCall) -> Response:
    return _page(a)


NEEDS_LINK = N_(
    "Staff accounts turn on two-factor sign-in only with an enrolment link from operations."
)


@router.post("/account/2fa/start")
def twofactor_start(a: UserCall) -> Response:
    if twofactor.enrolment_needs_link(a.user, a.request.app.state.settings):
        raise Forbidden(NEEDS_LINK)
    if not twofactor.enabled(a.user):
        twofactor.start_enrolment(a.db, a.user)
    return _to_page()


def _confirm(a: Call, code: str, enrol_token: str = "") -> Response:
    db, user, now = a.db, a.user, a.now
    try:
        codes = twofactor.confirm_enrolment(db, user, code, now=now, wall=wall_now())
    except DomainError as e:
        return _page(a, status_code=422, errors=shown_errors(e), enrol_token=enrol_token)
    # Whoever else held the account (a session, an API token) loses it now.
    sessions = service.revoke_other_sessions(db, user, a.session_id, now, a.ip)
    assert user.id is not None
    tokens = service.revoke_all_api_tokens(db, user.id, now)
    service.audit(
        db,
        "account.2fa.enabled",
        now,
        actor=user,
        target=f"user:{user.id}",
        ip=a.ip,
        sessions_revoked=sessions,
        api_tokens_revoked=tokens,
        via="link" if enrol_token else "page",
    )
    return _page(a, codes=codes, just_enabled=True, signed_out=sessions, revoked=tokens)


@router.post("/account/2fa/confirm", response_class=HTMLResponse)
def twofactor_confirm(a: UserCall, code: CodeField = "") -> Response:
    if twofactor.enabled(a.user):
        return _to_page()
    if twofactor.enrolment_needs_link(a.user, a.request.app.state.settings):
        raise Forbidden(NEEDS_LINK)
    return _confirm(a, code)


class InvalidEnrolmentLink(NotFound):
    code = "invalid_enrolment_link"
    default_message = N_(
        "This enrolment link is invalid, already used, expired or for another account. Ask operations for a new one."
    )


def _enrol_user(a: Call, token: str) -> None:
    secret = a.request.app.state.settings.secret_key
    if not twofactor.enrolment_link_valid(a.user, token[:500], secret):
        raise InvalidEnrolmentLink()


@router.get("/account/2fa/enrol/{token}", response_class=HTMLResponse)
def twofactor_enrol_page(a: UserCall, token: str) -> Response:
    _enrol_user(a, token)
    return _page(a, enrol_token=token)


@router.post("/account/2fa/enrol/{token}", response_class=HTMLResponse)
def twofactor_enrol_confirm(a: UserCall, token: str, code: CodeField = "") -> Response:
    _enrol_user(a, token)
    return _confirm(a, code, enrol_token=token)


@router.post("/account/2fa/recovery-codes", response_class=HTMLResponse)
def twofactor_new_codes(a: UserCall, code: CodeField = "") -> Response:
    if not twofactor.enabled(a.user):
        return _to_page()
    try:
        codes = twofactor.regenerate_recovery_codes(a.db, a.user, code, now=a.now, wall=wall_now())
    except DomainError as e:
        return _refused(a, e)
    _audit(a, "account.2fa.codes")
    return _page(a, codes=codes)


@router.post("/account/2fa/disable", response_class=HTMLResponse)
def twofactor_disable(
    a: UserCall, password: Annotated[str, Form(max_length=1024)] = "", code: CodeField = ""
) -> Response:
    if not twofactor.enabled(a.user):
        return _to_page()
    if twofactor.required(a.user, a.request.app.state.settings):
        flash(a.request, _("Staff accounts must keep two-factor sign-in on."), "error")
        return _to_page()
    try:
        twofactor.disable(a.db, a.user, password=password, code=code, now=a.now, wall=wall_now())
    except DomainError as e:
        return _refused(a, e)
    _audit(a, "account.2fa.disabled")
    flash(a.request, _("Two-factor sign-in is off."), "success")
    return _to_page()


def _audit(a: Call, action: str) -> None:
    service.audit(a.db, action, a.now, actor=a.user, target=f"user:{a.user.id}", ip=a.ip)
