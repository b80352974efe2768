"""CSRF protection for every state-changing request (forms and htmx).

A random token lives in a signed, HttpOnly cookie; pages put the same token in a hidden
``csrf_token`` field, and htmx sends it as ``X-CSRF-Token`` (read from a ``<meta>`` tag by
``static/app.js``). A POST/PUT/PATCH/DELETE without a matching token gets 403 and changes
nothing. Exempt: ``/api/`` requests without the session cookie (bearer tokens are no
ambient credential; the language cookie authenticates nothing) and the payment webhook,
which carries its own HMAC signature.
"""

from __future__ import annotations

import hmac
import secrets
from contextvars import ContextVar

from fastapi import Request
from itsdangerous import BadSignature, URLSafeSerializer

from app.errors import N_, Forbidden

COOKIE = "csrftoken"
HEADER = "x-csrf-token"
FIELD = "csrf_token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}
EXEMPT_PATHS = ("/payments/webhook",)


# The token of the page being rendered, for macros imported without context.
_current_token: ContextVar[str] = ContextVar("csrf_token", default="")


def current_token() -> str:
    return _current_token.get()


def _signer(request: Request) -> URLSafeSerializer:
    return URLSafeSerializer(request.app.state.settings.secret_key, salt="csrf")


def _cookie_token(request: Request) -> str | None:
    raw = request.cookies.get(COOKIE)
    if not raw:
        return None
    try:
        value = _signer(request).loads(raw)
    except BadSignature:
        return None
    return value if isinstance(value, str) else None


def bind(secret: str, session_cookie: str | None, token: str) -> str:
    """The token a form must carry: the cookie's random token itself for anonymous forms
    (a pre-session token that login rotates), or, with a session, an HMAC of it bound to
    that session — a token planted in or read from another browser's cookie is useless."""
    if not session_cookie:
        return token
    mac = hmac.new(secret.encode(), f"csrf\x00{session_cookie}\x00{token}".encode(), "sha256")
    return "s." + mac.hexdigest()


def _session_cookie(request: Request) -> str | None:
    """This request's session cookie; the one just issued if login/logout happened now."""
    if hasattr(request.state, "auth_cookie"):
        return request.state.auth_cookie or None  # type: ignore[no-any-return]
    # the cookie's name is the accounts domain's, given by create_app: the web layer
    # imports no domain
    return request.cookies.get(request.app.state.session_cookie)


def _bound(request: Request, token: str) -> str:
    return bind(request.app.state.settings.secret_key, _session_cookie(request), token)


def csrf_token(request: Request) -> str:
    """The token for this browser's forms; creates one (and schedules its cookie) if needed."""
    token = getattr(request.state, "csrf_token", None) or _cookie_token(request)
    if token is None:
        token = secrets.token_urlsafe(32)
        request.state.csrf_new = True
    request.state.csrf_token = token
    form_token = _bound(request, token)
    _current_token.set(form_token)
    return form_token


def rotate(request: Request) -> str:
    """A fresh token for this browser (at login and logout): a token planted or seen
    before authentication is useless afterwards. The middleware sets the new cookie."""
    token = secrets.token_urlsafe(32)
    request.state.csrf_token = token
    request.state.csrf_new = True
    _current_token.set(_bound(request, token))
    return token


def cookie_value(request: Request) -> str:
    return _signer(request).dumps(request.state.csrf_token)


async def csrf_protect(request: Request) -> None:
    """Global dependency: verify the token on unsafe methods."""
    if request.method in SAFE_METHODS:
        return
    if request.url.path.startswith(EXEMPT_PATHS):
        return
    if request.url.path.startswith("/api/") and not request.cookies.get(
        request.app.state.session_cookie
    ):
        # A JSON client without our session cookie carries no ambient credential to abuse
        # (its bearer token is a header no other site can make a browser send; a language
        # or CSRF cookie authenticates nothing).
        return
    raw = _cookie_token(request)
    expected = _bound(request, raw) if raw else None
    sent = request.headers.get(HEADER)
    if not sent:
        ctype = request.headers.get("content-type", "")
        if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()
            value = form.get(FIELD)
            sent = value if isinstance(value, str) else None
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        raise Forbidden(
            N_(
                "This form has expired or was not sent from our site. Reload the page and try again."
            )
        )
