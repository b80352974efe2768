"""Accounts: sign-up, login, sessions, password reset, email change, SSH keys, API tokens.

Services take ``session`` and ``now`` and never commit (the request owns the transaction).
Errors are ``app.errors`` domain errors; ``InvalidInput.errors`` maps form fields to
messages so every form can show them next to the right field.

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

import logging
import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from app import pdfdoc
from app.accounts import throttle
from app.accounts.audit import AuditEvent
from app.accounts.emails import EmailError, looks_like_email, normalise_email
from app.accounts.models import (
    ApiToken,
    PasswordResetToken,
    Role,
    SshKey,
    User,
    UserSession,
)
from app.accounts.security import (
    create_api_token,
    create_session,
    hash_password,
    needs_rehash,
    revoke_all_sessions,
    session_expired,
    session_from_cookie,
    sha256,
    verify_password,
)
from app.accounts.sshkeys import SshKeyError, parse_public_key
from app.clock import utc
from app.errors import N_, Conflict, DomainError, Forbidden, InvalidInput, NotFound, TooManyRequests
from app.text import multi_line, single_line

log = logging.getLogger("app.accounts")

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
RESET_LIFETIME = timedelta(hours=1)
MAX_SSH_KEYS = 50
MAX_API_TOKENS = 20
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
        raise LoginThrottled()
    if user_by_email(session, normal) is not None:
        msg = N_(
            "This email can't be used for a new account. If it is yours, log in or reset your password."
        )
        raise EmailTaken(errors={"email": msg})
    from app.i18n import current_locale

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


def audit(
    session: Session,
    action: str,
    now: datetime,
    *,
    actor: Any = None,
    target: str = "",
    ip: str = "",
    **details: Any,
) -> None:
    from app.accounts.audit import record

    record(session, action=action, now=now, actor=actor, target=target, ip=ip, **details)


def audit_durably(
    session: Session,
    action: str,
    now: datetime,
    *,
    actor: Any = None,
    target: str = "",
    ip: str = "",
    **details: Any,
) -> None:
    """An audit event that is kept even when the caller's transaction rolls back."""
    import json

    throttle.add_durably(
        session,
        AuditEvent(
            at=now,
            actor_id=getattr(actor, "id", None),
            actor_email=getattr(actor, "email", "") or "",
            action=action,
            target=target,
            ip=ip[:64],
            details=json.dumps(details, default=str, ensure_ascii=False, sort_keys=True),
        ),
    )


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


def revoke_session_of(
    session: Session, user: User, session_id: int, now: datetime, ip: str = ""
) -> UserSession:
    row = session.get(UserSession, session_id)
    if row is None or row.user_id != user.id or row.revoked_at is not None:
        raise NotFound()
    row.revoked_at = now
    session.add(row)
    audit(session, "session.revoked", now, actor=user, target=f"session:{row.id}", ip=ip)
    return row


def revoke_other_sessions(
    session: Session, user: User, keep_id: int | None, now: datetime, ip: str = ""
) -> int:
    assert user.id is not None
    n = revoke_all_sessions(session, user.id, now, keep_id=keep_id)
    audit(
        session, "session.revoked_others", now, actor=user, target=f"user:{user.id}", ip=ip, count=n
    )
    return n


# --- Password and email changes ---------------------------------------------------------


def _check_current_password(
    session: Session, user: User, password: str, now: datetime, field: str, ip: str
) -> None:
    assert user.id is not None
    tried = throttle.attempt(session, [(throttle.PASSWORD_CHECK_USER, str(user.id))], now)
    if tried is None:
        raise LoginThrottled()
    if not verify_password(user.password_hash, (password or "")[:MAX_PASSWORD]):
        audit_durably(
            session, "password.check_failed", now, actor=user, target=f"user:{user.id}", ip=ip
        )
        raise InvalidInput(errors={field: N_("Your current password is not right.")})
    tried.succeeded()


