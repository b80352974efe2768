"""Login throttling that holds across processes: failures are rows in the shared database.

Two counters guard every password check: one per account (the normalised email, whether
or not an account exists, so the lock-out itself reveals nothing) and one per client
address. Keys are stored hashed. A check counts the rows for the key inside the window;
when the limit is reached the attempt is refused before the password is even verified.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, event, func, text
from sqlmodel import Session, SQLModel, col, select

from app.accounts.models import AuthFailure

log = logging.getLogger("app.accounts")


@dataclass(frozen=True)
class Limit:
    scope: str
    max_failures: int
    window: timedelta


# Per account: 5 wrong passwords in 15 minutes locks logins for that email until the
# oldest failure leaves the window. Per address: 20 in 15 minutes (an office NAT may
# share one address). Signups and reset emails are limited per address too.
LOGIN_ACCOUNT = Limit("login-account", 5, timedelta(minutes=15))
LOGIN_ADDRESS = Limit("login-address", 20, timedelta(minutes=15))
SIGNUP_ADDRESS = Limit("signup-address", 10, timedelta(hours=1))
# Resets: 3 an hour per (address, account) — the requester — and 20 an hour per account
# from everyone together (so strangers cannot silence a victim's own requests with 3).
RESET_REQUESTER = Limit("reset-requester", 3, timedelta(hours=1))
RESET_ACCOUNT = Limit("reset-account", 20, timedelta(hours=1))
RESET_ADDRESS = Limit("reset-address", 10, timedelta(hours=1))
PASSWORD_CHECK_USER = Limit("password-check-user", 5, timedelta(minutes=15))
# Changing the email to an address that is taken says so; 5 such answers an hour per user.
EMAIL_TAKEN_USER = Limit("email-taken-user", 5, timedelta(hours=1))


def key_for(limit: Limit, value: str) -> str:
    digest = hashlib.sha256(f"{limit.scope}\x00{value}".encode()).hexdigest()[:56]
    return f"{limit.scope}:{digest}"


def failures(session: Session, limit: Limit, value: str, now: datetime) -> int:
    stmt = select(func.count()).where(
        AuthFailure.key == key_for(limit, value), col(AuthFailure.at) > now - limit.window
    )
    return int(session.exec(stmt).one())


def is_blocked(session: Session, limit: Limit, value: str, now: datetime) -> bool:
    if not value:
        return False
    return failures(session, limit, value, now) >= limit.max_failures


def add_failure(session: Session, limit: Limit, value: str, now: datetime) -> None:
    if value:
        session.add(AuthFailure(key=key_for(limit, value), at=now))
        session.flush()


def clear(session: Session, limit: Limit, value: str) -> None:
    if value:
        session.exec(delete(AuthFailure).where(col(AuthFailure.key) == key_for(limit, value)))  # type: ignore[call-overload]


def prune(session: Session, now: datetime, older_than: timedelta = timedelta(days=1)) -> int:
    """Delete rows no window can count any more (called now and then)."""
    result = session.exec(delete(AuthFailure).where(col(AuthFailure.at) < now - older_than))  # type: ignore[call-overload]
    return int(result.rowcount or 0)


# --- Durable rows --------------------------------------------------------------------
# A failed login raises, and the request's transaction then rolls back; the failure must
# still count (and still be audited). Rows added with ``add_durably`` are written with the
# caller's transaction if it commits, and re-written in a fresh transaction right after
# the caller's rollback otherwise (on SQLite the write lock is free by then).

_PENDING = "accounts_durable_rows"


def add_durably(session: Session, row: SQLModel) -> None:
    session.add(row)
    pending: list[tuple[type[SQLModel], dict[str, Any]]] | None = session.info.get(_PENDING)
    if pending is None:
        pending = []
        session.info[_PENDING] = pending
        event.listen(session, "after_commit", _forget)
        event.listen(session, "after_rollback", _rewrite)
    data = {k: v for k, v in row.model_dump().items() if k != "id"}
    pending.append((type(row), data))


def _forget(session: Session) -> None:
    session.info[_PENDING] = []


def _rewrite(session: Session) -> None:
    pending = session.info.get(_PENDING) or []
    session.info[_PENDING] = []
    if not pending:
        return
    bind = session.get_bind()
    engine = bind.engine if hasattr(bind, "engine") else bind
    try:
        with Session(engine) as other:
            for cls, data in pending:
                other.add(cls(**data))
            other.commit()
    except Exception:  # noqa: BLE001 - never turn a refused login into a server error
        log.exception("could not record %d throttling/audit rows", len(pending))


def reserve(
    session: Session, checks: list[tuple[Limit, str]], now: datetime
) -> list[int] | bool | None:
    """Check every limit and count one attempt against each, atomically, in a short
    transaction of its own (PostgreSQL: an advisory lock per key), *before* the caller does
    the guarded work. Returns the ids of the rows written (hand them to :func:`forget`
    if the attempt turns out fine), or ``None`` when a limit is reached (nothing written).

    Returns ``False`` on SQLite when the caller's session already holds the write lock:
    the caller then checks and counts in its own transaction.
    """
    bind = session.get_bind()
    engine = bind.engine if hasattr(bind, "engine") else bind
    postgres = engine.dialect.name == "postgresql"
    if not postgres and session.in_transaction():
        # SQLite: the caller already holds the write lock (BEGIN IMMEDIATE); a second
        # session would wait on it. Check and count in the caller's transaction instead.
        return False
    wanted = [(limit, value) for limit, value in checks if value]
    keys = sorted({key_for(limit, value) for limit, value in wanted})
    with Session(engine) as other:
        conn = other.connection()  # SQLite: BEGIN IMMEDIATE, the whole database is ours
        for key in keys if postgres else ():
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": key})
        if any(failures(other, limit, value, now) >= limit.max_failures for limit, value in wanted):
            other.rollback()
            return None
        rows = [AuthFailure(key=key_for(limit, value), at=now) for limit, value in wanted]
        other.add_all(rows)
        other.flush()
        ids = [int(r.id) for r in rows if r.id is not None]
        other.commit()
    return ids


def forget(session: Session, ids: list[int]) -> None:
    """Remove attempts counted by :func:`reserve` (the attempt was legitimate)."""
    if ids:
        session.exec(delete(AuthFailure).where(col(AuthFailure.id).in_(ids)))  # type: ignore[call-overload]


def add_failure_durably(session: Session, limit: Limit, value: str, now: datetime) -> None:
    if value:
        add_durably(session, AuthFailure(key=key_for(limit, value), at=now))
