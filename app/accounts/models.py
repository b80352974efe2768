"""Users, server-side sessions, API tokens, SSH keys, reset tokens and throttling rows."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, Column, Index, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.accounts import policy
from app.db import UTCDateTime


class Role(StrEnum):
    customer = "customer"
    sales = "sales"
    ops = "ops"


STAFF_ROLES = (Role.sales, Role.ops)


class User(SQLModel, table=True):
    __tablename__ = "users"
    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(sa_column=Column(String(254), unique=True, nullable=False, index=True))
    password_hash: str = Field(max_length=255)
    role: str = Field(default=Role.customer.value, max_length=16, index=True)
    name: str = Field(default="", max_length=120)
    company: str = Field(default="", max_length=120)
    # Billing details printed on receipts (snapshotted into each receipt when it is issued).
    billing_address: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    tax_id: str = Field(default="", max_length=64)
    locale: str = Field(default="en", max_length=8)
    # The browser's IANA time zone (the ``tz`` cookie) at the last sign-in or language switch:
    # emails give dates in it. "" = unknown: UTC, labelled.
    time_zone: str = Field(default="", max_length=64)
    is_active: bool = True
    # Two-factor sign-in (TOTP, RFC 6238). ``totp_pending_secret`` is the secret shown during
    # enrolment until the first code confirms it; ``totp_last_step`` refuses a code twice.
    totp_secret: str = Field(default="", max_length=64)
    totp_pending_secret: str = Field(default="", max_length=64)
    totp_enabled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    totp_last_step: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    created_at: datetime = Field(sa_type=UTCDateTime)

    # Powers, not just roles: answered by ``app.accounts.policy`` (a staff account without
    # its required second factor has none of them).
    @property
    def is_staff(self) -> bool:
        return policy.acts_as(self, Role.sales.value, Role.ops.value)

    @property
    def is_ops(self) -> bool:
        return policy.acts_as(self, Role.ops.value)


def _sha256_digest() -> Any:
    """A column for a SHA-256 hex digest (64 characters), unique: a secret is stored only as
    its digest (a new column each call: a table cannot share another's)."""
    return Field(sa_column=Column(String(64), unique=True, nullable=False))


class UserOwned(SQLModel):
    """The first two columns of a row that belongs to one user."""

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True)


class UserSession(SQLModel, table=True):
    """A login. The cookie carries a signed random id; only its SHA-256 is stored."""

    __tablename__ = "user_sessions"
    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = _sha256_digest()
    user_id: int = Field(foreign_key="users.id", index=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ip: str = Field(default="", max_length=64)
    user_agent: str = Field(default="", max_length=256)


class ApiToken(UserOwned, table=True):
    """A bearer token for the JSON API. Shown once; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"
    name: str = Field(max_length=80)
    prefix: str = Field(max_length=12)
    token_hash: str = _sha256_digest()
    created_at: datetime = Field(sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class SshKey(UserOwned, table=True):
    """An SSH public key a customer saved for their nodes (never a private key)."""

    __tablename__ = "ssh_keys"
    __table_args__ = (UniqueConstraint("user_id", "fingerprint", name="uq_ssh_keys_user_fp"),)
    name: str = Field(max_length=80)
    key_type: str = Field(max_length=40)  # e.g. "ssh-ed25519"
    bits: int
    public_key: str = Field(sa_column=Column(Text, nullable=False))  # "type base64", no comment
    fingerprint: str = Field(max_length=64)  # "SHA256:..." as ssh-keygen -lf prints it
    created_at: datetime = Field(sa_type=UTCDateTime)

    @property
    def type_label(self) -> str:
        return {
            "ssh-ed25519": "ED25519",
            "ssh-rsa": "RSA",
            "ecdsa-sha2-nistp256": "ECDSA",
            "ecdsa-sha2-nistp384": "ECDSA",
            "ecdsa-sha2-nistp521": "ECDSA",
        }.get(self.key_type, self.key_type)


class PasswordResetToken(UserOwned, table=True):
    """A single-use, expiring password reset link. Only the SHA-256 of the token is stored."""

    __tablename__ = "password_reset_tokens"
    token_hash: str = _sha256_digest()
    created_at: datetime = Field(sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ip: str = Field(default="", max_length=64)


class AuthFailure(SQLModel, table=True):
    """One failed (or throttled) attempt, counted per key inside a sliding window.

    ``key`` is ``"<scope>:<sha256>"`` of the normalised email or the client address, so
    the table never holds what people typed (users sometimes type a password into the
    email field). Rows live in the shared database, so the limit holds across processes.
    """

    __tablename__ = "auth_failures"
    __table_args__ = (Index("ix_auth_failures_key_at", "key", "at"),)
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=80)
    at: datetime = Field(sa_type=UTCDateTime)


class RecoveryCode(UserOwned, table=True):
    """One-time codes for signing in without the authenticator app. Only SHA-256 stored."""

    __tablename__ = "recovery_codes"
    code_hash: str = _sha256_digest()
    created_at: datetime = Field(sa_type=UTCDateTime)
    used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