def change_password(
    session: Session,
    user: User,
    *,
    current_password: str,
    new_password: str,
    now: datetime,
    keep_session_id: int | None = None,
    ip: str = "",
) -> int:
    """Change the password (current one required); other sessions are signed out."""
    problem = password_problem(new_password or "", user.email)
    if problem:
        # Check the current password first only if given, so a typo there is reported too.
        raise InvalidInput(errors={"new_password": problem})
    _check_current_password(session, user, current_password, now, "current_password", ip)
    user.password_hash = hash_password(new_password)
    session.add(user)
    assert user.id is not None
    n = revoke_all_sessions(session, user.id, now, keep_id=keep_session_id)
    tokens = revoke_all_api_tokens(session, user.id, now)
    void_reset_tokens(session, user.id, now)
    audit(
        session,
        "password.changed",
        now,
        actor=user,
        target=f"user:{user.id}",
        ip=ip,
        sessions_revoked=n,
        api_tokens_revoked=tokens,
    )
    _mail(
        session,
        user.email,
        N_("Your GPU Nodes password was changed"),
        N_(
            "The password of your GPU Nodes account was just changed. If this was not you, reset it now and contact support."
        ),
        now,
    )
    return n


def change_email(
    session: Session, user: User, *, new_email: str, password: str, now: datetime, ip: str = ""
) -> User:
    """Change the login email (password required). The old address is told."""
    try:
        normal = normalise_email(new_email)
    except EmailError as e:
        raise InvalidInput(errors={"new_email": e.message}) from None
    if normal == user.email:
        raise InvalidInput(errors={"new_email": N_("That is already your email address.")})
    _check_current_password(session, user, password, now, "email_password", ip)
    tried = throttle.attempt(session, [(throttle.EMAIL_TAKEN_USER, str(user.id))], now)
    if tried is None:
        raise LoginThrottled()  # asking which addresses are registered, again and again
    if user_by_email(session, normal) is not None:
        raise InvalidInput(
            errors={"new_email": N_("This email can't be used. Choose another address.")}
        )
    tried.succeeded()  # only the "taken" answers count
    old = user.email
    user.email = normal
    session.add(user)
    assert user.id is not None
    # A reset link mailed to the old address must not work after the change.
    void_reset_tokens(session, user.id, now)
    session.flush()
    audit(
        session,
        "email.changed",
        now,
        actor=user,
        target=f"user:{user.id}",
        ip=ip,
        old=old,
        new=normal,
    )
    _mail(
        session,
        old,
        N_("Your GPU Nodes email was changed"),
        N_(
            "The login email of your GPU Nodes account was changed to another address. If this was not you, contact support now."
        ),
        now,
    )
    return user


def _mail(session: Session, to: str, subject: str, body: str, now: datetime, **params: str) -> None:
    from app.i18n import gettext
    from app.notifications.service import enqueue_email

    enqueue_email(
        session,
        to=to,
        subject=gettext(subject),
        body=gettext(body).format(**params) if params else gettext(body),
        now=now,
        kind="account",
    )


# --- Password reset -----------------------------------------------------------------------


def request_password_reset(
    session: Session, *, email: str, base_url: str, now: datetime, ip: str = ""
) -> None:
    """Email a single-use link valid for an hour, if the account exists. Says nothing
    either way (the page shows the same text); throttled per account and address."""
    normal = looks_like_email(email)
    if not normal:
        raise InvalidInput(
            errors={"email": N_("Enter a valid email address, like name@example.com.")}
        )
    # Per requester: an address may ask 3 times an hour for one account (and 10 overall),
    # so strangers asking for a victim's resets cannot use up the victim's own requests.
    # A looser per-account cap stops anyone mail-bombing one inbox from many addresses.
    requester = f"{ip}\x00{normal}"
    checks = [
        (throttle.RESET_ADDRESS, ip),
        (throttle.RESET_REQUESTER, requester),
        (throttle.RESET_ACCOUNT, normal),
    ]
    if throttle.attempt(session, checks, now) is None:
        return  # silently: the page reads the same whether or not we sent anything
    user = user_by_email(session, normal)
    if user is None or not user.is_active:
        audit(session, "password.reset_requested", now, ip=ip, known=False)
        return
    raw = secrets.token_urlsafe(32)
    assert user.id is not None
    session.add(
        PasswordResetToken(
            user_id=user.id,
            token_hash=sha256(raw),
            created_at=now,
            expires_at=now + RESET_LIFETIME,
            ip=ip[:64],
        )
    )
    link = base_url.rstrip("/") + "/password/reset/" + raw
    _mail(
        session,
        user.email,
        N_("Reset your GPU Nodes password"),
        N_(
            "Someone asked to reset the password of your GPU Nodes account. To choose a new password, open this link within one hour (it works once):\n\n{link}\n\nIf this was not you, ignore this email; your password stays as it is."
        ),
        now,
        link=link,
    )
    audit(session, "password.reset_requested", now, target=f"user:{user.id}", ip=ip, known=True)


