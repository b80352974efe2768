"""Accounts, part 3 — what the customer keeps with us: SSH keys for their nodes and the
billing details printed on receipts (cleaned and checked against what the PDF can print)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from app import pdfdoc
from app.accounts.auth import audit
from app.accounts.models import SshKey, User
from app.accounts.sshkeys import SshKeyError, parse_public_key
from app.errors import N_, InvalidInput, NotFound
from app.text import multi_line, printable_only, single_line

MAX_SSH_KEYS = 50

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


def clean_name(name: str | None) -> str:
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
    clean = clean_name(name) or parsed.comment or f"{parsed.label} key"
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
    clean = clean_name(name)
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


# --- Billing details (printed on receipts) ---------------------------------------------

BILLING_LIMITS = {"company": 120, "billing_address": 500, "tax_id": 64}


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
        "company": single_line(printable_only(company)),
        # The address keeps its line breaks; blank lines and runs of spaces go.
        "billing_address": "\n".join(
            single_line(line)
            for line in multi_line(printable_only(billing_address)).split("\n")
            if line.strip()
        ),
        "tax_id": single_line(printable_only(tax_id)),
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
