"""Checkout pages are never shown stale: no-store on every page whose balance, price or
Pay button is true only now; a paid order's review goes to the order; a submit from a
session that ended elsewhere says so and keeps the form."""

from __future__ import annotations

import re
from typing import Any

from sqlmodel import Session

from app.accounts.security import revoke_all_sessions
from tests.orders.conftest import deploy_form, form_value


def _place(client: Any) -> int:
    r = client.post("/deploy", data=deploy_form(client))
    assert r.status_code == 303, r.text
    m = re.fullmatch(r"/orders/(\d+)/review", r.headers["location"])
    assert m
    return int(m.group(1))


def test_checkout_and_topup_pages_are_no_store(client, make_user, login, stock, fund) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 1_000_000)  # less than a month: the review offers a top-up
    login(client, u)
    assert client.get("/deploy").headers["cache-control"] == "no-store"
    oid = _place(client)
    review = client.get(f"/orders/{oid}/review")
    assert review.status_code == 200
    assert review.headers["cache-control"] == "no-store"
    assert client.get(f"/console/orders/{oid}").headers["cache-control"] == "no-store"
    assert client.get("/console").headers["cache-control"] == "no-store"
    assert client.get("/topups/new").headers["cache-control"] == "no-store"
    r = client.post(
        f"/orders/{oid}/topup",
        data={"amount": "30000.00", "currency": "USDC", "csrf_token": "test-csrf-token"},
    )
    assert r.status_code == 303
    invoice = client.get(r.headers["location"])
    assert invoice.status_code == 200
    assert invoice.headers["cache-control"] == "no-store"
    status = client.get(r.headers["location"] + "/status", headers={"HX-Request": "true"})
    assert status.headers["cache-control"] == "no-store"


def test_paid_orders_review_goes_to_the_order(client, make_user, login, stock, fund) -> None:
    stock("hgx-b200", 1)
    u = make_user()
    fund(u, 5_000_000)
    login(client, u)
    oid = _place(client)
    page = client.get(f"/orders/{oid}/review").text
    pay = {
        "idempotency_key": form_value(page, "idempotency_key"),
        "promise_date": form_value(page, "promise_date"),
        "csrf_token": "test-csrf-token",
    }
    assert client.post(f"/orders/{oid}/pay", data=pay).status_code == 303
    back = client.get(f"/orders/{oid}/review")
    assert back.status_code == 303
    assert back.headers["location"] == f"/console/orders/{oid}"


def _signed_out_submit(client: Any, engine: Any, clock: Any, make_user: Any, login: Any) -> Any:
    u = make_user()
    login(client, u)
    data = deploy_form(client, note_free_text="two racks side by side, please")
    with Session(engine) as s:  # the session ends elsewhere (another device signs out all)
        revoke_all_sessions(s, u.id, clock.now())
        s.commit()
    return client.post("/deploy", data=data)


def test_signed_out_submit_says_so_and_keeps_notes(
    client, engine, clock, make_user, login, stock
) -> None:
    stock("hgx-b200", 1)
    r = _signed_out_submit(client, engine, clock, make_user, login)
    assert r.status_code == 422
    assert "You were signed out" in r.text
    assert "Some fields need attention" not in r.text
    assert "two racks side by side, please" in r.text
    assert 'name="account_mode" value="login" checked' in r.text
    assert r.headers["cache-control"] == "no-store"


def test_signed_out_submit_in_chinese(client, engine, clock, make_user, login, stock) -> None:
    stock("hgx-b200", 1)
    client.cookies.set("lang", "zh_CN")
    r = _signed_out_submit(client, engine, clock, make_user, login)
    assert r.status_code == 422
    assert "您已退出登录" in r.text
    assert "two racks side by side, please" in r.text


def test_a_visitor_without_a_session_still_sees_field_errors(client, stock) -> None:
    stock("hgx-b200", 1)
    r = client.post("/deploy", data=deploy_form(client))
    assert r.status_code == 422
    assert "Some fields need attention" in r.text and "You were signed out" not in r.text
