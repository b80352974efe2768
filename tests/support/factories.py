"""Test factories shared by every test package: put money on a balance, and more as needed.

One implementation each, so a change to a seam (say, how promotional credit is granted)
is made once for the whole suite."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.ledger import service as ledger


def fund(
    db: Engine | Session,
    user: User | int,
    cents: int,
    now: datetime,
    key: str | None = None,
    *,
    reason: str = "test credit",
) -> None:
    """Give ``user`` ``cents`` of promotional credit and commit. ``db`` is an engine (a
    session of its own) or an open session (committed). A fixed ``key`` makes the grant
    idempotent; by default every call credits again."""
    user_id = user if isinstance(user, int) else user.id
    assert user_id is not None
    if isinstance(db, Session):
        _grant(db, user_id, cents, now, key, reason)
        return
    with Session(db, expire_on_commit=False) as s:
        _grant(s, user_id, cents, now, key, reason)


def _grant(
    s: Session, user_id: int, cents: int, now: datetime, key: str | None, reason: str
) -> None:
    ledger.grant_promotion(
        s,
        user_id=user_id,
        amount_cents=cents,
        reason=reason,
        now=now,
        idempotency_key=key or secrets.token_hex(8),
    )
    s.commit()
