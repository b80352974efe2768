"""Password reset: emailed, single-use, expiring, hashed; signs out every session."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts.models import PasswordResetToken, User
from app.clock import FixedClock
from app.notifications.models import OutboxEmail
from tests.accounts.helpers import STRONG, reset_csrf, web_login
from tests.conftest import AppClient

SAME = "If an account uses that address"


def _link(engine: Engine, to: str) -> str:
    with Session(engine) as s:
        mail = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == to)).all()[-1]
    m = re.search(r"https?://[^/\s]+(/password/reset/[A-Za-z0-9_\-]+)", mail.body)
    assert m, mail.body
    return m.group(1)


def test_reset_flow_single_use_and_signs_everyone_out(
    client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    other = new_client()
    web_login(other, "ann@example.com")
    r = client.post("/password/forgot", data={"email": "Ann@Example.com"})
    assert r.status_code == 200 and SAME in r.text
    path = _link(engine, "ann@example.com")
    raw = path.rsplit("/", 1)[1]
    with Session(engine) as s:
        row = s.exec(select(PasswordResetToken)).one()
        assert row.token_hash != raw and raw not in row.token_hash  # stored hashed
    page = client.get(path)
    assert page.status_code == 200 and page.headers["referrer-policy"] == "no-referrer"
    r = client.post(path, data={"password": "short"})
    assert r.status_code == 422  # policy still applies; token not burnt
    r = client.post(path, data={"password": "a brand new phrase"})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    reset_csrf(client)
    assert other.get("/account").status_code == 303  # every session signed out
    assert (
        client.post(path, data={"password": "yet another phrase"}).status_code == 404
    )  # single use
    assert client.get(path).status_code == 404
    assert web_login(client, "ann@example.com", "a brand new phrase").status_code == 303


def test_unknown_email_gets_the_same_answer_and_no_mail(client: TestClient, engine: Engine) -> None:
    r = client.post("/password/forgot", data={"email": "nobody@example.com"})
    assert r.status_code == 200 and SAME in r.text
    with Session(engine) as s:
        assert s.exec(select(OutboxEmail)).all() == []


def test_reset_link_expires_after_an_hour(
    client: TestClient, make_user: Callable[..., User], engine: Engine, clock: FixedClock
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    client.post("/password/forgot", data={"email": "ann@example.com"})
    path = _link(engine, "ann@example.com")
    clock.advance(timedelta(minutes=61))
    assert client.get(path).status_code == 404
    r = client.post(path, data={"password": "a brand new phrase"})
    assert r.status_code == 404 and "expired" in r.text
    assert web_login(client, "ann@example.com", STRONG).status_code == 303  # unchanged


def test_a_new_reset_burns_older_links_when_used(
    client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    client.post("/password/forgot", data={"email": "ann@example.com"})
    first = _link(engine, "ann@example.com")
    client.post("/password/forgot", data={"email": "ann@example.com"})
    second = _link(engine, "ann@example.com")
    assert first != second
    assert client.post(second, data={"password": "a brand new phrase"}).status_code == 303
    reset_csrf(client)
    assert client.get(first).status_code == 404


def test_reset_requests_are_throttled_silently(
    client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    for _ in range(6):
        r = client.post("/password/forgot", data={"email": "ann@example.com"})
        assert r.status_code == 200 and SAME in r.text
    with Session(engine) as s:
        assert (
            len(s.exec(select(OutboxEmail)).all()) == 3
        )  # RESET_REQUESTER limit (one address, one account)


def test_bad_tokens(client: TestClient) -> None:
    assert client.get("/password/reset/nope").status_code == 404
    assert client.get("/password/reset/" + "x" * 300).status_code == 404
