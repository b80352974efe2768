"""Customer pages, simulation controls, the JSON API and staff pages."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.security import create_api_token
from app.clock import FixedClock
from app.ledger import service as ledger
from app.ledger.postings import cents_for_crypto
from app.payments.addresses import bech32_decode, eip55
from app.payments.models import Invoice
from app.reconcile import run_checks


def invoice_id_from(r: Any) -> int:
    assert r.status_code == 303, r.text
    m = re.fullmatch(r"/topups/(\d+)", r.headers["location"])
    assert m
    return int(m.group(1))


def test_topup_form_prefills_and_validates(
    client: Any, login: Callable[..., Any], make_user: Callable[..., Any]
) -> None:
    login(client, make_user())
    r = client.get("/topups/new?amount_cents=123456&return_to=/orders/5/review")
    assert r.status_code == 200
    assert 'value="1234.56"' in r.text and 'value="/orders/5/review"' in r.text
    r = client.get("/topups/new?return_to=https://evil.example/")
    assert 'name="return_to"' not in r.text
    r = client.post("/topups/new", data={"amount": "abc", "currency": "BTC"})
    assert r.status_code == 422 and 'value="abc"' in r.text and 'aria-invalid="true"' in r.text
    r = client.post("/topups/new", data={"amount": "0.50", "currency": "BTC"})
    assert r.status_code == 422 and "US$1.00" in r.text
    r = client.post("/topups/new", data={"amount": "10", "currency": "DOGE"})
    assert r.status_code == 422
    # past the invoice's limit, by a little or by 100,000 digits: the same limit is named
    for huge in ("10000000000", "9" * 100_000):
        r = client.post("/topups/new", data={"amount": huge, "currency": "USDT"})
        assert r.status_code == 422 and "US$1,000,000.00 per invoice" in r.text, huge[:20]
    client.cookies.set("lang", "zh_CN")
    r = client.post("/topups/new", data={"amount": "9" * 100_000, "currency": "USDT"})
    assert r.status_code == 422 and "每张账单最多充值 US$1,000,000.00。" in r.text


def test_topups_need_login(client: Any) -> None:
    assert client.get("/topups/new").status_code == 303
    assert client.get("/balance").status_code == 303


@pytest.mark.parametrize("currency", ["BTC", "ETH", "USDT", "USDC"])
def test_invoice_page_address_qr_and_countdown(
    client: Any,
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    currency: str,
) -> None:
    login(client, make_user())
    iid = invoice_id_from(client.post("/topups/new", data={"amount": "2500", "currency": currency}))
    with Session(engine) as s:
        inv = s.get(Invoice, iid)
        assert inv is not None
    if currency == "BTC":
        assert inv.address.startswith("bc1q") and bech32_decode(inv.address) is not None
        assert inv.payment_uri.startswith(f"bitcoin:{inv.address}?amount=")
    else:
        assert inv.address == eip55(inv.address) and len(inv.address) == 42
        assert inv.payment_uri.startswith("ethereum:")
    page = client.get(f"/topups/{iid}")
    assert page.status_code == 200
    assert "<svg" in page.text and inv.address in page.text
    assert 'data-countdown="' in page.text and 'hx-trigger="every 3s"' in page.text
    assert "Simulated address" in page.text
    frag = client.get(f"/topups/{iid}/status", headers={"HX-Request": "true"})
    assert frag.status_code == 200 and 'id="invoice-status"' in frag.text


def test_simulation_controls_go_through_webhook(
    client: Any, login: Callable[..., Any], make_user: Callable[..., Any], engine: Engine
) -> None:
    user = make_user()
    login(client, user)
    iid = invoice_id_from(
        client.post(
            "/topups/new",
            data={"amount": "1000", "currency": "USDC", "return_to": "/orders/9/review"},
        )
    )
    r = client.post(f"/topups/{iid}/simulate", data={"action": "pay_full"})
    assert r.status_code == 303
    r = client.post(f"/topups/{iid}/simulate", data={"action": "redeliver"})
    assert r.status_code == 303
    page = client.get(f"/topups/{iid}/status")
    assert "Paid" in page.text and 'href="/orders/9/review"' in page.text
    assert "hx-trigger" not in page.text  # final: polling stops
    with Session(engine) as s:
        assert ledger.available_cents(s, user.id) == 100_000
        assert run_checks(s) == []
        from sqlmodel import select

        from app.payments.models import WebhookDelivery

        assert len(s.exec(select(WebhookDelivery)).all()) >= 4
    bal = client.get("/balance")
    assert "1,000.00" in bal.text and f"/topups/{iid}" in bal.text


@pytest.mark.parametrize(
    ("actions", "status", "exception", "credited"),
    [
        (["pay_part", "expire", "close_window"], "Expired", "PaidPartial", "partial"),
        (["overpay"], "Settled", "PaidOver", "over"),
        (["pay_late"], "Settled", "PaidLate", "full"),
        (["expire", "close_window"], "Expired", "", "none"),
        (["pay_after_window"], "Invalid", "PaidLate", "none"),
        (["pay_unconfirmed"], "Processing", "", "none"),
        (["pay_unconfirmed", "confirm"], "Settled", "", "full"),
        (["out_of_order"], "Settled", "", "full"),
    ],
)
def test_every_simulated_path(
    client: Any,
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    actions: list[str],
    status: str,
    exception: str,
    credited: str,
) -> None:
    user = make_user()
    login(client, user)
    iid = invoice_id_from(client.post("/topups/new", data={"amount": "1000", "currency": "USDC"}))
    for a in actions:
        assert client.post(f"/topups/{iid}/simulate", data={"action": a}).status_code == 303
    with Session(engine) as s:
        inv = s.get(Invoice, iid)
        assert inv is not None
        assert (inv.status, inv.exception_status) == (status, exception)
        bal = ledger.available_cents(s, user.id)
        expected = {"none": 0, "full": 100_000}.get(credited)
        if expected is not None:
            assert bal == expected
        elif credited == "partial":
            assert 0 < bal < 100_000 and bal == inv.credited_cents
        else:  # overpaid by a quarter of the due, the excess converted (rounded down)
            extra = int(inv.due_units) // 4
            assert (
                bal
                == 100_000 + cents_for_crypto(extra, inv.rate, inv.decimals)
                == inv.credited_cents
            )
        assert run_checks(s) == []


def test_other_customers_invoice_is_404(
    client: Any,
    new_client: Callable[[], Any],
    login: Callable[..., Any],
    make_user: Callable[..., Any],
) -> None:
    login(client, make_user())
    iid = invoice_id_from(client.post("/topups/new", data={"amount": "10", "currency": "BTC"}))
    other = login(new_client(), make_user())
    assert other.get(f"/topups/{iid}").status_code == 404
    assert other.post(f"/topups/{iid}/simulate", data={"action": "pay_full"}).status_code == 404
    assert other.get(f"/api/v1/topups/{iid}").status_code == 404


def test_unknown_simulation_action(
    client: Any, login: Callable[..., Any], make_user: Callable[..., Any]
) -> None:
    login(client, make_user())
    iid = invoice_id_from(client.post("/topups/new", data={"amount": "10", "currency": "BTC"}))
    assert client.post(f"/topups/{iid}/simulate", data={"action": "print_money"}).status_code == 422


def test_json_api_with_bearer_token(
    raw_client: Any, make_user: Callable[..., Any], engine: Engine, clock: FixedClock
) -> None:
    user = make_user()
    with Session(engine) as s:
        made = create_api_token(s, user, "t", clock.now())
        s.commit()
    token = made[1] if isinstance(made, tuple) else made
    h = {"Authorization": f"Bearer {token}"}
    assert raw_client.get("/api/v1/balance").status_code == 401
    r = raw_client.get("/api/v1/balance", headers=h)
    assert r.status_code == 200 and r.json()["available_cents"] == 0
    r = raw_client.post(
        "/api/v1/topups", json={"amount_cents": 50_000, "currency": "eth"}, headers=h
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert (
        body["status"] == "New" and body["address"].startswith("0x") and int(body["due_units"]) > 0
    )
    got = raw_client.get(f"/api/v1/topups/{body['id']}", headers=h).json()
    assert got["payment_uri"] == body["payment_uri"]
    bad = raw_client.post("/api/v1/topups", json={"amount_cents": 5, "currency": "BTC"}, headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "amount"
    with Session(engine) as s:
        invoices = len(s.exec(select(Invoice)).all())
    for amount in (True, "50000", 50_000.5):  # JSON numbers only
        bad = raw_client.post(
            "/api/v1/topups", json={"amount_cents": amount, "currency": "BTC"}, headers=h
        )
        assert bad.status_code == 422, (amount, bad.text)
    with Session(engine) as s:
        assert len(s.exec(select(Invoice)).all()) == invoices  # no invoice opened


def test_staff_journal_customer_and_adjustment(
    client: Any,
    new_client: Callable[[], Any],
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    clock: FixedClock,
) -> None:
    customer = make_user()
    with Session(engine) as s:
        ledger.grant_promotion(
            s,
            user_id=customer.id,
            amount_cents=10_000,
            reason="hi",
            now=clock.now(),
            idempotency_key="p",
        )
        s.commit()
    sales = login(new_client(), make_user(role="sales"))
    assert sales.get("/staff/ledger").status_code == 200
    assert sales.get(f"/staff/ledger/customers/{customer.id}").status_code == 200
    r = sales.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "5", "reason": "x", "key": "k"},
    )
    assert r.status_code == 403
    login(client, make_user(role="ops"))
    r = client.get(f"/staff/ledger?email={customer.email}")
    assert r.status_code == 303
    r = client.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "-5", "reason": "", "key": "k1"},
    )
    assert r.status_code == 422 and "reason is required" in r.text
    r = client.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "-500", "reason": "too much", "key": "k2"},
    )
    assert r.status_code == 422 and 'value="-500"' in r.text
    # past the ledger's largest amount: the same stated limit, however many digits
    for huge in ("100000000000", "999999999999999", "1000000000000000"):
        r = client.post(
            f"/staff/ledger/customers/{customer.id}/adjust",
            data={"amount": huge, "reason": "typo", "key": f"k-{huge}"},
        )
        assert r.status_code == 422 and "Enter at most US$10,000,000,000.00." in r.text, huge
    r = client.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "-25.50", "reason": "goodwill reversal", "key": "k3"},
    )
    assert r.status_code == 303
    r = client.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "-25.50", "reason": "goodwill reversal", "key": "k3"},
    )
    assert r.status_code == 303  # a resubmitted form does not adjust twice
    with Session(engine) as s:
        assert ledger.available_cents(s, customer.id) == 10_000 - 2_550
        assert run_checks(s) == []
    assert "goodwill reversal" in client.get(f"/staff/ledger/customers/{customer.id}").text
    assert client.get("/staff/payments").status_code == 200
    iid = invoice_id_from(
        login(new_client(), customer).post("/topups/new", data={"amount": "10", "currency": "BTC"})
    )
    staff_view = client.get(f"/topups/{iid}")
    assert staff_view.status_code == 200 and "Provider log" in staff_view.text
    assert login(new_client(), customer).get("/staff/ledger").status_code == 403


def test_balance_explains_holds_and_staff_sees_declines(
    client: Any,
    new_client: Callable[[], Any],
    login: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    clock: FixedClock,
) -> None:
    customer = make_user()
    with Session(engine) as s:
        ledger.grant_promotion(
            s,
            user_id=customer.id,
            amount_cents=10_000,
            reason="hi",
            now=clock.now(),
            idempotency_key="p",
        )
        ledger.place_hold(
            s,
            user_id=customer.id,
            amount_cents=4_000,
            idempotency_key="o1",
            now=clock.now(),
            reason="order #41",
            order_id=41,
        )
        with contextlib.suppress(ledger.InsufficientBalance):
            ledger.place_hold(
                s,
                user_id=customer.id,
                amount_cents=9_000,
                idempotency_key="o2",
                now=clock.now(),
                reason="order #42",
                order_id=42,
            )
        s.commit()
    page = login(client, customer).get("/balance")
    assert "/console/orders/41" in page.text and "Reserved for an order" in page.text
    ops = login(new_client(), make_user(role="ops"))
    staff = ops.get(f"/staff/ledger/customers/{customer.id}")
    assert "Declined payment attempts" in staff.text and "/staff/ops/orders/42" in staff.text
    bad = ops.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "1", "reason": "fix", "key": "kk", "corrects": "999999"},
    )
    assert bad.status_code == 422 and "not one of this customer" in bad.text
    ok = ops.post(
        f"/staff/ledger/customers/{customer.id}/adjust",
        data={"amount": "1", "reason": "fix", "key": "kk2", "corrects": "#1"},
    )
    assert ok.status_code == 303
    with Session(engine) as s:
        assert ledger.balance_summary(s, customer.id) == (6_100, 4_000)
