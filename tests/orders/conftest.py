"""Helpers for the checkout tests: stock, money, SSH keys, the ledger invariants."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.clock import FixedClock
from tests.support import factories


def new_public_key(comment: str = "me@laptop") -> str:
    raw = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return f"{raw} {comment}"


@pytest.fixture
def pubkey() -> str:
    return new_public_key()


@pytest.fixture
def stock(engine: Engine, clock: FixedClock) -> Callable[..., None]:
    """Put ``n`` available nodes of a SKU in stock (lead time 2 business days)."""

    def _stock(sku_id: str = "hgx-b200", n: int = 2) -> None:
        from app.catalog import service as catalog

        with Session(engine, expire_on_commit=False) as s:
            for _ in range(n):
                catalog.add_node(s, sku_id=sku_id, now=clock.now())
            s.commit()

    return _stock


@pytest.fixture
def fund(engine: Engine, clock: FixedClock) -> Callable[[User, int], None]:
    def _fund(user: User, cents: int) -> None:
        factories.fund(engine, user, cents, clock.now())

    return _fund


@pytest.fixture
def balances(engine: Engine) -> Callable[[User], tuple[int, int]]:
    def _b(user: User) -> tuple[int, int]:
        from app.ledger import service as ledger

        assert user.id is not None
        with Session(engine) as s:
            return ledger.available_cents(s, user.id), ledger.held_cents(s, user.id)

    return _b


@pytest.fixture
def ledger_ok(engine: Engine) -> Callable[[], None]:
    def _check() -> None:
        from app.reconcile import run_checks

        with Session(engine) as s:
            violations = run_checks(s)
        assert violations == [], violations

    return _check


def form_value(html: str, name: str) -> str:
    m = re.search(rf'<input[^>]*name="{re.escape(name)}"[^>]*value="([^"]*)"', html)
    assert m, f"no field {name}"
    return m.group(1)


def deploy_form(client: Any, **over: Any) -> dict[str, Any]:
    """GET /deploy and build the form as a browser would send it."""
    r = client.get("/deploy", params={k: v for k, v in over.pop("query", {}).items()})
    assert r.status_code == 200, r.text
    data: dict[str, Any] = {
        "idempotency_key": form_value(r.text, "idempotency_key"),
        "csrf_token": "test-csrf-token",
        "sku": "hgx-b200",
        "nodes": "1",
        "image": "ubuntu-24.04-cuda",
        "new_key_name": "laptop",
        "new_key_text": new_public_key(),
        "sizing": "",
        "quote": "",
    }
    data.update(over)
    return data
