"""Accounts, part 1 — who you are: sign-up, login (throttled), sessions, the audit helpers.

Services take ``session`` and ``now`` and never commit (the request owns the transaction).
Errors are ``app.errors`` domain errors; ``InvalidInput.errors`` maps form fields to
messages so every form can show them next to the right field. Other domains call these
through ``app.accounts.service`` (the seam); ``credentials.py`` (passwords, resets, email,
API tokens) and ``profile.py`` (SSH keys, billing details) hold the rest.

Choices worth knowing:

* **Duplicate email at sign-up.** Creating an account that logs you in at once (which the
  deploy form needs) cannot hide whether an address is taken: the only way to hide it is an
  email round-trip before the account exists. We accept that and limit what it gives an
  attacker: sign-ups are throttled per address (``SIGNUP_ADDRESS``) just like logins, the
  message is neutral ("can't be used for a new account … log in or reset your password"),
  and it is checked only after the password passed the policy, so probing needs a full,
  valid sign-up per guess. Login, password reset and the throttle messages never reveal
  whether an email is registered.
* **Throttling** counts attempts in the shared database per account (normalised email,
  registered or not) and per client address. ``throttle.attempt`` counts each attempt
  atomically *before* the check (parallel guesses cannot all slip past the limit); a
  right answer takes its count back; the count survives the request's rollback.
* **Secrets** (passwords, reset tokens, API tokens, session ids) are stored only as
  argon2id hashes or SHA-256 digests and never put in logs, audit details or error text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.accounts import throttle
from app.accounts.audit import event as audit_event
from app.accounts.audit import record as audit
from app.accounts.emails import EmailError, looks_like_email, normalise_email
from app.accounts.models import ApiToken, Role, User, UserSession
from app.accounts.security import (
    create_session,
    hash_password,
    needs_rehash,
    revoke_all_sessions,
    session_expired,
    session_from_cookie,
    verify_password,
)
from app.errors import N_, Forbidden, InvalidInput, NotFound, TooManyRequests
from app.i18n import current_locale

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
_COMMON_PASSWORDS = frozenset(
    {
        "1234567890",
        "12345678910",
        "0123456789",
        "123456789a",
        "password12",
        "password123",
        "password1234",
        "passw0rd123",
        "qwertyuiop",
        "qwerty12345",
        "1q2w3e4r5t",
        "iloveyou12",
        "abcdefghij",
        "aaaaaaaaaa",
        "letmein123",
        "welcome123",
        "changeme123",
    }
)
GENERIC_LOGIN_ERROR = N_("That email and password do not match an account.")


class LoginThrottled(TooManyRequests):
    """Too many failed attempts; carries ``errors`` like ``InvalidInput`` for forms."""

    default_message = N_(
        "Too many attempts. Wait 15 minutes and try again, or reset your password."
    )

    def __init__(self, message: str | None = None, **params: Any) -> None:
        super().__init__(message, **params)
        self.errors = {"email": self.message}


SIGNUPS_THROTTLED = N_(
    "Too many new accounts from this network in the last hour. Try again later, or log in "
    "if you already have an account."
)


class EmailTaken(InvalidInput):
    """Sign-up with an address that already has an account (see the module docstring)."""


# --- Users ---------------------------------------------------------------------------


def password_problem(password: str, email: str = "") -> str | None:
    """The policy: 10–1024 characters, not the email (or its name part), not a classic."""
    if not password:
        return N_("Choose a password.")
    if len(password) < MIN_PASSWORD:
        return N_("Use at least 10 characters.")
    if len(password) > MAX_PASSWORD:
        return N_("Use at most 1024 characters.")
    low = password.strip().lower()
    if email:
        local = email.split("@", 1)[0]
        if low in (email.lower(), local.lower()) or low.startswith(email.lower()):
            return N_("Your password must not be your email address.")
    if low in _COMMON_PASSWORDS or len(set(low)) < 3:
        return N_("This password is too easy to guess; choose another.")
    return None


def user_by_email(session: Session, email: str) -> User | None:
    return session.exec(select(User).where(User.email == email)).first()


def register(
    session: Session,
    *,
    email: str,
    password: str,
    now: datetime,
    ip: str = "",
    role: str = Role.customer.value,
) -> User:
    """Create an account. Raises ``InvalidInput`` (``errors`` by field), ``EmailTaken``, or
    ``TooManyRequests`` when this address has created too many accounts recently."""
    errors: dict[str, str] = {}
    normal = ""
    try:
        normal = normalise_email(email)
    except EmailError as e:
        errors["email"] = e.message
    problem = password_problem(password or "", normal or (email or "").strip().lower())
    if problem:
        errors["password"] = problem
    if role not in {r.value for r in Role}:
        errors["role"] = N_("Unknown role.")
    if errors:
        raise InvalidInput(errors=errors)
    # Every sign-up past the checks above counts against the address (10 an hour), the
    # refused ones too: counted before the email is even looked up.
    if throttle.attempt(session, [(throttle.SIGNUP_ADDRESS, ip)], now) is None:
        raise LoginThrottled(SIGNUPS_THROTTLED)  # no account yet: no password to reset
    if user_by_email(session, normal) is not None:
        msg = N_(
            "This email can't be used for a new account. If it is yours, log in or reset your password."
        )
        raise EmailTaken(errors={"email": msg})
    user = User(
        email=normal,
        password_hash=hash_password(password),
        role=role,
        created_at=now,
        locale=current_locale(),  # notifications and emails in the language they signed up in
    )
    try:
        with session.begin_nested():  # two sign-ups with one email at once: one wins
            session.add(user)
            session.flush()
    except IntegrityError:
        msg = N_(
            "This email can't be used for a new account. If it is yours, log in or reset your password."
        )
        raise EmailTaken(errors={"email": msg}) from None
    audit(session, "account.created", now, actor=user, target=f"user:{user.id}", ip=ip, role=role)
    return user


def authenticate(
    session: Session, *, email: str, password: str, now: datetime, ip: str = ""
) -> User:
    """Check an email and password. Raises ``InvalidInput`` with one generic message, or
    ``LoginThrottled`` (a ``TooManyRequests``); neither reveals whether the email exists.

    Throttled per account (the normalised email, registered or not) and per address, in the
    database, so the limit holds across processes; failures count even if the caller's
    transaction rolls back.
    """
    normal = looks_like_email(email)
    if not normal or not password:
        errors = {}
        if not normal:
            errors["email"] = N_("Enter a valid email address, like name@example.com.")
        if not password:
            errors["password"] = N_("Enter your password.")
        raise InvalidInput(errors=errors)
    # Counted before the password is verified, so parallel guesses cannot all pass the check.
    tried = throttle.attempt(
        session, [(throttle.LOGIN_ACCOUNT, normal), (throttle.LOGIN_ADDRESS, ip)], now
    )
    if tried is None:
        audit_durably(session, "login.throttled", now, ip=ip, email=normal)
        raise LoginThrottled()
    user = user_by_email(session, normal)
    ok = verify_password(user.password_hash if user else None, password[:MAX_PASSWORD])
    if user is None or not ok:
        audit_durably(
            session,
            "login.failed",
            now,
            target=f"user:{user.id}" if user else "",
            ip=ip,
            email=normal,
        )
        raise InvalidInput(GENERIC_LOGIN_ERROR, errors={"password": GENERIC_LOGIN_ERROR})
    if not user.is_active:
        audit_durably(session, "login.disabled", now, target=f"user:{user.id}", ip=ip)
        raise Forbidden(N_("This account is disabled. Contact support to restore it."))
    tried.succeeded()  # a successful login does not count
    throttle.clear(session, throttle.LOGIN_ACCOUNT, normal)
    if needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
        session.add(user)
    return user


def audit_durably(session: Session, action: str, now: datetime, **fields: Any) -> None:
    """An audit event (``fields`` as ``audit.event`` takes them) that is kept even when the
    caller's transaction rolls back."""
    throttle.add_durably(session, audit_event(action, now, **fields))


