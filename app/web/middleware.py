"""One pure-ASGI middleware: request id, locale, security headers, cookies, logs, metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from typing import Any

from fastapi import Request
from prometheus_client import Counter, Histogram
from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.accounts.login import set_session_cookie
from app.accounts.security import SESSION_COOKIE
from app.clock import monotonic
from app.errors import N_
from app.web import flash, i18n
from app.web.csrf import COOKIE, cookie_value

log = logging.getLogger("app.request")

REQUESTS = Counter("http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram("http_request_duration_seconds", "HTTP request latency", ["method", "route"])

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'self'; object-src 'none'"
)


# Paths that carry a secret (reset links, share links): never written to logs in full.
SECRET_PATH_PREFIXES = ("/password/reset/", "/q/", "/quotes/share/", "/account/2fa/enrol/")


# Control characters (C0 but tab, DEL, C1) and the Unicode line/paragraph separators: a
# request value carrying them could end a log line and start a forged one.
_LOG_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def log_safe(value: str) -> str:
    """``value`` with every control character written as an escape (``\\n``, ``\\x00``
    …): one log line stays one line, whatever a request carried."""
    return _LOG_UNSAFE.sub(lambda m: repr(m.group())[1:-1], value)


def redact_path(path: str) -> str:
    for prefix in SECRET_PATH_PREFIXES:
        if path.startswith(prefix) and len(path) > len(prefix):
            return prefix + "[redacted]"
    return path


def _queue_session_cookie(request: Request, headers: MutableHeaders, extra: Response) -> None:
    """Login/logout queue the session cookie on ``request.state`` (see
    ``app.accounts.login.start_session``) so it reaches whatever response the handler
    returns; skipped when the handler already set it."""
    if not hasattr(request.state, "auth_cookie"):
        return

    prefix = SESSION_COOKIE + "="
    if any(v.startswith(prefix) for v in headers.getlist("set-cookie")):
        return
    set_session_cookie(
        extra,
        request.state.auth_cookie,
        secure=request.app.state.settings.secure_cookies,
    )


# Security headers every response gets (set, replacing any the handler set).
_ALWAYS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)
_HSTS = (b"strict-transport-security", b"max-age=63072000; includeSubDomains")
_REPLACED = frozenset(k for k, _ in _ALWAYS) | {b"x-request-id", _HSTS[0]}
_CSP = (b"content-security-policy", CSP.encode())
_REFERRER = (b"referrer-policy", b"strict-origin-when-cross-origin")
_VARY = (b"vary", b"Cookie, Accept-Language, HX-Request")
_STATIC_CACHE = (b"cache-control", b"public, max-age=31536000, immutable")
_LANGUAGE = {"zh_CN": (b"content-language", b"zh-CN")}
_LANGUAGE_DEFAULT = (b"content-language", b"en")
# Request state keys that schedule a cookie on the response (flash, CSRF, session).
_COOKIE_STATE = ("flash_out", "flash_popped", "csrf_new", "auth_cookie")
# Methods counted by name in the metrics; anything else is "OTHER" (a label per made-up
# method would grow the metrics without bound).
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _request_headers(scope: Scope) -> tuple[str | None, str | None, list[str]]:
    """X-Request-ID and Accept-Language (first of each) and every Cookie header, read off
    the raw ASGI headers in one pass (names there are lower case)."""
    rid = accept = None
    cookies: list[str] = []
    for k, v in scope["headers"]:
        if k == b"cookie":
            cookies.append(v.decode("latin-1"))
        elif k == b"accept-language":
            if accept is None:
                accept = v.decode("latin-1")
        elif k == b"x-request-id" and rid is None:
            rid = v.decode("latin-1")
    return rid, accept, cookies


def _locale_cookie(cookie_headers: list[str], name: str = i18n.COOKIE) -> str | None:
    value = None
    for header in cookie_headers:  # the last one wins, as Request.cookies merges them
        if name in header:
            value = cookie_parser(header).get(name, value)
    return value


def _scheduled_cookies(scope: Scope, headers: list[tuple[bytes, bytes]]) -> None:
    """Cookies scheduled during the request (flash, csrf, the session), appended to
    ``headers``. Only requests that scheduled one get here (pages, mostly)."""
    request = Request(scope)
    extra = Response()
    flash.apply(request, extra)
    if getattr(request.state, "csrf_new", False):
        extra.set_cookie(
            COOKIE,
            cookie_value(request),
            httponly=True,
            samesite="lax",
            secure=request.app.state.settings.secure_cookies,
        )
    mutable = MutableHeaders(raw=headers)
    _queue_session_cookie(request, mutable, extra)
    headers.extend(kv for kv in extra.raw_headers if kv[0] == b"set-cookie")


class AppMiddleware:
    """Request id, locale, security headers, scheduled cookies, access log and metrics.

    Works on the raw ASGI scope and header lists: no Request, URL or Response object per
    request unless the request scheduled a cookie (every request passes through here, so
    its cost is on every answer; docs/benchmarks-ab.md).
    """

    def __init__(self, app: ASGIApp, *, https: bool = False, default_locale: str = "en") -> None:
        self.app = app
        self.https = https
        self.default_locale = default_locale
        self._metrics: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid, accept, cookie_headers = _request_headers(scope)
        if not rid or len(rid) > 64 or not (rid.isascii() and rid.replace("-", "").isalnum()):
            rid = secrets.token_hex(8)
        cookie = _locale_cookie(cookie_headers) if cookie_headers else None
        locale = i18n.negotiate(cookie, accept, self.default_locale)
        i18n.set_locale(locale)
        # The reader's time zone (static/tz.js): pages, emails rendered here and PDFs.
        i18n.set_zone(_locale_cookie(cookie_headers, i18n.ZONE_COOKIE) if cookie_headers else "")
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        state["locale"] = locale
        path = scope["path"]
        static = path.startswith("/static/")
        started = monotonic()
        status = 500
        rid_header = (b"x-request-id", rid.encode("latin-1"))
        https = self.https

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers") or ()]
                present = {k.lower() for k, _ in headers}
                if present & _REPLACED:
                    headers = [kv for kv in headers if kv[0].lower() not in _REPLACED]
                headers.append(rid_header)
                headers.extend(_ALWAYS)
                if https:
                    headers.append(_HSTS)
                if b"content-security-policy" not in present:
                    headers.append(_CSP)
                if b"referrer-policy" not in present:
                    headers.append(_REFERRER)
                if b"content-language" not in present:
                    headers.append(_LANGUAGE.get(locale, _LANGUAGE_DEFAULT))
                if static:
                    if b"cache-control" not in present:
                        headers.append(_STATIC_CACHE)
                elif b"vary" not in present:
                    headers.append(_VARY)
                if any(key in state for key in _COOKIE_STATE):
                    _scheduled_cookies(scope, headers)
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = monotonic() - started
            if not static:
                self._observe(scope, status, elapsed)
            log.info(
                "%s %s %s %.1fms rid=%s",
                log_safe(scope["method"]),
                log_safe(redact_path(path)),
                status,
                elapsed * 1000,
                rid,
            )

    def _observe(self, scope: Scope, status: int, elapsed: float) -> None:
        method = scope["method"] if scope["method"] in _METHODS else "OTHER"
        route = getattr(scope.get("route"), "path", "unmatched")
        key = (method, route, str(status))
        children = self._metrics.get(key)
        if children is None:
            children = (REQUESTS.labels(*key), LATENCY.labels(method, route))
            self._metrics[key] = children
        children[0].inc()
        children[1].observe(elapsed)


class ConcurrencyLimit:
    """Admit at most ``limit`` requests at once per process; the rest wait at the edge.

    Handlers are synchronous and run in a thread pool, and a request may hold a pooled
    database connection between its dependencies and its handler. With more requests in
    flight than pooled connections, every worker thread can end up waiting for a
    connection held by a request that is itself waiting for a thread — a stall until the
    pool times out. Queueing here (no thread, no connection held) keeps the process live
    under any load. Static files and health checks are not counted.
    """

    EXEMPT = ("/static/", "/healthz", "/metrics")

    def __init__(self, app: ASGIApp, *, limit: int) -> None:

        self.app = app
        self.limit = max(1, limit)
        self._sem = asyncio.Semaphore(self.limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.EXEMPT):
            await self.app(scope, receive, send)
            return
        async with self._sem:
            await self.app(scope, receive, send)


# ---------------------------------------------------------------------------------------
# Request bodies: bounded in size and in time, read before any request slot or lock.
# ---------------------------------------------------------------------------------------

MB = 1024 * 1024
DEFAULT_BODY_LIMIT = 1 * MB  # forms and JSON
# Per-route caps (longest matching prefix wins). Nothing here needs more than the default:
# the largest legitimate input is an SSH public key or a long delay reason (a few KB).
BODY_LIMITS: tuple[tuple[str, int], ...] = (
    ("/payments/webhook", 64 * 1024),  # a BTCPay notification is well under 2 KB
)
BODY_READ_TIMEOUT_S = 10.0  # the whole body must arrive within this (module-level for tests)
BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})

TOO_LARGE = N_("The request is too large.")
TOO_SLOW = N_("The request took too long to arrive. Check your connection and try again.")


def body_limit_for(path: str) -> int:
    best, limit = -1, DEFAULT_BODY_LIMIT
    for prefix, cap in BODY_LIMITS:
        if path.startswith(prefix) and len(prefix) > best:
            best, limit = len(prefix), cap
    return limit


class BodyLimit:
    """Read the whole request body, bounded, *before* the request takes a slot.

    - A declared ``Content-Length`` over the route's cap is refused at once with 413,
      without reading the body.
    - A streamed (chunked) body is counted as it arrives: 413 when it passes the cap.
    - The body must arrive within ``BODY_READ_TIMEOUT_S`` seconds: 408 otherwise.

    Only then is the buffered body handed on, so a slow or endless client waits here,
    holding no concurrency slot, thread, connection or database lock.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if scope["method"] in BODYLESS and declared in (None, b"0") and not chunked:
            await self.app(scope, receive, send)
            return
        limit = body_limit_for(scope["path"])
        if declared is not None:
            try:
                n = int(declared)
            except ValueError:
                n = -1
            if n < 0:
                await _refuse(scope, send, 400, N_("The request could not be completed."))
                return
            if n > limit:
                why = f"declared {n} bytes > {limit}"
                await _refuse_logged(scope, send, 413, TOO_LARGE, why)
                return
        chunks: list[bytes] = []
        size = 0
        more = True

        try:
            async with asyncio.timeout(BODY_READ_TIMEOUT_S):
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client went away: nothing to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        why = f"body over {limit} bytes"
                        await _refuse_logged(scope, send, 413, TOO_LARGE, why)
                        return
                    chunks.append(chunk)
                    more = message.get("more_body", False)
        except TimeoutError:
            why = f"body not complete in {BODY_READ_TIMEOUT_S}s"
            await _refuse_logged(scope, send, 408, TOO_SLOW, why)
            return
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _refuse_logged(scope: Scope, send: Send, status: int, message: str, why: str) -> None:
    """``_refuse``, logged with the method, the (redacted) path and why."""
    method, path = log_safe(scope["method"]), log_safe(redact_path(scope["path"]))
    log.info("%d %s %s: %s", status, method, path, why)
    await _refuse(scope, send, status, message)


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    """A small answer that needs nothing (no template, no database): JSON under /api/,
    plain text elsewhere, in the negotiated language; the connection is closed."""

    text = i18n.gettext(message)
    if scope["path"].startswith(("/api/", "/payments/webhook")):
        code = {408: "timeout", 413: "too_large"}.get(status, "bad_request")
        body = json.dumps({"error": {"code": code, "message": text}}).encode()
        ctype = b"application/json"
    else:
        body = text.encode()
        ctype = b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", ctype),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
