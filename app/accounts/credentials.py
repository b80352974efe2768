"""Accounts, part 2 — what proves it: the password (change, reset links), the login email,
API tokens, and ops disabling an account. Each change that could hand the account to
someone else signs out other sessions and revokes API tokens, and tells the owner by email.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from app.accounts import throttle
from app.accounts.auth import (
    MAX_PASSWORD,
    LoginThrottled,
    audit,
    audit_durably,
    password_problem,
    revoke_own,
    user_by_email,
)
from app.accounts.emails import EmailError, looks_like_email, normalise_email
from app.accounts.models import ApiToken, PasswordResetToken, User
from app.accounts.profile import clean_name
from app.accounts.security import (
    create_api_token,
    hash_password,
    revoke_all_sessions,
    sha256,
    verify_password,
)
from app.clock import utc
from app.errors import N_, Conflict, DomainError, Forbidden, InvalidInput, NotFound
from app.i18n import gettext
from app.notifications.service import enqueue_email

RESET_LIFETIME = timedelta(hours=1)
MAX_API_TOKENS = 20

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
    return _replace_password(
        session, user, new_password, now, "password.changed", ip, keep_session_id
    )


def _replace_password(
    session: Session,
    user: User,
    new_password: str,
    now: datetime,
    action: str,
    ip: str,
    keep_session_id: int | None = None,
) -> int:
    """Set the new password and end what the old one opened: the other sessions signed out,
    every API token revoked, open reset links voided; audited as ``action``, and the owner
    told by email. Returns how many sessions were signed out."""
    assert user.id is not None
    user.password_hash = hash_password(new_password)
    session.add(user)
    void_reset_tokens(session, user.id, now)
    n = revoke_all_sessions(session, user.id, now, keep_id=keep_session_id)
    tokens = revoke_all_api_tokens(session, user.id, now)
    audit(
        session,
        action,
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
    _replace_password(session, user, new_password, now, "password.reset", ip)
    throttle.clear(session, throttle.LOGIN_ACCOUNT, user.email)
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
    clean = clean_name(name)
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
    revoke_own(session, user, ApiToken, token_id, now, kind="apitoken", ip=ip)


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
    switch_active(session, user, active, now, actor=actor, ip=ip)
    return user


def switch_active(session: Session, user: User, active: bool, now: datetime, **how: Any) -> None:
    """Disable or re-enable ``user`` (ops on the staff page, or the CLI): disabling signs it
    out everywhere and revokes its API tokens. ``how``: the audit record's actor, ip or via."""
    assert user.id is not None
    user.is_active = active
    session.add(user)
    if not active:
        revoke_all_sessions(session, user.id, now)
        revoke_all_api_tokens(session, user.id, now)
    action = "user.enabled" if active else "user.disabled"
    audit(session, action, now, target=f"user:{user.id}", email=user.email, **how)


def is_domain_error(exc: BaseException) -> bool:
    return isinstance(exc, DomainError)