# --- Sessions ------------------------------------------------------------------------


def open_session(
    session: Session,
    user: User,
    *,
    now: datetime,
    secret_key: str,
    old_cookie: str | None,
    ip: str,
    user_agent: str,
) -> tuple[str, int | None]:
    """Start a server-side session for ``user``; revoke the one ``old_cookie`` named (no
    session fixation). Returns the signed cookie value and the new row's id. The web
    layer (``app.accounts.login``) puts the cookie on the response."""
    old = session_from_cookie(session, old_cookie, now, secret_key)
    if old is not None:
        old.revoked_at = now
        session.add(old)
    cookie = create_session(session, user, now, secret_key, ip=ip, user_agent=user_agent)
    row = session.exec(
        select(UserSession)
        .where(UserSession.user_id == user.id)
        .order_by(col(UserSession.id).desc())
    ).first()
    audit(session, "login.succeeded", now, actor=user, target=f"user:{user.id}", ip=ip)
    return cookie, row.id if row else None


def close_session(
    session: Session, *, cookie: str | None, now: datetime, secret_key: str, ip: str
) -> None:
    """Log out: revoke the server-side row, so a copied cookie stops working everywhere."""
    row = session_from_cookie(session, cookie, now, secret_key)
    if row is not None:
        row.revoked_at = now
        session.add(row)
        user = session.get(User, row.user_id)
        audit(session, "logout", now, actor=user, target=f"user:{row.user_id}", ip=ip)


