"""The BTCPay Server Greenfield provider against a small fake Greenfield server
(an ``httpx.MockTransport``): create the invoice, read its payments, take its signed
webhooks; a failing provider is a 503 that changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel import Session, select

from app.clock import FixedClock
from app.ledger import service as ledger
from app.main import create_app
from app.payments import service as payments
from app.payments.btcpay import BTCPayProvider
from app.payments.models import Invoice
from app.settings import Settings
from tests.conftest import TEST_SECRET, AppClient, _with_csrf_cookie

STORE, KEY, HOOK_SECRET = "Store9", "apikey-42", "btcpay-hook-secret-0123456789"


class FakeGreenfield:
    """Just enough of BTCPay's Greenfield API: invoices and their payment methods."""

    def __init__(self) -> None:
        self.invoices: dict[str, dict[str, Any]] = {}
        self.requests: list[httpx.Request] = []
        self.down = False

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            return httpx.Response(502)
        if request.headers.get("authorization") != f"token {KEY}":
            return httpx.Response(401, json={"code": "unauthenticated"})
        parts = request.url.path.strip("/").split("/")
        if parts[:4] != ["api", "v1", "stores", STORE] or parts[4:5] != ["invoices"]:
            return httpx.Response(404)
        if request.method == "POST" and len(parts) == 5:
            body = json.loads(request.content)
            iid = f"Inv{len(self.invoices) + 1:04d}BTCPay"
            method = body["checkout"]["paymentMethods"][0]
            usd = float(body["amount"])
            self.invoices[iid] = {
                "request": body,
                "method": method,
                "rate": "50000.00",
                "amount": f"{usd / 50000:.8f}",
                "payments": [],
            }
            return httpx.Response(200, json={"id": iid, "status": "New", "amount": body["amount"]})
        if request.method == "GET" and len(parts) == 7 and parts[6] == "payment-methods":
            inv = self.invoices.get(parts[5])
            if inv is None:
                return httpx.Response(404)
            return httpx.Response(
                200,
                json=[
                    {
                        "paymentMethod": inv["method"],
                        "cryptoCode": inv["method"],
                        "destination": "bc1qfakegreenfieldaddress0000000000000",
                        "paymentLink": f"bitcoin:bc1qfake?amount={inv['amount']}",
                        "rate": inv["rate"],
                        "amount": inv["amount"],
                        "payments": inv["payments"],
                    }
                ],
            )
        return httpx.Response(404)

    def pay(self, iid: str, value: str, *, status: str = "Settled", at: int = 1796115600) -> None:
        self.invoices[iid]["payments"].append(
            {
                "id": f"tx{len(self.invoices[iid]['payments'])}",
                "receivedDate": at,
                "value": value,
                "fee": "0",
                "status": status,
                "destination": "bc1qfake",
            }
        )


@pytest.fixture
def greenfield() -> FakeGreenfield:
    return FakeGreenfield()


@pytest.fixture
def btcpay_app(db_url: str, clock: FixedClock, greenfield: FakeGreenfield) -> Iterator[FastAPI]:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        environment="test",
        database_url=db_url,
        secret_key=TEST_SECRET,
        simulation=False,
        webhook_secret=HOOK_SECRET,
        payment_provider="btcpay",
        btcpay_url="https://btcpay.test",
        btcpay_store_id=STORE,
        btcpay_api_key=KEY,
    )
    app = create_app(settings, clock=clock)
    provider = BTCPayProvider(
        url=settings.btcpay_url,
        store_id=STORE,
        api_key=KEY,
        transport=httpx.MockTransport(greenfield.handler),
    )
    app.state.payment_provider = provider
    payments.use_provider(provider)
    yield app
    payments.use_provider(payments.SIMULATED)
    app.state.engine.dispose()


def _webhook(c: Any, iid: str, etype: str, secret: str = HOOK_SECRET, n: int = 1) -> Any:
    body = json.dumps(
        {
            "deliveryId": f"d-{etype}-{n}",
            "webhookId": "w1",
            "originalDeliveryId": f"d-{etype}-{n}",
            "isRedelivery": False,
            "type": etype,
            "timestamp": 1796115600,
            "storeId": STORE,
            "invoiceId": iid,
        }
    ).encode()
    return c.post(
        "/payments/webhook",
        content=body,
        headers={"BTCPay-Sig": payments.sign(body, secret), "Content-Type": "application/json"},
    )


def test_topup_through_btcpay_credits_once_after_settlement(
    btcpay_app: FastAPI,
    greenfield: FakeGreenfield,
    make_user: Callable[..., Any],
    login: Callable[..., Any],
) -> None:
    user = make_user()
    with AppClient(btcpay_app, follow_redirects=False) as c:
        _with_csrf_cookie(c)
        login(c, user)
        r = c.post("/topups/new", data={"amount": "2500", "currency": "BTC"})
        assert r.status_code == 303, r.text
        (iid,) = greenfield.invoices
        sent = greenfield.invoices[iid]["request"]
        assert sent["amount"] == "2500.00" and sent["currency"] == "USD"
        assert sent["checkout"]["paymentMethods"] == ["BTC"]
        assert sent["checkout"]["expirationMinutes"] == 15
        page = c.get(r.headers["location"])
        assert "bc1qfakegreenfieldaddress" in page.text
        # No simulation controls without simulation.
        assert (
            c.post(r.headers["location"] + "/simulate", data={"action": "pay_full"}).status_code
            == 404
        )

        greenfield.pay(iid, "0.05", status="Processing")
        assert _webhook(c, iid, "InvoiceReceivedPayment").json()["credited"] is False
        greenfield.invoices[iid]["payments"][0]["status"] = "Settled"
        first = _webhook(c, iid, "InvoiceSettled")
        assert first.json() == {**first.json(), "status": "Settled", "credited": True}
        assert _webhook(c, iid, "InvoiceSettled", n=2).json()["credited"] is False
        # A forged notification (wrong secret) is refused.
        assert (
            _webhook(c, iid, "InvoiceSettled", secret="dev-webhook-secret", n=3).status_code == 401
        )
    with Session(btcpay_app.state.engine) as s:
        inv = s.exec(select(Invoice)).one()
        assert inv.provider_id == iid and inv.due_units == "5000000" and inv.rate == "50000.00"
        assert ledger.available_cents(s, user.id) == 250_000


def test_provider_down_is_503_and_creates_nothing(
    btcpay_app: FastAPI,
    greenfield: FakeGreenfield,
    make_user: Callable[..., Any],
    login: Callable[..., Any],
) -> None:
    greenfield.down = True
    with AppClient(btcpay_app, follow_redirects=False) as c:
        _with_csrf_cookie(c)
        login(c, make_user())
        r = c.post("/topups/new", data={"amount": "100", "currency": "BTC"})
        assert r.status_code == 503
    with Session(btcpay_app.state.engine) as s:
        assert s.exec(select(Invoice)).all() == []
