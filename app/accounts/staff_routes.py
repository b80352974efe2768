"""Staff pages for accounts: the audit log (ops) and the user list (sales and ops; only
ops may disable or re-enable an account). Mounted under ``/staff`` by the staff router,
which already requires a staff user; ops-only routes are guarded again here."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import Field
from sqlmodel import Session, col, func, or_, select

from app.accounts import service
from app.accounts.audit import AuditEvent
from app.accounts.deps import OpsCall, StaffCall
from app.accounts.models import Role, User
from app.web.flash import flash
from app.web.i18n import gettext as _
from app.web.params import Paged
from app.web.routing import AppRoute
from app.web.templating import render

router = APIRouter(route_class=AppRoute)
PAGE_SIZE = 50


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _parse_day(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.combine(date.fromisoformat(text), time.min, tzinfo=UTC)
    except ValueError:
        return None


def _paged(
    db: Session, model: Any, conds: list[Any], order: tuple[Any, ...], page: int
) -> tuple[list[Any], int, int]:
    """Page ``page`` (``PAGE_SIZE`` rows) of ``model`` rows meeting every condition, in
    ``order``; with how many meet them and how many pages that makes."""
    total = int(db.exec(select(func.count()).select_from(model).where(*conds)).one())
    stmt = select(model).where(*conds).order_by(*order)
    rows = list(db.exec(stmt.offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)).all())
    return rows, total, max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)


class AuditFilters(Paged):
    """The audit log's filters, as the form sends them back."""

    action: str = Field("", max_length=64)
    actor: str = Field("", max_length=254)
    target: str = Field("", max_length=120)
    ip: str = Field("", max_length=64)
    since: str = Field("", max_length=10)
    until: str = Field("", max_length=10)


@router.get("/audit", response_class=HTMLResponse)
def audit_log(call: OpsCall, f: Annotated[AuditFilters, Query()]) -> Response:
    conds: list[Any] = []
    if f.action.strip():
        conds.append(col(AuditEvent.action).like(f.action.strip().lower() + "%"))
    if f.actor.strip():
        conds.append(col(AuditEvent.actor_email).like(_like(f.actor.strip().lower()), escape="\\"))
    if f.target.strip():
        conds.append(col(AuditEvent.target) == f.target.strip())
    if f.ip.strip():
        conds.append(col(AuditEvent.ip) == f.ip.strip())
    start, end = _parse_day(f.since), _parse_day(f.until)
    if start:
        conds.append(col(AuditEvent.at) >= start)
    if end:
        conds.append(col(AuditEvent.at) < end + timedelta(days=1))
    newest = (col(AuditEvent.at).desc(), col(AuditEvent.id).desc())
    rows, total, pages = _paged(call.db, AuditEvent, conds, newest, f.page)
    filters = f.model_dump(exclude={"page"})
    ctx = {"events": rows, "filters": filters, "page": f.page, "pages": pages, "total": total}
    return render(call.request, "accounts/staff_audit.html", ctx)


class UserFilters(Paged):
    q: str = Field("", max_length=254)
    role: str = Field("", max_length=16)


@router.get("/users", response_class=HTMLResponse)
def users(call: StaffCall, f: Annotated[UserFilters, Query()]) -> Response:
    conds: list[Any] = []
    if f.q.strip():
        pattern = _like(f.q.strip().lower())
        conds.append(
            or_(
                col(User.email).like(pattern, escape="\\"),
                col(User.name).like(pattern, escape="\\"),
                col(User.company).like(pattern, escape="\\"),
            )
        )
    if f.role in {r.value for r in Role}:
        conds.append(col(User.role) == f.role)
    newest = (col(User.created_at).desc(), col(User.id).desc())
    rows, total, pages = _paged(call.db, User, conds, newest, f.page)
    ctx = {"users": rows, "q": f.q, "role": f.role, "page": f.page, "pages": pages, "total": total}
    return render(call.request, "accounts/staff_users.html", ctx)


def _back(q: str) -> str:

    return "/staff/users" + (f"?{urlencode({'q': q})}" if q else "")


@router.post("/users/{user_id}/disable")
@router.post("/users/{user_id}/enable")
def switch_user(call: OpsCall, user_id: int, q: Annotated[str, Form()] = "") -> Response:
    """Disable (signed out everywhere) or re-enable an account, as the path says."""
    active = call.request.url.path.endswith("/enable")
    target = service.set_active(call.db, call.user, user_id, active, call.now, ip=call.ip)
    if active:
        done = _("{email} can log in again.")
    else:
        done = _("{email} is disabled and signed out everywhere.")
    flash(call.request, done.format(email=target.email), "success")
    return RedirectResponse(_back(q[:254]), status_code=303)
