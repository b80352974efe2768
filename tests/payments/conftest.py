from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FixedClock
from app.payments import service as payments
from app.payments.models import Invoice
from app.settings import Settings


class Provider:
    """Test helper acting as the provider: pays the simulated chain, sends signed events."""

    def __init__(self, client: Any, engine: Engine, clock: FixedClock, secret: str) -> None:
        self.client, self.engine, self.clock, self.secret = client, engine, clock, secret

    def invoice(self, invoice_id: int) -> Invoice:
        with Session(self.engine) as s:
            inv = s.get(Invoice, invoice_id)
            assert inv is not None
            return inv

    def pay(self, invoice_id: int, units: int, *, confirmed: bool = True) -> None:
        with Session(self.engine) as s:
            inv = s.get(Invoice, invoice_id)
            assert inv is not None
            payments.record_chain_payment(s, inv, units, now=self.clock.now(), confirmed=confirmed)
            s.commit()

    def confirm(self, invoice_id: int) -> None:
        with Session(self.engine) as s:
            payments.confirm_chain_payments(s, self.invoice(invoice_id))
            s.commit()

    def body(self, invoice_id: int, etype: str, **kw: Any) -> bytes:
        return payments.event_body(self.invoice(invoice_id), etype, self.clock.now(), **kw)

    def send(self, body: bytes, sig: str | None = "auto") -> Any:
        headers = {"Content-Type": "application/json"}
        if sig == "auto":
            headers["BTCPay-Sig"] = payments.sign(body, self.secret)
        elif sig is not None:
            headers["BTCPay-Sig"] = sig
        return self.client.post("/payments/webhook", content=body, headers=headers)

    def notify(self, invoice_id: int, etype: str) -> Any:
        r = self.send(self.body(invoice_id, etype))
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def provider(raw_client: Any, engine: Engine, clock: FixedClock, settings: Settings) -> Provider:
    return Provider(raw_client, engine, clock, settings.webhook_secret)


@pytest.fixture
def topup(engine: Engine, clock: FixedClock) -> Callable[..., Invoice]:
    def _make(user_id: int, amount_cents: int = 100_000, currency: str = "BTC") -> Invoice:
        with Session(engine, expire_on_commit=False) as s:
            inv = payments.create_topup(
                s, user_id=user_id, amount_cents=amount_cents, currency=currency, now=clock.now()
            )
            s.commit()
            return inv

    return _make
