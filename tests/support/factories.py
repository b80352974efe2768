"""Test factories shared by every test package: put money on a balance (``fund``), place and
pay an order (``make_order``), hand it over (``deliver``).

One implementation each, so a change to a seam (say, how promotional credit is granted)
is made once for the whole suite."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import User
from app.ledger import service as ledger
from app.orders import ops
from app.orders import service as orders
from app.orders.models import Order


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


def ssh_public_key(comment: str = "test@laptop") -> str:
    """A fresh ed25519 public key line, as a customer pastes it."""
    key = Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{raw.decode()} {comment}"


def host_fingerprint(seed: str) -> str:
    """A well-formed SHA256 host-key fingerprint, stable per ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def make_order(
    engine: Engine,
    user: User,
    now: datetime,
    *,
    sku: str = "hgx-h100",
    nodes: int = 1,
    image: str = "ubuntu-24.04-cuda",
    private: bool = False,
    fund_cents: int | None = None,
    key: str = "k1",
    pay: bool = True,
    **notes: Any,
) -> Order:
    """An order placed through the real services (the deploy form's draft, create), funded
    with promotional credit and paid unless ``pay=False``; committed. Needs catalog stock."""
    data = {
        "sku": sku,
        "nodes": str(nodes),
        "image": image,
        "new_key_name": "laptop",
        "new_key_text": ssh_public_key(),
        "note_model_size": notes.get("model_size", "8B"),
        "note_token_budget": notes.get("token_budget", "20B tokens"),
        "note_node_count": str(nodes),
        "note_private_network": "1" if private else "",
        "note_comm_pattern": notes.get("comm", "DP all-reduce across nodes") if private else "",
        "note_free_text": notes.get("free_text", "Please install NCCL tests."),
    }
    draft, errors = orders.parse_draft(data)
    assert not errors, errors
    with Session(engine, expire_on_commit=False) as s:
        u = s.get(User, user.id)
        assert u is not None and u.id is not None
        order, _created = orders.create_order(s, user=u, draft=draft, idempotency_key=key, now=now)
        s.flush()
        assert order.id is not None
        if pay:
            need = order.monthly_total_cents if fund_cents is None else fund_cents
            if need:
                ledger.grant_promotion(
                    s,
                    user_id=u.id,
                    amount_cents=need,
                    reason="test balance",
                    now=now,
                    idempotency_key=f"fund-{key}",
                )
            orders.pay_order(s, user=u, order_id=order.id, idempotency_key=f"pay-{key}", now=now)
        s.commit()
        return order


def deliver(
    engine: Engine,
    order_id: int,
    now: datetime,
    *,
    actor: User | None = None,
    ip: str = "203.0.113.9",
    fingerprints: str | None = None,
) -> Order:
    """Ops hands a paid order over (credentials, then delivered: the hold posts); committed.
    ``actor`` defaults to an ops user (the first one, or a new one)."""
    with Session(engine, expire_on_commit=False) as s:
        staff = s.get(User, actor.id) if actor is not None else None
        if staff is None:
            staff = s.exec(select(User).where(User.role == "ops")).first()
        if staff is None:
            staff = User(
                email=f"ops-{secrets.token_hex(4)}@example.com",
                password_hash="x",
                role="ops",
                created_at=now,
            )
            s.add(staff)
            s.flush()
        ops.set_credentials(
            s,
            actor=staff,
            order_id=order_id,
            data=ops.CredentialsInput(
                ssh_user="ubuntu",
                hosts=[
                    ops.HostInput(
                        ip=ip, fingerprints=fingerprints or host_fingerprint(str(order_id))
                    )
                ],
            ),
            now=now,
        )
        ops.mark_delivered(s, actor=staff, order_id=order_id, now=now)
        s.commit()
        o = s.get(Order, order_id)
        assert o is not None
        return o
