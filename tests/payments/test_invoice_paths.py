"""Every invoice path and what it credits; replays, forged signatures, out-of-order events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from app.clock import FixedClock
from app.ledger import service as ledger
from app.ledger.models import JournalEntry
from app.ledger.postings import cents_for_crypto
from app.payments import service as payments
from app.reconcile import run_checks

from .conftest import Provider


def balance(engine: Engine, user_id: int) -> int:
    with Session(engine) as s:
        return ledger.available_cents(s, user_id)


def credits(engine: Engine) -> int:
    with Session(engine) as s:
        return int(
            s.exec(
                select(func.count()).select_from(JournalEntry).where(JournalEntry.kind == "topup")
            ).one()
        )


def expire(engine: Engine, clock: FixedClock) -> int:
    with Session(engine) as s:
        n = payments.expire_due(s, clock.now())
        s.commit()
        return n


def assert_clean(engine: Engine) -> None:
    with Session(engine) as s:
        assert run_checks(s) == []


@pytest.fixture
def customer(make_user: Callable[..., Any]) -> Any:
    return make_user()


@pytest.mark.parametrize("currency", ["BTC", "ETH", "USDT", "USDC"])
def test_paid_in_full(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, currency: str
) -> None:
    inv = topup(customer.id, 250_000, currency)
    due = int(inv.due_units)
    provider.pay(inv.id, due, confirmed=False)
    assert provider.notify(inv.id, "InvoiceReceivedPayment")["status"] == "Processing"
    assert balance(engine, customer.id) == 0  # not confirmed yet
    provider.confirm(inv.id)
    out = provider.notify(inv.id, "InvoiceSettled")
    assert (out["status"], out["exception"], out["credited"]) == ("Settled", "", True)
    assert balance(engine, customer.id) == 250_000
    assert provider.invoice(inv.id).credited_cents == 250_000
    assert_clean(engine)


def test_overpaid_credits_excess_at_locked_rate(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    due = int(inv.due_units)
    provider.pay(inv.id, due + 50_000)  # 0.0005 BTC extra
    out = provider.notify(inv.id, "InvoiceSettled")
    assert (out["status"], out["exception"]) == ("Settled", "PaidOver")
    assert balance(engine, customer.id) == 100_000 + cents_for_crypto(50_000, inv.rate, 8)
    assert_clean(engine)


def test_partial_then_expired_credits_what_was_received_when_window_closes(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, clock: FixedClock
) -> None:
    inv = topup(customer.id, 100_000, "USDC")
    half = int(inv.due_units) // 2
    provider.pay(inv.id, half)
    out = provider.notify(inv.id, "InvoiceReceivedPayment")
    assert (out["status"], out["exception"]) == ("New", "PaidPartial")
    clock.advance(timedelta(minutes=15))
    expire(engine, clock)
    inv2 = provider.invoice(inv.id)
    assert (inv2.status, inv2.exception_status, inv2.final) == ("Expired", "PaidPartial", False)
    assert balance(engine, customer.id) == 0  # still watching for the rest
    clock.advance(timedelta(hours=24))
    expire(engine, clock)
    inv3 = provider.invoice(inv.id)
    assert inv3.final and inv3.credited_cents == cents_for_crypto(half, inv.rate, 6)
    assert balance(engine, customer.id) == inv3.credited_cents
    assert_clean(engine)


def test_paid_late_within_window(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, clock: FixedClock
) -> None:
    inv = topup(customer.id, 100_000, "ETH")
    clock.advance(timedelta(minutes=20))
    expire(engine, clock)
    assert provider.invoice(inv.id).status == "Expired"
    provider.pay(inv.id, int(inv.due_units))
    out = provider.notify(inv.id, "InvoiceSettled")
    assert (out["status"], out["exception"]) == ("Settled", "PaidLate")
    assert balance(engine, customer.id) == 100_000  # at the locked rate
    assert_clean(engine)


def test_expired_unpaid_credits_nothing(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, clock: FixedClock
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    clock.advance(timedelta(minutes=15, hours=24))
    expire(engine, clock)
    inv2 = provider.invoice(inv.id)
    assert (inv2.status, inv2.final, inv2.credited_cents) == ("Expired", True, 0)
    assert balance(engine, customer.id) == 0 and credits(engine) == 0


def test_paid_after_window_is_invalid_and_flagged(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, clock: FixedClock
) -> None:
    inv = topup(customer.id, 100_000, "USDT")
    clock.advance(timedelta(minutes=15, hours=24, seconds=1))
    provider.pay(inv.id, int(inv.due_units))
    out = provider.notify(inv.id, "InvoiceInvalid")
    assert out["status"] == "Invalid"
    inv2 = provider.invoice(inv.id)
    assert inv2.needs_review and inv2.final
    assert balance(engine, customer.id) == 0 and credits(engine) == 0


def test_money_after_close_is_flagged_not_credited(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    provider.pay(inv.id, int(inv.due_units))
    provider.notify(inv.id, "InvoiceSettled")
    provider.pay(inv.id, 1_000)
    provider.notify(inv.id, "InvoiceReceivedPayment")
    inv2 = provider.invoice(inv.id)
    assert inv2.needs_review and inv2.credited_cents == 100_000
    assert balance(engine, customer.id) == 100_000


def test_hundred_replays_one_credit(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    provider.pay(inv.id, int(inv.due_units))
    body = provider.body(inv.id, "InvoiceSettled")
    results = [provider.send(body) for _ in range(100)]
    assert all(r.status_code == 200 for r in results)
    assert sum(r.json()["credited"] for r in results) == 1
    assert sum(r.json()["duplicate"] for r in results) == 99
    # Redeliveries (new delivery ids pointing at the original) are harmless too.
    for _ in range(5):
        provider.send(provider.body(inv.id, "InvoiceSettled", original="x"))
    assert credits(engine) == 1 and balance(engine, customer.id) == 100_000
    assert_clean(engine)


def test_out_of_order_events(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    provider.pay(inv.id, int(inv.due_units))
    for etype in (
        "InvoiceSettled",
        "InvoicePaymentSettled",
        "InvoiceReceivedPayment",
        "InvoiceProcessing",
        "InvoiceCreated",
    ):
        out = provider.notify(inv.id, etype)
        assert out["status"] == "Settled"
    assert credits(engine) == 1 and balance(engine, customer.id) == 100_000


@pytest.mark.parametrize("sig", [None, "", "sha256=" + "0" * 64, "sha256=deadbeef", "garbage"])
def test_forged_or_missing_signature_rejected(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine, sig: str | None
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    provider.pay(inv.id, int(inv.due_units))
    r = provider.send(provider.body(inv.id, "InvoiceSettled"), sig=sig)
    assert r.status_code == 401
    assert credits(engine) == 0 and balance(engine, customer.id) == 0
    assert provider.invoice(inv.id).status == "New"


def test_signature_over_other_body_or_key_rejected(
    provider: Provider, topup: Callable[..., Any], customer: Any, engine: Engine
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    provider.pay(inv.id, int(inv.due_units))
    body = provider.body(inv.id, "InvoiceSettled")
    assert provider.send(body + b" ", sig=payments.sign(body, provider.secret)).status_code == 401
    assert provider.send(body, sig=payments.sign(body, "wrong-secret")).status_code == 401
    assert credits(engine) == 0


def test_malformed_or_unknown_notifications(
    provider: Provider, topup: Callable[..., Any], customer: Any
) -> None:
    inv = topup(customer.id, 100_000, "BTC")
    for body in (
        b"not json",
        b'{"type":"Nope","invoiceId":"x","deliveryId":"1"}',
        b'{"type":"InvoiceSettled","deliveryId":"1","invoiceId":"missing"}',
    ):
        assert provider.send(body).status_code in (404, 422)
    assert provider.invoice(inv.id).status == "New"


def test_oversized_notification_refused(provider: Provider) -> None:
    body = b'{"type":"InvoiceSettled","pad":"' + b"x" * 70_000 + b'"}'
    assert provider.send(body).status_code == 413
