"""Arrange orders through the real services: catalog stock, a balance, create, pay."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.orders.models import Order


def ssh_public_key() -> str:
    key = Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode() + " test@laptop"


def fingerprint(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def seed_catalog(engine: Engine, now: datetime) -> None:
    from app.catalog.seed import seed

    with Session(engine) as s:
        seed(s, now)
        s.commit()


def paid_order(
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
    **notes: Any,
) -> Order:
    from app.ledger import service as ledger
    from app.orders import service

    with Session(engine, expire_on_commit=False) as s:
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
        draft, errors = service.parse_draft(data)
        assert not errors, errors
        u = s.get(User, user.id)
        assert u is not None
        order, _created = service.create_order(s, user=u, draft=draft, idempotency_key=key, now=now)
        s.flush()
        need = order.monthly_total_cents if fund_cents is None else fund_cents
        if need:
            ledger.grant_promotion(
                s,
                user_id=u.id or 0,
                amount_cents=need,
                reason="test balance",
                now=now,
                idempotency_key=f"fund-{key}",
            )
        service.pay_order(s, user=u, order_id=order.id or 0, idempotency_key=f"pay-{key}", now=now)
        s.commit()
        return order