def inline_errors(*, mode: str, email: str, password: str) -> dict[str, str]:
    """What is wrong with the inline account fields before touching the database (field →
    msgid), so a form can show these together with its own validation errors."""
    errors: dict[str, str] = {}
    if mode not in ("signup", "login"):
        errors["account_mode"] = N_("Choose whether to create an account or log in.")
    normal = looks_like_email(email)
    if not normal:
        errors["email"] = N_("Enter a valid email address, like name@example.com.")
    if mode == "signup":
        problem = password_problem(password or "", normal or "")
        if problem:
            errors["password"] = problem
    elif not password:
        errors["password"] = N_("Enter your password.")
    return errors


def active_sessions(session: Session, user_id: int, now: datetime) -> list[UserSession]:
    rows = session.exec(
        select(UserSession)
        .where(UserSession.user_id == user_id, col(UserSession.revoked_at).is_(None))
        .order_by(col(UserSession.created_at).desc(), col(UserSession.id).desc())
    ).all()
    return [r for r in rows if not session_expired(r.expires_at, now)]


Revocable = TypeVar("Revocable", UserSession, ApiToken)


def revoke_own(
    session: Session,
    user: User,
    model: type[Revocable],
    row_id: int,
    now: datetime,
    *,
    kind: str,
    ip: str,
) -> Revocable:
    """Revoke one of the user's own live sessions or API tokens and audit it as
    ``<kind>.revoked``; another user's, a revoked or a missing row is not found."""
    row = session.get(model, row_id)
    if row is None or row.user_id != user.id or row.revoked_at is not None:
        raise NotFound()
    row.revoked_at = now
    session.add(row)
    audit(session, f"{kind}.revoked", now, actor=user, target=f"{kind}:{row.id}", ip=ip)
    return row


def revoke_session_of(
    session: Session, user: User, session_id: int, now: datetime, ip: str = ""
) -> UserSession:
    return revoke_own(session, user, UserSession, session_id, now, kind="session", ip=ip)


def revoke_other_sessions(
    session: Session, user: User, keep_id: int | None, now: datetime, ip: str = ""
) -> int:
    assert user.id is not None
    n = revoke_all_sessions(session, user.id, now, keep_id=keep_id)
    audit(
        session, "session.revoked_others", now, actor=user, target=f"user:{user.id}", ip=ip, count=n
    )
    return n
