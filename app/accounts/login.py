"""Log a browser in and out (the web layer of sessions): the signed cookie, the request's
state and the CSRF token. The database side lives in ``app.accounts.service``
(``open_session``/``close_session``, ``register``, ``authenticate``)."""

from __future__ import annotations

from datetime import datetime

from fastapi import Request, Response
from sqlmodel import Session

from app.accounts import service
from app.accounts.audit import client_ip
from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, SESSION_LIFETIME
from app.errors import N_, Forbidden, InvalidInput
from app.web import i18n
from app.web.csrf import rotate


def _secure(request: Request) -> bool:
    return bool(request.app.state.settings.secure_cookies)


def start_session(
    request: Request, response: Response | None, session: Session, user: User
) -> None:
    """Log ``user`` in: a new server-side session row, the signed cookie (HttpOnly,
    SameSite=Lax, Secure outside development/test), a fresh CSRF token, and any session
    this browser had before revoked (no session fixation).

    The cookie is set on ``response`` when given and also queued on ``request.state`` so
    the middleware adds it to whatever response the handler finally returns.
    """
    cookie, row_id = service.open_session(
        session,
        user,
        now=request.app.state.clock.now(),
        secret_key=request.app.state.settings.secret_key,
        old_cookie=request.cookies.get(SESSION_COOKIE),
        ip=client_ip(request),
        user_agent=request.headers.get("user-agent", ""),
    )
    # Emails give dates in the zone of the browser the customer last signed in with.
    zone = i18n.known_zone(request.cookies.get(i18n.ZONE_COOKIE))
    if zone and user.time_zone != zone:
        user.time_zone = zone
        session.add(user)
    request.state.session_row_id = row_id
    _switch_user(request, response, user, cookie)


def set_session_cookie(response: Response, cookie: str | None, *, secure: bool) -> None:
    if cookie is None:
        response.delete_cookie(
            SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure
        )
    else:
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=int(SESSION_LIFETIME.total_seconds()),
            path="/",
            httponly=True,
            samesite="lax",
            secure=secure,
        )


def end_session(request: Request, response: Response | None, session: Session) -> None:
    """Log out: revoke the server-side row (so a copied cookie stops working everywhere),
    delete the cookie and rotate the CSRF token."""
    service.close_session(
        session,
        cookie=request.cookies.get(SESSION_COOKIE),
        now=request.app.state.clock.now(),
        secret_key=request.app.state.settings.secret_key,
        ip=client_ip(request),
    )
    _switch_user(request, response, None, None)


def _switch_user(
    request: Request, response: Response | None, user: User | None, cookie: str | None
) -> None:
    """The rest of the request runs as ``user`` (None: nobody) with a fresh CSRF token; the
    session cookie is set to ``cookie`` (None: deleted) on ``response`` when given."""
    request.state.user = user
    request.state.user_loaded = True
    request.state.auth_cookie = cookie
    rotate(request)
    if response is not None:
        set_session_cookie(response, cookie, secure=_secure(request))


def _no_inline_second_factor(user: User) -> None:
    """The inline account step cannot ask for the second factor: send them to /login."""
    if user.totp_enabled_at is not None and user.totp_secret:
        raise InvalidInput(
            errors={
                "password": N_(
                    "This account uses two-factor sign-in: log in on the login page "
                    "first (Log in, top right), then come back to this form."
                )
            }
        )


def signup_or_login(
    session: Session,
    request: Request,
    response: Response | None,
    *,
    mode: str,
    email: str,
    password: str,
    now: datetime,
) -> User:
    """The inline account step of another form (the deploy form uses it).

    Contract:
      * Render ``templates/accounts/_inline_auth.html`` inside your ``<form>``; it posts
        ``account_mode`` ("signup" or "login"), ``email`` and ``password``. Pass
        ``errors`` (a dict) and optionally ``account_mode``/``account_email`` back to it
        when re-rendering; it never re-fills the password.
      * On POST, if the visitor is already signed in, call nothing (or call this: it
        returns the signed-in user). Otherwise call this with the three fields.
      * It validates, registers (``mode="signup"``) or authenticates (``mode="login"``),
        starts the session (cookie queued for whatever response you return) and returns
        the ``User``.
      * On failure it raises a ``DomainError`` — ``InvalidInput`` (bad input, wrong
        password, email taken), ``LoginThrottled`` (429) or ``Forbidden`` (disabled) —
        each with ``.errors`` (field → msgid; translate with ``_()``). Catch
        ``DomainError``, re-render your form with ``errors=exc.errors`` and all the other
        choices as the customer typed them (status 422/429/403), and do not create your
        own objects first.
    """
    current = getattr(request.state, "user", None)
    if current is not None and getattr(request.state, "user_loaded", False):
        return current  # type: ignore[no-any-return]
    ip = client_ip(request)
    try:
        if mode == "signup":
            try:
                user = service.register(session, email=email, password=password, now=now, ip=ip)
            except service.EmailTaken as taken:
                # The same sign-up sent twice (a double click, a retry) or an owner who
                # forgot: the account's own password signs in, as the login form would
                # (throttled and audited the same way); anything else is the sign-up's refusal
                try:
                    user = service.authenticate(
                        session, email=email, password=password, now=now, ip=ip
                    )
                except InvalidInput:
                    raise taken from None
                _no_inline_second_factor(user)
        elif mode == "login":
            user = service.authenticate(session, email=email, password=password, now=now, ip=ip)
            _no_inline_second_factor(user)
        else:
            raise InvalidInput(
                errors={"account_mode": N_("Choose whether to create an account or log in.")}
            )
    except Forbidden as e:
        e.errors = {"email": e.message}  # type: ignore[attr-defined]
        raise
    start_session(request, response, session, user)
    return user