def reset_token_row(session: Session, raw: str, now: datetime) -> PasswordResetToken | None:
    if not raw or len(raw) > 200:
        return None
    row = session.exec(
        select(PasswordResetToken).where(PasswordResetToken.token_hash == sha256(raw))
    ).first()
    if row is None or row.used_at is not None or utc(row.expires_at) <= now:
        return None
    user = session.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    return row


def reset_password(
    session: Session, *, token: str, new_password: str, now: datetime, ip: str = ""
) -> User:
    """Use a reset token once: set the password, burn every open token of the user and
    sign out every session. Raises ``NotFound`` for a used/expired/unknown token."""
    row = reset_token_row(session, token, now)
    if row is None:
        raise InvalidLink()
    user = session.get(User, row.user_id)
    assert user is not None and user.id is not None
    problem = password_problem(new_password or "", user.email)
    if problem:
        raise InvalidInput(errors={"password": problem})
    user.password_hash = hash_password(new_password)
    session.add(user)
    void_reset_tokens(session, user.id, now)
    n = revoke_all_sessions(session, user.id, now)
    tokens = revoke_all_api_tokens(session, user.id, now)
    throttle.clear(session, throttle.LOGIN_ACCOUNT, user.email)
    audit(
        session,
        "password.reset",
        now,
        actor=user,
        target=f"user:{user.id}",
        ip=ip,
        sessions_revoked=n,
        api_tokens_revoked=tokens,
    )
    _mail(
        session,
        user.email,
        N_("Your GPU Nodes password was changed"),
        N_(
            "The password of your GPU Nodes account was just changed. If this was not you, reset it now and contact support."
        ),
        now,
    )
    return user


def void_reset_tokens(session: Session, user_id: int, now: datetime) -> int:
    """Burn every open reset link of the user (after a password or email change)."""
    rows = session.exec(
        select(PasswordResetToken).where(
            PasswordResetToken.user_id == user_id, col(PasswordResetToken.used_at).is_(None)
        )
    ).all()
    for row in rows:
        row.used_at = now
        session.add(row)
    return len(rows)


def revoke_all_api_tokens(session: Session, user_id: int, now: datetime) -> int:
    """A password change or reset revokes every API token (they were minted under the old
    password; whoever held the account then may hold them)."""
    rows = api_tokens_for(session, user_id)
    for tok in rows:
        tok.revoked_at = now
        session.add(tok)
    return len(rows)


class InvalidLink(NotFound):
    code = "invalid_link"
    default_message = N_("This reset link is invalid, already used or expired. Ask for a new one.")


# --- SSH keys -------------------------------------------------------------------------


def ssh_keys_for(session: Session, user_id: int) -> list[SshKey]:
    return list(
        session.exec(
            select(SshKey)
            .where(SshKey.user_id == user_id)
            .order_by(col(SshKey.created_at), col(SshKey.id))
        ).all()
    )


_KEY_CHOICES = (
    select(col(SshKey.id), col(SshKey.name), col(SshKey.public_key), col(SshKey.fingerprint))
    .where(col(SshKey.user_id) == bindparam("uid"))
    .order_by(col(SshKey.created_at), col(SshKey.id))
)


