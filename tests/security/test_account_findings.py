"""Findings 3, 4, 6, 8 and 9 (accounts): token scope and revocation, reset links after an
email change, atomic limits on PostgreSQL, reset throttling per requester, the
email-change oracle, single-line names without bidi controls or NUL."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.accounts import service
from app.accounts.models import ApiToken, SshKey, User
from app.accounts.security import SESSION_COOKIE, verify_password
from app.clock import FixedClock
from app.errors import DomainError, InvalidInput, TooManyRequests
from app.notifications.models import OutboxEmail
from tests.accounts.helpers import STRONG, web_login
from tests.accounts.keys import public_line
from tests.conftest import AppClient, _with_csrf_cookie

NEW = "another long passphrase"


def _mint(client: TestClient, name: str = "ci") -> str:
    r = client.post("/account/api-tokens", data={"token_name": name})
    assert r.status_code == 201, r.text
    m = re.search(r'id="new-token-value">(gpn_[^<]+)<', r.text)
    assert m
    return m.group(1)


def _link(engine: Engine, to: str) -> str:
    with Session(engine) as s:
        mail = s.exec(select(OutboxEmail).where(OutboxEmail.to_addr == to)).all()[-1]
    m = re.search(r"(/password/reset/[A-Za-z0-9_\-]+)", mail.body)
    assert m
    return m.group(1)


def test_api_tokens_open_no_html_routes(
    client: TestClient, raw_client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    token = _mint(client)
    auth = {"Authorization": f"Bearer {token}"}
    assert raw_client.get("/api/v1/me", headers=auth).status_code == 200
    # On pages a bearer token is no credential: no CSRF bypass, no minting, no sign-outs.
    assert raw_client.get("/account", headers=auth).status_code in (303, 401)
    r = raw_client.post("/account/api-tokens", headers=auth, data={"token_name": "evil"})
    assert r.status_code in (401, 403)
    r = raw_client.post("/account/sessions/revoke-others", headers=auth)
    assert r.status_code in (401, 403)
    with Session(engine) as s:
        assert len(s.exec(select(ApiToken)).all()) == 1
    assert client.get("/account").status_code == 200  # the browser session still works


def test_password_change_revokes_every_api_token(
    client: TestClient, raw_client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    first = _mint(client, "one")
    second = _mint(client, "two")
    page = client.get("/account").text
    assert "revokes every token" in page
    r = client.post("/account/password", data={"current_password": STRONG, "new_password": NEW})
    assert r.status_code == 303, r.text
    for token in (first, second):
        r = raw_client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401


def test_password_reset_revokes_every_api_token(
    client: TestClient, raw_client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    token = _mint(client)
    client.post("/password/forgot", data={"email": "ann@example.com"})
    link = _link(engine, "ann@example.com")
    assert client.post(link, data={"password": NEW}).status_code == 303
    r = raw_client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401


def test_email_change_voids_an_outstanding_reset_link(
    client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    anon = new_client()
    anon.post("/password/forgot", data={"email": "ann@example.com"})
    link = _link(engine, "ann@example.com")
    web_login(client, "ann@example.com")
    r = client.post(
        "/account/email", data={"new_email": "ann.new@example.com", "email_password": STRONG}
    )
    assert r.status_code == 303, r.text
    assert anon.get(link).status_code == 404
    assert anon.post(link, data={"password": NEW}).status_code == 404
    with Session(engine) as s:
        user = s.exec(select(User)).one()
        assert verify_password(user.password_hash, STRONG)


def test_password_change_voids_an_outstanding_reset_link(
    client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    anon = new_client()
    anon.post("/password/forgot", data={"email": "ann@example.com"})
    link = _link(engine, "ann@example.com")
    web_login(client, "ann@example.com")
    client.post("/account/password", data={"current_password": STRONG, "new_password": NEW})
    assert anon.post(link, data={"password": "third long passphrase"}).status_code == 404


def test_strangers_cannot_use_up_a_victims_reset_requests(
    app: Any, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    with AppClient(app, client=("198.51.100.7", 1), follow_redirects=False) as attacker:
        _with_csrf_cookie(attacker)
        for _ in range(5):
            attacker.post("/password/forgot", data={"email": "ann@example.com"})
    with Session(engine) as s:
        assert len(s.exec(select(OutboxEmail)).all()) == 3
    with AppClient(app, client=("203.0.113.20", 1), follow_redirects=False) as victim:
        _with_csrf_cookie(victim)
        victim.post("/password/forgot", data={"email": "ann@example.com"})
    with Session(engine) as s:
        assert len(s.exec(select(OutboxEmail)).all()) == 4  # the victim's own request is sent


def test_email_change_does_not_enumerate_addresses_unthrottled(
    client: TestClient, make_user: Callable[..., User]
) -> None:
    for i in range(8):
        make_user(email=f"taken{i}@example.com")
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    codes = [
        client.post(
            "/account/email", data={"new_email": f"taken{i}@example.com", "email_password": STRONG}
        ).status_code
        for i in range(8)
    ]
    assert codes[:5] == [422] * 5 and set(codes[5:]) == {429}, codes


def test_names_are_single_line_without_bidi_controls_or_nul(
    client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    r = client.post(
        "/account/ssh-keys",
        data={
            "name": "lap\u202etop\r\nBcc: x@evil.example\x00",
            "public_key": public_line("ed25519"),
        },
    )
    assert r.status_code == 303, r.text
    _mint(client, "ci\u2066 runner\nX-Evil: 1")
    with Session(engine) as s:
        assert s.exec(select(SshKey.name)).one() == "laptop Bcc: x@evil.example"
        assert s.exec(select(ApiToken.name)).one() == "ci runner X-Evil: 1"


def test_nul_and_bidi_controls_never_reach_the_database(engine: Engine, clock: FixedClock) -> None:
    """One rule on SQLite and PostgreSQL (PostgreSQL used to refuse NUL with a 500)."""
    with Session(engine) as s:
        s.add(User(email="nul@example.com", password_hash="x\x00y\u202e", created_at=clock.now()))
        s.commit()
        assert s.exec(select(User.password_hash)).one() == "xy"


# --- concurrency (PostgreSQL: several transactions at once) -----------------------------------


def _parallel(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        try:
            return fn(i)
        except DomainError as e:
            return e

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def test_parallel_wrong_passwords_get_at_most_five_guesses(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    make_user(email="ann@example.com", password=STRONG)

    def guess(i: int) -> Any:
        with Session(engine) as s:
            try:
                service.authenticate(
                    s,
                    email="ann@example.com",
                    password=f"wrong {i}",
                    now=clock.now(),
                    ip=f"203.0.113.{i}",
                )
            except DomainError:
                s.rollback()
                raise

    results = _parallel(30 if engine.dialect.name == "postgresql" else 10, guess)
    guessed = [r for r in results if isinstance(r, InvalidInput)]
    throttled = [r for r in results if isinstance(r, TooManyRequests)]
    assert len(guessed) <= 5 and len(guessed) + len(throttled) == len(results)


def test_parallel_token_creations_respect_the_limit(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user = make_user()

    def create(i: int) -> Any:
        with Session(engine) as s:
            u = s.get(User, user.id)
            assert u is not None
            service.new_api_token(s, u, f"t{i}", clock.now())
            s.commit()

    n = 40 if engine.dialect.name == "postgresql" else 24
    _parallel(n, create)
    with Session(engine) as s:
        active = s.exec(
            select(ApiToken).where(col(ApiToken.revoked_at).is_(None), ApiToken.user_id == user.id)
        ).all()
        assert len(active) <= service.MAX_API_TOKENS


def test_parallel_signups_with_one_email_are_422_not_500(engine: Engine, clock: FixedClock) -> None:
    def signup(i: int) -> Any:
        with Session(engine) as s:
            service.register(s, email="race@example.com", password=STRONG, now=clock.now())
            s.commit()
            return "ok"

    results = _parallel(10, signup)
    assert results.count("ok") == 1
    assert all(isinstance(r, service.EmailTaken) for r in results if r != "ok"), results


def test_parallel_adds_of_one_ssh_key_are_422_not_500(
    engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    user = make_user()
    line = public_line("ed25519")

    def add(i: int) -> Any:
        with Session(engine) as s:
            u = s.get(User, user.id)
            assert u is not None
            service.add_ssh_key(s, u, f"k{i}", line, clock.now())
            s.commit()
            return "ok"

    results = _parallel(10, add)
    assert results.count("ok") == 1
    assert all(isinstance(r, InvalidInput) for r in results if r != "ok"), results


pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_csrf_token_is_bound_to_the_signed_in_session(
    raw_client: TestClient,
    new_client: Callable[[], AppClient],
    make_user: Callable[..., User],
    engine: Engine,
) -> None:
    """A token read from (or planted into) another browser is useless once signed in."""
    from tests.accounts.helpers import page_csrf

    make_user(email="ann@example.com", password=STRONG)
    make_user(email="eve@example.com", password=STRONG)
    eve = new_client()
    web_login(eve, "eve@example.com")
    eve_token = page_csrf(eve.get("/account").text)
    eve_cookie = eve.cookies.get("csrftoken")
    # Ann signs in in a fresh browser whose CSRF cookie Eve managed to plant.
    raw_client.cookies.set("csrftoken", eve_cookie)
    anon_token = page_csrf(raw_client.get("/login").text)
    r = raw_client.post(
        "/login", data={"email": "ann@example.com", "password": STRONG, "csrf_token": anon_token}
    )
    assert r.status_code == 303
    ann_session = raw_client.cookies.get(SESSION_COOKIE)
    raw_client.cookies.clear()  # planted again after login (cookie tossing) …
    raw_client.cookies.set("csrftoken", eve_cookie)
    raw_client.cookies.set(SESSION_COOKIE, ann_session)  # … beside Ann's own session
    r = raw_client.post("/account/api-tokens", data={"token_name": "x", "csrf_token": eve_token})
    assert r.status_code == 403
    with Session(engine) as s:
        assert s.exec(select(ApiToken)).all() == []
    # Ann's own page token works.
    raw_client.cookies.clear()
    raw_client.cookies.set(SESSION_COOKIE, ann_session)
    token = page_csrf(raw_client.get("/account").text)
    r = raw_client.post("/account/api-tokens", data={"token_name": "ok", "csrf_token": token})
    assert r.status_code == 201
