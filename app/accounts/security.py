"""Passwords (argon2id), session cookies and token hashing."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import bindparam
from sqlmodel import Session, select

from app.accounts.models import ApiToken, User, UserSession
from app.clock import utc, wall_now

SESSION_COOKIE = "session"
SESSION_LIFETIME = timedelta(days=14)
API_TOKEN_PREFIX = "gpn_"  # noqa: S105 - a prefix, not a secret

# argon2id with the library's RFC 9106 "low memory" defaults.
_hasher = PasswordHasher()
# A fixed hash verified when the email is unknown, so timing does not reveal accounts.
_DUMMY_HASH = _hasher.hash("dummy-password-for-timing")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _signer(secret: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret, salt="session")


def create_session(
    session: Session, user: User, now: datetime, secret: str, ip: str = "", user_agent: str = ""
) -> str:
    """Store a new login and return the signed cookie value."""
    raw = secrets.token_urlsafe(32)
    assert user.id is not None
    session.add(
        UserSession(
            token_hash=sha256(raw),
            user_id=user.id,
            created_at=now,
            expires_at=now + SESSION_LIFETIME,
            ip=ip[:64],
            user_agent=user_agent[:256],
        )
    )
    session.flush()
    return _signer(secret).dumps(raw)


def session_expired(expires_at: datetime, now: datetime) -> bool:
    """Expired on both clocks: the (possibly simulated) ``now`` and the wall clock. Staff
    moving the simulated clock forward must not sign everyone out (issue 19, defect 10)."""
    return utc(expires_at) <= min(now, wall_now())


_SESSION_BY_HASH = select(UserSession).where(UserSession.token_hash == bindparam("token_hash"))


def session_from_cookie(
    session: Session, cookie: str | None, now: datetime, secret: str
) -> UserSession | None:
    if not cookie:
        return None
    try:
        raw = _signer(secret).loads(cookie)
    except BadSignature:
        return None
    if not isinstance(raw, str):
        return None
    row = session.exec(_SESSION_BY_HASH, params={"token_hash": sha256(raw)}).first()
    if row is None or row.revoked_at is not None or session_expired(row.expires_at, now):
        return None
    return row


def revoke_all_sessions(
    session: Session, user_id: int, now: datetime, keep_id: int | None = None
) -> int:
    rows = session.exec(
        select(UserSession).where(UserSession.user_id == user_id, UserSession.revoked_at.is_(None))  # type: ignore[union-attr]
    ).all()
    n = 0
    for r in rows:
        if r.id != keep_id:
            r.revoked_at = now
            session.add(r)
            n += 1
    return n


def create_api_token(
    session: Session, user: User, name: str, now: datetime
) -> tuple[ApiToken, str]:
    """Returns the row and the token in clear (shown once)."""
    raw = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    assert user.id is not None
    row = ApiToken(
        user_id=user.id, name=name[:80], prefix=raw[:12], token_hash=sha256(raw), created_at=now
    )
    session.add(row)
    session.flush()
    return row, raw


LAST_USED_RESOLUTION = timedelta(minutes=1)


# the token and its user in one round trip (the user is loaded into the session); the
# statement is built once (building it cost about a quarter of the lookup)
_TOKEN_AND_USER = (
    select(ApiToken, User)
    .join(User, User.id == ApiToken.user_id)  # type: ignore[arg-type]
    .where(ApiToken.token_hash == bindparam("token_hash"))
)


def user_for_api_token(session: Session, raw: str, now: datetime) -> User | None:
    found = session.exec(_TOKEN_AND_USER, params={"token_hash": sha256(raw)}).first()
    if found is None:
        return None
    row, user = found
    if row.revoked_at is not None or not user.is_active:
        return None
    # "Last used" is shown to the minute; writing it on every call would lock the token
    # row for the whole request, so parallel calls with one token would queue on it.
    if row.last_used_at is None or utc(now) - utc(row.last_used_at) >= LAST_USED_RESOLUTION:
        row.last_used_at = now
        session.add(row)
    return user
