"""Findings 5, 7 and 9: odd numbers are 422 with a message (never 500), simulation controls
on another customer's invoice are ops-only and audited, ``return_to`` is never echoed
unvalidated, the quote PDF is rendered once per version with a render limit."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.audit import AuditEvent
from app.accounts.models import User
from app.clock import FixedClock
from app.ledger import service as ledger
from app.orders.models import Order
from app.payments.models import Invoice
from app.quotes.pdf_cache import PdfCache, RendererBusy

ODD_MONEY = ["1e30", "-1e30", "9" * 30, "1e999999999", "²", "¹⁰", "١٢٣", "1_000", "NaN", "inf"]
ODD_INTS = ["²", "¹⁰", "١٢٣", "1e999999999", "9" * 30, "1_0"]


def _invoice(engine: Engine, user_id: int, now: Any) -> int:
    with Session(engine) as s:
        row = Invoice(
            provider_id=secrets.token_hex(8),
            user_id=user_id,
            amount_cents=500_00,
            currency="USDC",
            decimals=6,
            rate="1",
            due_units="500000000",
            address="0x" + secrets.token_hex(20),
            payment_uri="ethereum:0x0",
            created_at=now,
            expires_at=now + timedelta(minutes=15),
            monitoring_until=now + timedelta(hours=1),
            updated_at=now,
        )
        s.add(row)
        s.commit()
        assert row.id is not None
        return row.id


@pytest.mark.parametrize("amount", ODD_MONEY)
def test_odd_amounts_on_topups_are_422_with_a_message(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    amount: str,
) -> None:
    login(client, make_user())
    r = client.post("/topups/new", data={"amount": amount, "currency": "USDC"})
    assert r.status_code == 422
    assert 'aria-invalid="true"' in r.text
    with Session(engine) as s:
        assert s.exec(select(Invoice)).all() == []


def test_full_width_amounts_are_accepted(
    client: TestClient, login: Callable[..., Any], make_user: Callable[..., User], engine: Engine
) -> None:
    login(client, make_user())
    r = client.post("/topups/new", data={"amount": "２５００", "currency": "USDC"})
    assert r.status_code == 303
    with Session(engine) as s:
        assert s.exec(select(Invoice.amount_cents)).one() == 250_000


@pytest.mark.parametrize("amount", ["1e30", "9" * 30, "²", "1e999999999"])
def test_odd_amounts_on_the_order_topup_are_422(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    clock: FixedClock,
    amount: str,
) -> None:
    user = make_user()
    login(client, user)
    with Session(engine) as s:
        order = Order(
            user_id=user.id,
            idempotency_key=secrets.token_hex(8),
            sku_id="hgx-h100",
            quantity=1,
            image_id="ubuntu-22.04",
            unit_price_cents=100_00,
            monthly_total_cents=100_00,
            created_at=clock.now(),
        )
        s.add(order)
        s.commit()
        oid = order.id
    r = client.post(f"/orders/{oid}/topup", data={"amount": amount, "currency": "USDC"})
    assert r.status_code == 422


@pytest.mark.parametrize("amount", ["1e30", "-1e30", "9" * 30, "1e999999999", "²", "-١٢٣"])
def test_odd_amounts_on_the_staff_ledger_adjustment_are_422(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    amount: str,
) -> None:
    customer = make_user()
    login(client, make_user(role="ops"))
    r = client.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": amount, "reason": "probe", "key": secrets.token_hex(8)},
    )
    assert r.status_code == 422
    with Session(engine) as s:
        assert ledger.available_cents(s, customer.id) == 0


@pytest.mark.parametrize("q", ODD_INTS)
def test_odd_numbers_in_searches_are_not_500(
    client: TestClient, login: Callable[..., Any], make_user: Callable[..., User], q: str
) -> None:
    login(client, make_user(role="ops"))
    assert client.get("/staff/ops", params={"q": q}).status_code == 200
    assert client.get("/staff/quotes", params={"q": q}).status_code == 200
    assert client.get("/staff/quotes", params={"q": "Q" + q}).status_code == 200


@pytest.mark.parametrize("value", ODD_INTS)
def test_odd_numbers_in_ops_credentials_are_not_500(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    clock: FixedClock,
    value: str,
) -> None:
    customer = make_user()
    login(client, make_user(role="ops"))
    with Session(engine) as s:
        order = Order(
            user_id=customer.id,
            idempotency_key=secrets.token_hex(8),
            sku_id="hgx-h100",
            quantity=1,
            image_id="ubuntu-22.04",
            unit_price_cents=100_00,
            monthly_total_cents=100_00,
            created_at=clock.now(),
        )
        s.add(order)
        s.commit()
        oid = order.id
    r = client.post(
        f"/staff/ops/orders/{oid}/credentials",
        data={
            "count": "1",
            "ssh_port": value,
            "host_id_0": value,
            "ip_0": "10.0.0.1",
            "ssh_user": "ubuntu",
        },
    )
    assert r.status_code < 500


def test_sales_cannot_pay_a_customers_invoice(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    clock: FixedClock,
) -> None:
    alice = make_user()
    invoice_id = _invoice(engine, alice.id, clock.now())
    login(client, make_user(role="sales"))
    r = client.post(f"/topups/{invoice_id}/simulate", data={"action": "overpay"})
    assert r.status_code == 403
    assert "sim-panel" not in client.get(f"/topups/{invoice_id}").text
    with Session(engine) as s:
        assert ledger.available_cents(s, alice.id) == 0


def test_ops_may_simulate_on_a_customers_invoice_and_it_is_audited(
    client: TestClient,
    login: Callable[..., Any],
    make_user: Callable[..., User],
    engine: Engine,
    clock: FixedClock,
) -> None:
    alice = make_user()
    invoice_id = _invoice(engine, alice.id, clock.now())
    ops = make_user(role="ops")
    login(client, ops)
    r = client.post(f"/topups/{invoice_id}/simulate", data={"action": "pay_full"})
    assert r.status_code == 303
    with Session(engine) as s:
        assert ledger.available_cents(s, alice.id) == 500_00
        ev = s.exec(select(AuditEvent).where(AuditEvent.action == "topup.simulated")).one()
        assert ev.actor_id == ops.id and ev.target == f"invoice:{invoice_id}"


def test_return_to_is_never_echoed_unvalidated(
    client: TestClient, login: Callable[..., Any], make_user: Callable[..., User]
) -> None:
    login(client, make_user())
    evil = "javascript:alert(document.domain)"
    assert evil not in client.get("/topups/new", params={"return_to": evil}).text
    r = client.post("/topups/new", data={"amount": "abc", "currency": "USDC", "return_to": evil})
    assert r.status_code == 422 and "javascript:" not in r.text
    r = client.post(
        "/topups/new", data={"amount": "abc", "currency": "USDC", "return_to": "/orders/5/review"}
    )
    assert 'href="/orders/5/review"' in r.text or 'value="/orders/5/review"' in r.text


def test_pdf_cache_renders_once_per_version_and_limits_concurrency() -> None:
    cache = PdfCache(max_renders=1, wait_seconds=0.05)
    calls = []

    def render() -> bytes:
        calls.append(1)
        return b"%PDF-1"

    assert cache.get_or_render(("v1", "en"), render) == b"%PDF-1"
    assert cache.get_or_render(("v1", "en"), render) == b"%PDF-1"
    assert len(calls) == 1
    started, release = threading.Event(), threading.Event()

    def slow() -> bytes:
        started.set()
        release.wait(5)
        return b"%PDF-2"

    t = threading.Thread(target=cache.get_or_render, args=(("v2", "en"), slow))
    t.start()
    started.wait(5)
    with pytest.raises(RendererBusy) as busy:
        cache.get_or_render(("v3", "en"), render)
    assert busy.value.status_code == 503 and busy.value.headers["Retry-After"]
    release.set()
    t.join(5)
    assert cache.get_or_render(("v2", "en"), render) == b"%PDF-2"