def ssh_key_choices(session: Session, user_id: int) -> list[Any]:
    """The user's saved keys as plain rows (``id``, ``name``, ``public_key``,
    ``fingerprint``), in ``ssh_keys_for``'s order: one plain read, no ORM objects (the
    checkout's)."""
    return list(session.connection().execute(_KEY_CHOICES, {"uid": user_id}).all())


def ssh_key_of(session: Session, user: User, key_id: int) -> SshKey:
    """The user's key by id, or ``NotFound`` (also for other people's keys)."""
    row = session.get(SshKey, key_id)
    if row is None or row.user_id != user.id:
        raise NotFound()
    return row


def _clean_name(name: str | None) -> str:
    return single_line(name, 80)


def add_ssh_key(
    session: Session, user: User, name: str, text: str, now: datetime, ip: str = ""
) -> SshKey:
    """Parse and save a public key. Raises ``InvalidInput`` with ``errors`` on
    ``public_key``/``name``; a pasted private key is refused and never kept anywhere."""
    try:
        parsed = parse_public_key(text)
    except SshKeyError as e:
        raise InvalidInput(e.message, errors={"public_key": e.message}, **e.params) from None  # type: ignore[arg-type]
    assert user.id is not None
    clean = _clean_name(name) or parsed.comment or f"{parsed.label} key"
    if session.exec(
        select(SshKey).where(SshKey.user_id == user.id, SshKey.fingerprint == parsed.fingerprint)
    ).first():
        raise InvalidInput(errors={"public_key": N_("You have already saved this key.")})
    count = session.exec(select(func.count()).where(SshKey.user_id == user.id)).one()
    if int(count) >= MAX_SSH_KEYS:
        raise InvalidInput(
            errors={"public_key": N_("You can keep at most 50 keys. Delete one first.")}
        )
    row = SshKey(
        user_id=user.id,
        name=clean,
        key_type=parsed.key_type,
        bits=parsed.bits,
        public_key=parsed.public_key,
        fingerprint=parsed.fingerprint,
        created_at=now,
    )
    try:
        with session.begin_nested():  # the same key added twice at once: one wins
            session.add(row)
            session.flush()
    except IntegrityError:
        raise InvalidInput(errors={"public_key": N_("You have already saved this key.")}) from None
    audit(
        session,
        "sshkey.added",
        now,
        actor=user,
        target=f"sshkey:{row.id}",
        ip=ip,
        fingerprint=parsed.fingerprint,
        type=parsed.key_type,
    )
    return row


def rename_ssh_key(session: Session, user: User, key_id: int, name: str, now: datetime) -> SshKey:
    row = ssh_key_of(session, user, key_id)
    clean = _clean_name(name)
    if not clean:
        raise InvalidInput(errors={"name": N_("Give the key a name.")})
    row.name = clean
    session.add(row)
    return row


def delete_ssh_key(
    session: Session, user: User, key_id: int, now: datetime | None = None, ip: str = ""
) -> None:
    row = ssh_key_of(session, user, key_id)
    fp = row.fingerprint
    session.delete(row)
    session.flush()
    if now is not None:
        audit(
            session,
            "sshkey.deleted",
            now,
            actor=user,
            target=f"sshkey:{key_id}",
            ip=ip,
            fingerprint=fp,
        )


# --- API tokens -------------------------------------------------------------------------


@dataclass
class NewToken:
    row: ApiToken
    secret: str  # shown once


def api_tokens_for(session: Session, user_id: int) -> list[ApiToken]:
    return list(
        session.exec(
            select(ApiToken)
            .where(ApiToken.user_id == user_id, col(ApiToken.revoked_at).is_(None))
            .order_by(col(ApiToken.created_at).desc(), col(ApiToken.id).desc())
        ).all()
    )


def new_api_token(session: Session, user: User, name: str, now: datetime, ip: str = "") -> NewToken:
    clean = _clean_name(name)
    if not clean:
        raise InvalidInput(
            errors={"token_name": N_("Name the token, e.g. the machine that uses it.")}
        )
    assert user.id is not None
    # Lock the owner's row so parallel creations count one after another (PostgreSQL).
    session.exec(select(User.id).where(User.id == user.id).with_for_update()).first()
    if len(api_tokens_for(session, user.id)) >= MAX_API_TOKENS:
        raise InvalidInput(
            errors={"token_name": N_("You can keep at most 20 tokens. Revoke one first.")}
        )
    row, raw = create_api_token(session, user, clean, now)
    audit(
        session,
        "apitoken.created",
        now,
        actor=user,
        target=f"apitoken:{row.id}",
        ip=ip,
        prefix=row.prefix,
    )
    return NewToken(row=row, secret=raw)


