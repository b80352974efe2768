"""The audit log: security events and every staff action (who, what, when, from where)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Text
from sqlmodel import Field, Session, SQLModel

from app.db import UTCDateTime


class AuditEvent(SQLModel, table=True):
    __tablename__ = "audit_events"
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(sa_type=UTCDateTime, index=True)
    actor_id: int | None = Field(default=None, foreign_key="users.id", index=True)
    actor_email: str = Field(default="", max_length=254)
    action: str = Field(max_length=64, index=True)  # e.g. "login.failed", "order.delivered"
    target: str = Field(default="", max_length=120, index=True)  # e.g. "order:42", "user:7"
    ip: str = Field(default="", max_length=64)
    details: str = Field(default="{}", sa_column=Column(Text, nullable=False))


def record(
    session: Session,
    action: str,
    now: datetime,
    *,
    actor: Any = None,
    target: str = "",
    ip: str = "",
    **details: Any,
) -> AuditEvent:
    """Write one audit event in the caller's transaction. Never put secrets in ``details``."""
    ev = event(action, now, actor=actor, target=target, ip=ip, **details)
    session.add(ev)
    return ev


def event(
    action: str, now: datetime, *, actor: Any = None, target: str = "", ip: str = "", **details: Any
) -> AuditEvent:
    """One audit event's row, not added to any session (``record`` adds it)."""
    return AuditEvent(
        at=now,
        actor_id=getattr(actor, "id", None),
        actor_email=getattr(actor, "email", "") or "",
        action=action,
        target=target,
        ip=ip[:64],
        details=json.dumps(details, default=str, ensure_ascii=False, sort_keys=True),
    )


def client_ip(request: Any) -> str:
    client = getattr(request, "client", None)
    return getattr(client, "host", "") or ""
