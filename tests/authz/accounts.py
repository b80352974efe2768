"""Accounts: login/sign-up, the account page, reset links, staff audit/users, the API."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from app.accounts import twofactor
from app.accounts.models import ApiToken, PasswordResetToken, SshKey, User, UserSession
from app.accounts.security import sha256
from tests.authz import (
    FORBIDDEN,
    LOGIN,
    NOT_FOUND,
    OK,
    Ctx,
    Rule,
    customer_only,
    ops_only,
    owned,
    public,
    staff_only,
    status,
)

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1GKNqe27ZDMMBnYe0fdU1m/rgM/df9BcGpDiDuKfIb"


def _enrol_link(ctx: Ctx) -> dict[str, Any]:
    """A live enrolment link of the ops account without a second factor (as the CLI makes)."""
    assert ctx.unenrolled_staff is not None
    user = ctx.session.get(User, ctx.unenrolled_staff.id)
    assert user is not None
    secret_key = ctx.app.state.settings.secret_key
    return {"token": twofactor.new_enrolment_link(ctx.session, user, secret_key)}


def key_of_a(ctx: Ctx) -> dict[str, Any]:
    row = SshKey(
        user_id=ctx.a.id,
        name="a-laptop",
        key_type="ssh-ed25519",
        bits=256,
        public_key=ED25519,
        fingerprint="SHA256:" + secrets.token_hex(8),
        created_at=ctx.now,
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"key_id": row.id}


def token_of_a(ctx: Ctx) -> dict[str, Any]:
    raw = secrets.token_urlsafe(16)
    row = ApiToken(
        user_id=ctx.a.id, name="ci", prefix=raw[:12], token_hash=sha256(raw), created_at=ctx.now
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"token_id": row.id}


def session_of_a(ctx: Ctx) -> dict[str, Any]:
    row = UserSession(
        token_hash=sha256(secrets.token_urlsafe(16)),
        user_id=ctx.a.id,
        created_at=ctx.now,
        expires_at=ctx.now + timedelta(days=1),
    )
    ctx.session.add(row)
    ctx.session.flush()
    return {"session_id": row.id}


def reset_link_of_a(ctx: Ctx) -> dict[str, Any]:
    raw = secrets.token_urlsafe(32)
    ctx.session.add(
        PasswordResetToken(
            user_id=ctx.a.id,
            token_hash=sha256(raw),
            created_at=ctx.now,
            expires_at=ctx.now + timedelta(hours=1),
        )
    )
    return {"token": raw}


def user_a(ctx: Ctx) -> dict[str, Any]:
    return {"user_id": ctx.a.id}


S303 = status(303)  # the second sign-in step without its pending cookie → /login

RULES = [
    public("GET", "/login"),
    public("POST", "/login", note="empty form → 422 for everyone"),
    public("GET", "/signup"),
    public("POST", "/signup"),
    public("POST", "/logout"),
    public("GET", "/password/forgot"),
    public("POST", "/password/forgot"),
    public(
        "GET", "/password/reset/{token}", setup=reset_link_of_a, note="the token is the capability"
    ),
    public("POST", "/password/reset/{token}", setup=reset_link_of_a),
    customer_only("GET", "/account"),
    customer_only("POST", "/account/password"),
    customer_only("POST", "/account/email"),
    customer_only("POST", "/account/billing", data={"company": "Acme"}),
    customer_only("GET", "/account/2fa"),
    Rule(
        "POST",
        "/account/2fa/start",
        anon=LOGIN,
        customer=OK,
        sales=OK,
        ops=OK,
        unenrolled_staff=FORBIDDEN,
        note="staff without a second factor enrol only through an enrolment link",
    ),
    Rule(
        "POST",
        "/account/2fa/confirm",
        anon=LOGIN,
        customer=OK,
        sales=OK,
        ops=OK,
        unenrolled_staff=FORBIDDEN,
        data={"code": "000000"},
    ),
    Rule(
        "GET",
        "/account/2fa/enrol/{token}",
        anon=LOGIN,
        customer=NOT_FOUND,
        sales=NOT_FOUND,
        ops=NOT_FOUND,
        unenrolled_staff=OK,
        setup=_enrol_link,
        note="the link is the unenrolled staff account's own; for anyone else it does not exist",
    ),
    Rule(
        "POST",
        "/account/2fa/enrol/{token}",
        anon=LOGIN,
        customer=NOT_FOUND,
        sales=NOT_FOUND,
        ops=NOT_FOUND,
        unenrolled_staff=OK,
        setup=_enrol_link,
        data={"code": "000000"},
    ),
    customer_only("POST", "/account/2fa/recovery-codes", data={"code": "000000"}),
    customer_only("POST", "/account/2fa/disable", data={"password": "x", "code": "000000"}),
    Rule(
        "GET",
        "/login/2fa",
        anon=S303,
        customer=S303,
        sales=S303,
        ops=S303,
        note="without the signed pending-sign-in cookie everyone is sent back to /login",
    ),
    Rule("POST", "/login/2fa", anon=S303, customer=S303, sales=S303, ops=S303, data={"code": "1"}),
    customer_only("POST", "/account/sessions/revoke-others"),
    owned("POST", "/account/sessions/{session_id}/revoke", session_of_a),
    customer_only("POST", "/account/ssh-keys"),
    owned("POST", "/account/ssh-keys/{key_id}/rename", key_of_a, data={"name": "renamed"}),
    owned("POST", "/account/ssh-keys/{key_id}/delete", key_of_a),
    customer_only("POST", "/account/api-tokens"),
    owned("POST", "/account/api-tokens/{token_id}/revoke", token_of_a),
    staff_only("GET", "/staff"),
    ops_only("GET", "/staff/audit"),
    staff_only("GET", "/staff/users"),
    ops_only("POST", "/staff/users/{user_id}/disable", setup=user_a),
    ops_only("POST", "/staff/users/{user_id}/enable", setup=user_a),
    customer_only("GET", "/api/v1/me"),
    customer_only("GET", "/api/v1/ssh-keys"),
    customer_only("POST", "/api/v1/ssh-keys", json={"name": "x"}),
    owned("DELETE", "/api/v1/ssh-keys/{key_id}", key_of_a),
]

__all__ = ["RULES", "LOGIN", "NOT_FOUND", "OK", "Rule"]
