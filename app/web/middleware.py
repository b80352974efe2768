"""One pure-ASGI middleware: request id, locale, security headers, cookies, logs, metrics."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from fastapi import Request
from prometheus_client import Counter, Histogram
from starlette.datastructures import MutableHeaders
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
SECRET_PATH_PREFIXES = ("/password/reset/", "/q/", "/quotes/share/")


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


class AppMiddleware:
    def __init__(self, app: ASGIApp, *, https: bool = False, default_locale: str = "en") -> None:
        self.app = app
        self.https = https
        self.default_locale = default_locale

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        rid = request.headers.get("x-request-id") or secrets.token_hex(8)
        if len(rid) > 64 or not rid.replace("-", "").isalnum():
            rid = secrets.token_hex(8)
        request.state.request_id = rid
        locale = i18n.negotiate(
            request.cookies.get(i18n.COOKIE),
            request.headers.get("accept-language"),
            self.default_locale,
        )
        i18n.set_locale(locale)
        request.state.locale = locale
        started = monotonic()
        status: dict[str, Any] = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                headers = MutableHeaders(scope=message)
                headers["X-Request-ID"] = rid
                headers.setdefault("Content-Security-Policy", CSP)
                headers["X-Content-Type-Options"] = "nosniff"
                headers["X-Frame-Options"] = "DENY"
                headers.setdefault("Referrer-Policy", "strict-origin-when-cross-origin")
                headers["Permissions-Policy"] = "camera=(), microphone=(), geolocation=()"
                if self.https:
                    headers["Strict-Transport-Security"] = "max-age=63072000; includeSubDomains"
                if "content-language" not in headers:
                    headers["Content-Language"] = "zh-CN" if locale == "zh_CN" else "en"
                vary = headers.get("vary")
                if request.url.path.startswith("/static/"):
                    headers.setdefault("Cache-Control", "public, max-age=31536000, immutable")
                elif vary is None:
                    headers["Vary"] = "Cookie, Accept-Language, HX-Request"
                # Cookies scheduled during the request (flash, csrf).
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
                _queue_session_cookie(request, headers, extra)
                for k, v in extra.raw_headers:
                    if k == b"set-cookie":
                        headers.append("set-cookie", v.decode("latin-1"))
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = monotonic() - started
            route = scope.get("route")
            route_name = getattr(route, "path", "unmatched")
            if not request.url.path.startswith("/static/"):
                REQUESTS.labels(scope["method"], route_name, str(status["code"])).inc()
                LATENCY.labels(scope["method"], route_name).observe(elapsed)
            log.info(
                "%s %s %s %.1fms rid=%s",
                scope["method"],
                redact_path(request.url.path),
                status["code"],
                elapsed * 1000,
                rid,
            )


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
        import asyncio

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
                log.info(
                    "413 %s %s: declared %d bytes > %d", scope["method"], scope["path"], n, limit
                )
                await _refuse(scope, send, 413, TOO_LARGE)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        import asyncio

        try:
            async with asyncio.timeout(BODY_READ_TIMEOUT_S):
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client went away: nothing to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        log.info(
                            "413 %s %s: body over %d bytes", scope["method"], scope["path"], limit
                        )
                        await _refuse(scope, send, 413, TOO_LARGE)
                        return
                    chunks.append(chunk)
                    more = message.get("more_body", False)
        except TimeoutError:
            log.info(
                "408 %s %s: body not complete in %ss",
                scope["method"],
                scope["path"],
                BODY_READ_TIMEOUT_S,
            )
            await _refuse(scope, send, 408, TOO_SLOW)
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


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    """A small answer that needs nothing (no template, no database): JSON under /api/,
    plain text elsewhere, in the negotiated language; the connection is closed."""
    import json

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
