"""Issue 19: what a signed-in customer sees when something goes wrong, and in which zone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.accounts.models import User


@pytest.mark.parametrize(
    ("url", "status"),
    [("/orders/999999", 404), ("/staff", 403), ("/q/badtoken", 404), ("/topups/999999", 404)],
)
def test_error_pages_for_signed_in_users_keep_the_layout(
    client: TestClient,
    make_user: Callable[..., User],
    login: Callable[[TestClient, User], TestClient],
    url: str,
    status: int,
) -> None:
    user = make_user(email="someone@example.com")
    login(client, user)
    r = client.get(url)
    assert r.status_code == status
    assert "<nav" in r.text and "someone@example.com" in r.text  # navigation, still signed in
    assert 'role="alert"' in r.text  # a message, not a bare status
    client.cookies.set("lang", "zh_CN")
    r = client.get(url)
    assert r.status_code == status
    assert '<html lang="zh-CN">' in r.text
    assert "someone@example.com" in r.text
    assert ("页面不存在" in r.text) or ("无权操作" in r.text)


def test_times_carry_the_zone_they_are_shown_in() -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from app.web.i18n import set_locale
    from app.web.templating import format_datetime

    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    set_locale("en")
    assert format_datetime(at, "short", ZoneInfo("Asia/Shanghai")).endswith("5:00\u202fPM UTC+8")
    assert format_datetime(at, "short", ZoneInfo("Asia/Kolkata")).endswith("UTC+5:30")
    assert format_datetime(at, "short", None).endswith("UTC")


def test_an_url_encoded_zone_cookie_is_understood(client: TestClient) -> None:
    client.cookies.set("tz", "Asia%2FShanghai")
    assert "Asia/Shanghai (UTC+8)" in client.get("/nodes").text
    client.cookies.set("tz", "Not/AZone")  # unknown: UTC, and the page says why
    t = client.get("/nodes").text
    assert "calendar days in UTC: your browser did not tell us its time zone" in t
    assert "your time zone, UTC" not in t and "UTC (UTC)" not in t


def test_navigation_prices_on_home_balance_in_nav_sign_in_lands_on_console(
    client: TestClient,
    engine: Any,
    clock: Any,
    make_user: Callable[..., User],
) -> None:
    from tests.ops.helpers import seed_catalog

    seed_catalog(engine, clock.now())
    home = client.get("/").text
    assert "US$16,900.00" in home or "$16,900.00" in home  # list prices on the home page
    assert 'href="/balance"' not in home  # not for visitors
    make_user(email="nav@example.com", password="correct horse battery")
    r = client.post(
        "/login", data={"email": "nav@example.com", "password": "correct horse battery"}
    )
    assert r.status_code == 303 and r.headers["location"] == "/console"
    page = client.get("/console").text
    assert '<a href="/balance"' in page


def test_the_account_language_is_set_at_signup_and_changeable(
    client: TestClient, engine: Any
) -> None:
    from sqlmodel import Session, select

    client.cookies.set("lang", "zh_CN")
    r = client.post(
        "/signup", data={"email": "mei@example.com", "password": "a long enough passphrase"}
    )
    assert r.status_code == 303

    def locale() -> str:
        with Session(engine) as s:
            return s.exec(select(User).where(User.email == "mei@example.com")).one().locale

    assert locale() == "zh_CN"
    page = client.get("/account").text
    assert 'id="account-language"' in page and 'href="/lang/en?next=/account"' in page
    assert client.get("/lang/en?next=/account").status_code == 303
    assert locale() == "en"


@pytest.mark.parametrize("text", ["1e3", "١٢", "12_0", "1²", "-5"])
def test_top_up_amounts_follow_the_one_number_rule(
    client: TestClient,
    engine: Any,
    make_user: Callable[..., User],
    login: Callable[[TestClient, User], TestClient],
    text: str,
) -> None:
    """Issue 19, defect 10: exponents, ``_``, superscripts and other scripts' digits in a
    money amount are a 422 that creates nothing; full-width digits are plain digits."""
    from sqlmodel import Session, select

    from app.money import parse_amount
    from app.payments.models import Invoice

    assert parse_amount("１２.５０") == 1250
    login(client, make_user(email="amounts@example.com"))
    r = client.post("/topups/new", data={"amount": text, "currency": "USDC"})
    assert r.status_code == 422
    with Session(engine) as s:
        assert s.exec(select(Invoice)).all() == []


def test_moving_the_simulated_clock_does_not_sign_everyone_out(
    client: TestClient,
    clock: Any,
    make_user: Callable[..., User],
    login: Callable[[TestClient, User], TestClient],
) -> None:
    """Issue 19, defect 10: a session expires on the wall clock too, so staff moving the
    simulated clock a month ahead leave customers signed in."""
    from datetime import timedelta

    login(client, make_user(email="stays@example.com"))
    clock.advance(timedelta(days=40))
    r = client.get("/account")
    assert r.status_code == 200 and "stays@example.com" in r.text


@pytest.mark.parametrize("tokens", ["１T", "1万亿", "10000亿", "１０万"])
def test_size_takes_full_width_digits_and_wan_yi(client: TestClient, tokens: str) -> None:
    """Issue 19, defect 10: a product sold in Chinese takes the token count as typed there."""
    r = client.get("/size", params={"tokens": tokens, "model": "llama-3.1-8b"})
    assert r.status_code == 200
    assert 'id="e-tokens"' not in r.text
    bad = client.get("/size", params={"tokens": "1²T", "model": "llama-3.1-8b"})
    assert 'id="e-tokens"' in bad.text
