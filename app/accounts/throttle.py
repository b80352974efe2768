"""Login throttling that holds across processes: failures are rows in the shared database.

Two counters guard every password check: one per account (the normalised email, whether
or not an account exists, so the lock-out itself reveals nothing) and one per client
address. Keys are stored hashed. A check counts the rows for the key inside the window;
when the limit is reached the attempt is refused before the password is even verified.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
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
    pending: list[tuple[SQLModel, type[SQLModel], dict[str, Any]]] | None = session.info.get(
        _PENDING
    )
    if pending is None:
        pending = []
        session.info[_PENDING] = pending
        event.listen(session, "after_commit", _forget)
        event.listen(session, "after_rollback", _rewrite)
    data = {k: v for k, v in row.model_dump().items() if k != "id"}
    pending.append((row, type(row), data))


def _drop_durably(session: Session, rows: list[AuthFailure]) -> None:
    """Undo :func:`add_durably` for ``rows``: gone now, and not re-written after a rollback."""
    pending = session.info.get(_PENDING) or []
    session.info[_PENDING] = [p for p in pending if not any(p[0] is r for r in rows)]
    session.flush()
    for row in rows:
        session.delete(row)
    session.flush()


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
            for _row, cls, data in pending:
                other.add(cls(**data))
            other.commit()
    except Exception:  # noqa: BLE001 - never turn a refused login into a server error
        log.exception("could not record %d throttling/audit rows", len(pending))


# --- Reserve, then check ----------------------------------------------------------------
# Every guarded check (a password, a second-factor code, a reset request) first counts
# itself against its limits, atomically with the "is the limit reached?" read, and only
# then does the work. Parallel attempts therefore cannot all pass the read before any of
# them counts: at most ``max_failures`` are ever checked.


@dataclass
class Attempt:
    """One attempt, already counted against its limits. Call :meth:`succeeded` when the
    attempt turned out legitimate (a right password): the count is taken back."""

    session: Session
    ids: list[int] = field(default_factory=list)  # rows committed on their own (PostgreSQL)
    rows: list[AuthFailure] = field(default_factory=list)  # rows in the caller's transaction

    def succeeded(self) -> None:
        if self.ids:
            self.session.exec(delete(AuthFailure).where(col(AuthFailure.id).in_(self.ids)))  # type: ignore[call-overload]
            self.ids = []
        if self.rows:
            _drop_durably(self.session, self.rows)
            self.rows = []


def attempt(session: Session, checks: list[tuple[Limit, str]], now: datetime) -> Attempt | None:
    """Count one attempt against every ``(limit, value)`` (empty values are skipped) and
    answer it, or ``None`` when a limit is already reached (then nothing is counted).

    PostgreSQL: the read and the count run in a short transaction of their own under an
    advisory lock per key, committed before the caller checks anything, so the count
    stands even if the caller's transaction rolls back.
    SQLite: every writing request holds the database's write lock from its first statement
    (``BEGIN IMMEDIATE``), so reading and counting inside the caller's transaction is
    already atomic; the rows are written durably. The pages answer a refused attempt with
    the form again and commit, so the count lands under the same lock; a caller that rolls
    back instead gets the rows re-written right after its rollback (another attempt may
    slip into that gap, so a JSON route guarded by a limit should run on PostgreSQL or
    commit its refusals too). A caller that has not started its transaction yet gets a
    short one of its own, as on PostgreSQL.
    """
    wanted = [(limit, value) for limit, value in checks if value]
    bind = session.get_bind()
    engine = bind.engine if hasattr(bind, "engine") else bind
    postgres = engine.dialect.name == "postgresql"
    if not postgres and session.in_transaction():
        if any(
            failures(session, limit, value, now) >= limit.max_failures for limit, value in wanted
        ):
            return None
        rows = [AuthFailure(key=key_for(limit, value), at=now) for limit, value in wanted]
        for row in rows:
            add_durably(session, row)
        session.flush()
        return Attempt(session, rows=rows)
    keys = sorted({key_for(limit, value) for limit, value in wanted})
    with Session(engine) as other:
        conn = other.connection()  # SQLite: BEGIN IMMEDIATE, the whole database is ours
        for key in keys if postgres else ():
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": key})
        if any(failures(other, limit, value, now) >= limit.max_failures for limit, value in wanted):
            other.rollback()
            return None
        new = [AuthFailure(key=key_for(limit, value), at=now) for limit, value in wanted]
        other.add_all(new)
        other.flush()
        ids = [int(r.id) for r in new if r.id is not None]
        other.commit()
    return Attempt(session, ids=ids)
