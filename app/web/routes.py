"""Home, language switch, health, readiness and metrics."""

from __future__ import annotations

import hmac
import os
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from sqlalchemy import text

from app.accounts.deps import get_optional_user
from app.catalog import service as catalog
from app.catalog.specs import all_specs
from app.migrate import current_revision, head_revision
from app.web import i18n
from app.web.deps import SessionDep
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)


def safe_next(target: str | None, default: str = "/") -> str:
    """Only same-site relative paths: never an open redirect."""
    if not target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target:
        return default
    return target


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def home(request: Request, session: SessionDep) -> Response:

    specs = [s for s in all_specs()]
    prices = {s.id: catalog.list_price_cents(session, s.id) for s in specs}
    return render(request, "home.html", {"specs": specs, "prices": prices})


@router.get("/lang/{code}", include_in_schema=False)
def set_language(
    request: Request,
    code: str,
    session: SessionDep,
    next: Annotated[str | None, Query()] = None,
) -> Response:
    target = safe_next(
        next or request.headers.get("referer") and urlsplit(request.headers["referer"]).path
    )
    response = RedirectResponse(target, status_code=303)
    if code in i18n.LOCALES:
        _remember_language(request, session, code)
        response.set_cookie(
            i18n.COOKIE, code, max_age=365 * 24 * 3600, samesite="lax", httponly=False
        )
    return response


def _remember_language(request: Request, session: SessionDep, code: str) -> None:
    """A signed-in user's choice is also their account's language: notifications and
    emails are written in it (shown on /account)."""

    try:
        user = get_optional_user(request, session)
    except Exception:  # noqa: BLE001 - a bad token must not stop a language switch
        return
    if user is not None and user.locale != code:
        user.locale = code
        session.add(user)
    zone = i18n.known_zone(request.cookies.get(i18n.ZONE_COOKIE))
    if user is not None and zone and user.time_zone != zone:
        user.time_zone = zone  # emails follow the browser's zone, as they follow its language
        session.add(user)


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
def readyz(request: Request) -> Response:

    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            current = current_revision(conn)
    except Exception as e:  # noqa: BLE001 - any failure means "not ready"
        return JSONResponse({"status": "unavailable", "database": str(e.__class__.__name__)}, 503)
    head = head_revision()
    if current != head:
        return JSONResponse({"status": "migrations pending", "current": current, "head": head}, 503)
    return JSONResponse({"status": "ready", "revision": current})


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """Prometheus text, behind ``Authorization: Bearer <APP_METRICS_TOKEN>`` (404 while no
    token is configured). With ``PROMETHEUS_MULTIPROC_DIR`` set (several worker
    processes), every process's counters are summed, so a scrape sees the whole server."""
    token = request.app.state.settings.metrics_token
    if not token:
        return PlainTextResponse("Not Found", status_code=404)
    sent = request.headers.get("authorization", "")
    if not sent.lower().startswith("bearer ") or not hmac.compare_digest(
        sent[7:].strip().encode(), token.encode()
    ):
        return PlainTextResponse(
            "Unauthorized", status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )
    return PlainTextResponse(metrics_text(), media_type=CONTENT_TYPE_LATEST)


def metrics_text() -> str:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry).decode()
    return generate_latest().decode()