def revoke_api_token(
    session: Session, user: User, token_id: int, now: datetime, ip: str = ""
) -> None:
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != user.id or row.revoked_at is not None:
        raise NotFound()
    row.revoked_at = now
    session.add(row)
    audit(session, "apitoken.revoked", now, actor=user, target=f"apitoken:{row.id}", ip=ip)


# --- Staff ------------------------------------------------------------------------------


def set_active(
    session: Session, actor: User, user_id: int, active: bool, now: datetime, ip: str = ""
) -> User:
    """Ops disable or re-enable an account. Disabling signs it out everywhere and revokes
    its API tokens. Ops cannot disable themselves."""
    if not actor.is_ops:
        raise Forbidden(N_("Only operations staff can do this."))
    user = session.get(User, user_id)
    if user is None:
        raise NotFound()
    if user.id == actor.id and not active:
        raise Conflict(N_("You cannot disable your own account."))
    user.is_active = active
    session.add(user)
    if not active:
        assert user.id is not None
        revoke_all_sessions(session, user.id, now)
        for tok in api_tokens_for(session, user.id):
            tok.revoked_at = now
            session.add(tok)
    audit(
        session,
        "user.enabled" if active else "user.disabled",
        now,
        actor=actor,
        target=f"user:{user.id}",
        ip=ip,
        email=user.email,
    )
    return user


def is_domain_error(exc: BaseException) -> bool:
    return isinstance(exc, DomainError)


# --- Billing details (printed on receipts) ---------------------------------------------

BILLING_LIMITS = {"company": 120, "billing_address": 500, "tax_id": 64}


_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")


def _printable_only(text: str | None) -> str:
    """Without terminal escape sequences (``ESC[31m`` whole), other controls (but line
    breaks and tabs, which the callers fold) and format characters (zero-width spaces and
    joiners, bidi marks, soft hyphens, BOM)."""
    text = _ANSI_ESCAPE.sub("", text or "")
    return "".join(
        ch for ch in text if ch in "\n\r\t" or unicodedata.category(ch) not in ("Cc", "Cf")
    )


def update_billing(
    session: Session,
    user: User,
    *,
    company: str,
    billing_address: str,
    tax_id: str,
    now: datetime,
    ip: str = "",
) -> User:
    """Company, address and tax id for receipts issued from now on (issued ones keep theirs).

    Terminal escape sequences, control and zero-width characters are removed; characters
    the receipt PDF cannot print (``app.pdfdoc.unprintable``) are refused, named."""
    values = {
        "company": single_line(_printable_only(company)),
        # The address keeps its line breaks; blank lines and runs of spaces go.
        "billing_address": "\n".join(
            single_line(line)
            for line in multi_line(_printable_only(billing_address)).split("\n")
            if line.strip()
        ),
        "tax_id": single_line(_printable_only(tax_id)),
    }
    for name, limit in BILLING_LIMITS.items():
        if len(values[name]) > limit:
            raise InvalidInput(N_("Use at most {n} characters."), field=name, n=limit)
        refused = pdfdoc.unprintable(values[name])
        if refused:
            raise InvalidInput(
                N_(
                    "Receipts cannot print these characters: {chars}. Write this in Latin, Greek, Cyrillic or Chinese letters."
                ),
                field=name,
                chars=pdfdoc.describe(refused),
            )
    if values["billing_address"].count("\n") > 5:
        raise InvalidInput(N_("Use at most six lines."), field="billing_address")
    for name, value in values.items():
        setattr(user, name, value)
    session.add(user)
    audit(session, "account.billing", now, actor=user, target=f"user:{user.id}", ip=ip)
    session.flush()
    return user
