"""The orders JSON API: idempotency keys, pay in the same call, cancel, who sees what."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.accounts.models import User
from app.accounts.security import create_api_token
from app.orders.models import Order
from tests.orders.conftest import new_public_key

B200 = 3_490_000


def token_for(engine: Any, clock: Any, user: User) -> dict[str, str]:
    with Session(engine, expire_on_commit=False) as s:
        _row, raw = create_api_token(s, user, "ci", clock.now())
        s.commit()
    return {"Authorization": f"Bearer {raw}"}


def body(**over: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "sku": "hgx-b200",
        "nodes": 1,
        "image": "ubuntu-24.04-cuda",
        "ssh_key": {"name": "ci", "public_key": KEY},
        "notes": {"model_size": "8B", "private_network": False},
    }
    b.update(over)
    return b


KEY = new_public_key()


def test_create_is_idempotent_per_key(
    raw_client: TestClient, engine, clock, make_user, stock, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    h = token_for(engine, clock, u)
    r = raw_client.post("/api/v1/orders", json=body(), headers={**h, "Idempotency-Key": "a1"})
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["status"] == "awaiting_payment" and first["monthly_total_cents"] == B200
    assert first["notes"]["model_size"] == "8B"
    r = raw_client.post("/api/v1/orders", json=body(), headers={**h, "Idempotency-Key": "a1"})
    assert r.status_code == 200 and r.json()["id"] == first["id"]
    r = raw_client.post(
        "/api/v1/orders", json=body(nodes=2), headers={**h, "Idempotency-Key": "a1"}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "idempotency_conflict"
    r = raw_client.post("/api/v1/orders", json=body(), headers=h)
    assert r.status_code == 422 and "Idempotency-Key" in r.text
    with Session(engine) as s:
        assert len(s.exec(select(Order)).all()) == 1
    ledger_ok()


def test_bad_input_names_the_field(raw_client: TestClient, engine, clock, make_user) -> None:
    u = make_user()
    h = {**token_for(engine, clock, u), "Idempotency-Key": "x"}
    r = raw_client.post("/api/v1/orders", json=body(image="ubuntu-24.04-rocm"), headers=h)
    assert r.status_code == 422 and "image" in r.json()["error"]["fields"]
    r = raw_client.post("/api/v1/orders", json=body(sku="gb300-nvl72"), headers=h)
    assert r.status_code == 422 and "sku" in r.json()["error"]["fields"]
    r = raw_client.post("/api/v1/orders", json=body(ssh_key=None), headers=h)
    assert r.status_code == 422 and "ssh_keys" in r.json()["error"]["fields"]
    r = raw_client.post(
        "/api/v1/orders",
        json=body(notes={"private_network": True, "node_count": 4}),
        headers=h,
    )
    assert r.status_code == 422 and "note_comm_pattern" in r.json()["error"]["fields"]
    # The typed model goes straight to the draft's rules (no form round trip).
    for over, field in [
        ({"nodes": 0}, "nodes"),
        ({"nodes": -3}, "nodes"),
        ({"ssh_key_ids": [0], "ssh_key": None}, "ssh_keys"),
        ({"notes": {"node_count": 0}}, "note_node_count"),
        ({"notes": {"node_count": 10_001}}, "note_node_count"),
        ({"notes": {"model_size": "x" * 81}}, "note_model_size"),
        ({"ssh_key": {"name": " ", "public_key": KEY}}, "new_key_name"),
    ]:
        r = raw_client.post("/api/v1/orders", json=body(**over), headers=h)
        assert r.status_code == 422 and field in r.json()["error"]["fields"], (over, r.text)
    r = raw_client.post("/api/v1/orders", json=body(nodes="two"), headers=h)
    assert r.status_code == 422 and "nodes" in r.text
    # JSON true/false is not a number, nor 1 or "yes" a decision to pay
    for over in (
        {"nodes": True},
        {"nodes": "2"},
        {"ssh_key_ids": [True]},
        {"notes": {"node_count": True}},
        {"pay": 1},
        {"pay": "yes"},
    ):
        r = raw_client.post("/api/v1/orders", json=body(**over), headers=h)
        assert r.status_code == 422, (over, r.text)
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []


def test_pay_in_the_same_call_short_then_retry(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 1_000_000)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "p1"}
    r = raw_client.post("/api/v1/orders", json=body(pay=True), headers=h)
    assert r.status_code == 402
    data = r.json()
    assert data["error"]["shortfall_cents"] == B200 - 1_000_000
    assert data["order"]["status"] == "awaiting_payment"
    fund(u, B200)
    r = raw_client.post("/api/v1/orders", json=body(pay=True), headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "paid" and r.json()["promised_date"]
    assert r.json()["id"] == data["order"]["id"]
    r = raw_client.post("/api/v1/orders", json=body(pay=True), headers=h)  # once only
    assert r.status_code == 200 and r.json()["status"] == "paid"
    assert balances(u) == (1_000_000, B200)
    ledger_ok()


def test_paid_then_the_answer_fails_a_retry_answers_with_the_paid_order(
    app, engine, clock, make_user, stock, fund, balances, ledger_ok, monkeypatch
) -> None:
    """A paid checkout commits as soon as the payment is done (the SKU's stock row is locked
    until COMMIT), before its answer is built. Should building the answer fail after that,
    the client sees a 500, and the retry with the same key answers with the order paid once:
    one month held, one node reserved, one paid event."""
    from app.api import orders as api
    from app.catalog import service as catalog
    from app.orders import service as orders

    stock("hgx-b200", 2)
    u = make_user()
    fund(u, B200 + 700)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "after-commit"}
    real = api._out
    calls = {"n": 0}

    def fail_once(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("answer failed after the commit")
        return real(*a, **k)

    monkeypatch.setattr(api, "_out", fail_once)
    with TestClient(app, base_url="http://testserver", raise_server_exceptions=False) as c:
        r = c.post("/api/v1/orders", json=body(pay=True), headers=h)
        assert r.status_code == 500
        assert balances(u) == (700, B200)  # committed: paid before the answer failed
        r = c.post("/api/v1/orders", json=body(pay=True), headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "paid" and r.json()["promised_date"]
    assert balances(u) == (700, B200)  # once
    with Session(engine) as s:
        assert catalog.available_count(s, "hgx-b200") == 1
        kinds = [e.kind for e in orders.timeline(s, r.json()["id"])]
        assert kinds.count("paid") == 1, kinds
    ledger_ok()


def test_pay_is_an_action_on_the_keys_order_not_part_of_it(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    """The API has no separate pay call: the order a key created unpaid is paid by the same
    body with "pay": true, exactly once; "pay": false afterwards changes nothing."""
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, B200 + 500)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "later"}
    r = raw_client.post("/api/v1/orders", json=body(pay=False), headers=h)
    assert r.status_code == 201 and r.json()["status"] == "awaiting_payment"
    assert balances(u) == (B200 + 500, 0)
    for pay, status in ((True, "paid"), (True, "paid"), (False, "paid")):
        r = raw_client.post("/api/v1/orders", json=body(pay=pay), headers=h)
        assert r.status_code == 200 and r.json()["status"] == status, r.text
    assert balances(u) == (500, B200)  # one month held, once
    r = raw_client.post("/api/v1/orders", json=body(pay=True, nodes=2), headers=h)
    assert r.status_code == 409  # another order under the same key: refused
    ledger_ok()


def test_a_short_payment_leaves_the_order_and_the_refusal_and_nothing_else(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    """Short in the same call: the order stays with its 'created' event, the refusal is on
    the ledger's record, and nothing of the payment is left (no hold, no node held, no
    'paid' event, notification or email) — the payment's savepoint took it all back."""
    from app.catalog import service as catalog
    from app.ledger import service as ledger
    from app.notifications.models import Notification, OutboxEmail
    from app.orders import service as orders

    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 1_000_000)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "short-1"}
    r = raw_client.post("/api/v1/orders", json=body(pay=True), headers=h)
    assert r.status_code == 402
    order_id = r.json()["order"]["id"]
    with Session(engine) as s:
        order = s.get(Order, order_id)
        assert order is not None and order.status == "awaiting_payment"
        assert order.pay_attempts == 1 and order.first_hold_id is None
        assert [e.kind for e in orders.timeline(s, order_id)] == ["created"]
        (declined,) = ledger.declined_attempts(s, u.id)
        assert declined.order_id == order_id and declined.amount_cents == B200
        assert ledger.pending_holds(s, u.id) == []
        assert catalog.available_count(s, "hgx-b200") == 1
        assert s.exec(select(Notification).where(Notification.user_id == u.id)).all() == []
        assert s.exec(select(OutboxEmail).where(OutboxEmail.kind == "order_paid")).all() == []
    assert balances(u) == (1_000_000, 0)
    ledger_ok()


def test_list_get_cancel_and_authorization(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    stock("hgx-b200", 1)
    a, b = make_user(), make_user()
    fund(a, B200)
    ha, hb = token_for(engine, clock, a), token_for(engine, clock, b)
    r = raw_client.post(
        "/api/v1/orders", json=body(pay=True), headers={**ha, "Idempotency-Key": "k"}
    )
    oid = r.json()["id"]
    assert [o["id"] for o in raw_client.get("/api/v1/orders", headers=ha).json()] == [oid]
    assert raw_client.get("/api/v1/orders", headers=hb).json() == []
    assert raw_client.get(f"/api/v1/orders/{oid}", headers=hb).status_code == 404
    assert raw_client.post(f"/api/v1/orders/{oid}/cancel", headers=hb).status_code == 404
    assert raw_client.get("/api/v1/orders").status_code == 401

    clock.advance(timedelta(days=30))
    got = raw_client.get(f"/api/v1/orders/{oid}", headers=ha).json()
    assert got["late"] is True and got["events"]
    # the timeline in the reader's language, as the console says it
    zh = raw_client.get(f"/api/v1/orders/{oid}", headers={**ha, "Accept-Language": "zh-CN"})
    texts = [e["message"] for e in zh.json()["events"] if e["message"]]
    assert texts and all(re.search(r"[\u4e00-\u9fff]", t) for t in texts), texts
    r = raw_client.post(f"/api/v1/orders/{oid}/cancel", headers=ha)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert balances(a) == (B200, 0)
    ledger_ok()


def test_openapi_documents_the_orders_api(raw_client: TestClient) -> None:
    spec = raw_client.get("/openapi.json").json()
    post = spec["paths"]["/api/v1/orders"]["post"]
    assert any(p["name"] == "Idempotency-Key" for p in post["parameters"])
    assert "/api/v1/orders/{order_id}/cancel" in spec["paths"]


def test_a_cancel_at_the_period_end_is_taken_back_over_the_api(
    raw_client: TestClient, engine, clock, make_user, stock, fund
) -> None:
    from tests.support import factories

    stock("hgx-b200", 1)
    a = make_user()
    fund(a, 2 * B200)
    ha = token_for(engine, clock, a)
    r = raw_client.post(
        "/api/v1/orders", json=body(pay=True), headers={**ha, "Idempotency-Key": "k"}
    )
    oid = r.json()["id"]
    factories.deliver(engine, oid, clock.now(), actor=make_user(role="ops"), ip="10.20.0.5")
    assert raw_client.post(f"/api/v1/orders/{oid}/cancel", headers=ha).json()["status"] == "ending"
    for _ in range(2):  # replayed: the same answer
        r = raw_client.post(f"/api/v1/orders/{oid}/keep", headers=ha)
        assert r.status_code == 200 and r.json()["status"] == "delivered"
    # cancelled again, and the paid month runs out before the customer changes their mind
    assert raw_client.post(f"/api/v1/orders/{oid}/cancel", headers=ha).json()["status"] == "ending"
    clock.advance(timedelta(days=31))
    r = raw_client.post(f"/api/v1/orders/{oid}/keep", headers=ha)
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_renewable", r.text


def test_a_quote_that_does_not_apply_is_refused_not_charged_at_list_price(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    """An API order sent with a used, unknown or mismatched quote was paid at the list
    price with nothing in the answer to say so: refused now, nothing created or held."""
    from tests.orders.test_quote_checkout import make_quote

    stock("hgx-b200", 3)
    token = make_quote(engine, clock, make_user)  # 1 x HGX B200 at 5 % off
    u = make_user()
    fund(u, 5 * B200)
    h = token_for(engine, clock, u)
    cases = [("made-up", {"quote": "nope"}), ("other size", {"quote": token, "nodes": 2})]
    for key, over in cases:
        r = raw_client.post(
            "/api/v1/orders", json=body(pay=True, **over), headers={**h, "Idempotency-Key": key}
        )
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "quote_not_applied"
        # the same request again: the same answer (nothing was created the first time)
        again = raw_client.post(
            "/api/v1/orders", json=body(pay=True, **over), headers={**h, "Idempotency-Key": key}
        )
        assert again.status_code == 409
    with Session(engine) as s:
        assert s.exec(select(Order)).all() == []
    assert balances(u) == (5 * B200, 0)
    r = raw_client.post(
        "/api/v1/orders",
        json=body(pay=True, quote=token),
        headers={**h, "Idempotency-Key": "good", "Accept-Language": "zh-CN"},
    )
    assert r.status_code == 201 and r.json()["unit_price_cents"] == B200 * 95 // 100
    used = raw_client.post(
        "/api/v1/orders",
        json=body(quote=token),
        headers={**h, "Idempotency-Key": "used", "Accept-Language": "zh-CN"},
    )
    assert used.status_code == 409 and "报价" in used.json()["error"]["message"]
    ledger_ok()


def test_a_quote_order_repriced_after_withdrawal_can_still_be_paid_by_replay(
    raw_client: TestClient, engine, clock, make_user, stock, fund, balances, ledger_ok
) -> None:
    """The key's order was repriced to the list price by a withdrawn quote's 409; the same
    request again must pay it at that price, not answer "quote_not_applied, nothing was
    created" about an order that exists."""
    from app.quotes import service as quotes
    from app.quotes.models import Quote
    from tests.orders.test_quote_checkout import make_quote

    stock("hgx-b200", 2)
    token = make_quote(engine, clock, make_user)
    u = make_user()
    fund(u, 2 * B200)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "w1"}
    r = raw_client.post("/api/v1/orders", json=body(quote=token), headers=h)
    assert r.status_code == 201 and r.json()["unit_price_cents"] == B200 * 95 // 100
    sales = make_user(role="sales")
    with Session(engine) as s:
        q = s.exec(select(Quote).where(Quote.token == token)).one()
        quotes.withdraw_quote(s, q, actor=sales, now=clock.now())
        s.commit()
    r = raw_client.post("/api/v1/orders", json=body(quote=token, pay=True), headers=h)
    assert r.status_code == 409 and r.json()["error"]["code"] == "quote_withdrawn"
    r = raw_client.post("/api/v1/orders", json=body(quote=token, pay=True), headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "paid" and r.json()["unit_price_cents"] == B200
    assert balances(u) == (B200, B200)
    ledger_ok()


def test_an_order_s_promise_is_read_in_the_reader_s_language(
    raw_client: TestClient, engine, clock, make_user, stock, fund
) -> None:
    stock("hgx-b200", 2)
    u = make_user()
    fund(u, B200)
    h = {**token_for(engine, clock, u), "Idempotency-Key": "p1"}
    r = raw_client.post(
        "/api/v1/orders", json=body(pay=True), headers={**h, "Accept-Language": "zh-CN"}
    )
    assert r.status_code == 201
    oid = r.json()["id"]
    cjk = re.compile(r"[\u4e00-\u9fff]")
    assert cjk.search(r.json()["promise_explanation"])  # placed in Chinese
    en = raw_client.get(f"/api/v1/orders/{oid}", headers={**h, "Accept-Language": "en-US"})
    text = en.json()["promise_explanation"]
    assert text and not cjk.search(text), text
