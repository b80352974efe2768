"""Staff without their second factor have no staff powers on any route (production), and
enrol it only through a one-time link from ops; second-factor sessions: the pending
sign-in cookie works once, turning two-factor on signs out everyone else, the page offers
an ``otpauth://`` link and the recovery codes as a download."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import pyotp
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.accounts import twofactor
from app.accounts.models import ApiToken, User, UserSession
from app.accounts.security import SESSION_COOKIE, create_api_token, create_session
from app.clock import FixedClock
from app.ledger import service as ledger
from app.main import create_app
from app.payments.models import Invoice
from tests.accounts.helpers import STRONG, reset_csrf, web_login
from tests.accounts.test_twofactor import code_at, enrol
from tests.conftest import TEST_SECRET, AppClient, _with_csrf_cookie
from tests.security.test_production_settings import prod


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


@pytest.fixture
def prod_app(db_url: str, clock: FixedClock) -> Iterator[FastAPI]:
    """Production with the payment simulator forced on (a staging demo): the set-up in
    which an ops account without two-factor credited a customer."""
    settings = prod(
        database_url=db_url,
        secret_key=TEST_SECRET,
        simulation=True,
        force_simulation=True,
        payment_provider="simulated",
        allowed_hosts="testserver",
    )
    application = create_app(settings, clock=clock)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def prod_client(prod_app: FastAPI) -> Iterator[AppClient]:
    with AppClient(prod_app, base_url="https://testserver", follow_redirects=False) as c:
        _with_csrf_cookie(c)
        yield c


def _sign_in(c: AppClient, engine: Engine, user: User, now: Any) -> None:
    with Session(engine) as s:
        cookie = create_session(s, user, now, TEST_SECRET)
        s.commit()
    c.cookies.set(SESSION_COOKIE, cookie)


@pytest.mark.parametrize("role", ["ops", "sales"])
def test_staff_without_a_second_factor_have_no_staff_powers_in_production(
    prod_client: AppClient,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    role: str,
) -> None:
    alice = make_user()
    invoice_id = _invoice(engine, alice.id, clock.now())
    staff = make_user(role=role)
    _sign_in(prod_client, engine, staff, clock.now())
    assert prod_client.get("/staff").status_code == 403
    assert prod_client.get(f"/topups/{invoice_id}").status_code == 404
    r = prod_client.post(f"/topups/{invoice_id}/simulate", data={"action": "pay_full"})
    assert r.status_code in (403, 404)
    # with an API token just the same
    with Session(engine) as s:
        u = s.get(User, staff.id)
        assert u is not None
        _row, raw = create_api_token(s, u, "probe", clock.now())
        s.commit()
    r = prod_client.get(f"/api/v1/topups/{invoice_id}", headers={"Authorization": f"Bearer {raw}"})
    assert r.status_code == 404
    with Session(engine) as s:
        assert ledger.available_cents(s, alice.id) == 0


def test_staff_enrol_only_through_a_one_time_link_from_ops(
    prod_client: AppClient, engine: Engine, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    ops = make_user(role="ops")
    _sign_in(prod_client, engine, ops, clock.now())
    # a password alone (perhaps phished) cannot bind an authenticator
    assert prod_client.post("/account/2fa/start").status_code == 403
    assert prod_client.post("/account/2fa/confirm", data={"code": "123456"}).status_code == 403
    with Session(engine) as s:
        u = s.get(User, ops.id)
        assert u is not None
        token = twofactor.new_enrolment_link(s, u, TEST_SECRET)
        secret = u.totp_pending_secret
        s.commit()
    page = prod_client.get("/account/2fa")
    assert 'id="needs-enrolment-link"' in page.text and "<svg" not in page.text
    assert secret not in re.sub(r"\s", "", page.text)
    # someone else's link is nobody's
    other = make_user(role="sales")
    with Session(engine) as s:
        u2 = s.get(User, other.id)
        assert u2 is not None
        other_token = twofactor.new_enrolment_link(s, u2, TEST_SECRET)
        s.commit()
    assert prod_client.get(f"/account/2fa/enrol/{other_token}").status_code == 404
    page = prod_client.get(f"/account/2fa/enrol/{token}")
    assert page.status_code == 200 and "<svg" in page.text
    assert f'action="/account/2fa/enrol/{token}"' in page.text
    r = prod_client.post(f"/account/2fa/enrol/{token}", data={"code": pyotp.TOTP(secret).now()})
    assert r.status_code == 200 and 'id="recovery-codes"' in r.text
    assert prod_client.get("/staff").status_code == 200
    # the link is spent
    assert prod_client.get(f"/account/2fa/enrol/{token}").status_code == 404


# --- second-factor sessions (development settings) --------------------------------------


@pytest.fixture
def enrolled(client: Any, engine: Any, make_user: Any, login: Any) -> tuple[User, str, list[str]]:
    user = make_user(password=STRONG)
    login(client, user)
    secret, codes = enrol(client, engine, user)
    client.post("/logout")
    client.cookies.clear()
    reset_csrf(client)
    return user, secret, codes


def test_the_pending_sign_in_cookie_works_once(client: Any, new_client: Any, enrolled: Any) -> None:
    user, _secret, codes = enrolled
    web_login(client, user.email)
    pending = client.cookies.get("login_2fa")
    assert pending
    assert client.post("/login/2fa", data={"code": codes[0]}).status_code == 303
    replay = new_client()
    replay.cookies.set("login_2fa", pending, path="/login")
    r = replay.post("/login/2fa", data={"code": codes[1]})
    assert r.status_code == 303 and r.headers["location"].startswith("/login?")
    assert SESSION_COOKIE not in replay.cookies


def test_turning_two_factor_on_signs_out_other_sessions_and_revokes_tokens(
    client: Any,
    raw_client: Any,
    engine: Engine,
    clock: FixedClock,
    make_user: Callable[..., User],
    login: Any,
) -> None:
    user = make_user(password=STRONG)
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None
        elsewhere = create_session(s, u, clock.now(), TEST_SECRET)
        _row, raw = create_api_token(s, u, "old", clock.now())
        s.commit()
    login(client, user)
    assert (
        raw_client.get("/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).status_code == 200
    )
    assert client.post("/account/2fa/start").status_code == 303
    with Session(engine) as s:
        secret = s.get(User, user.id).totp_pending_secret  # type: ignore[union-attr]
    r = client.post("/account/2fa/confirm", data={"code": code_at(secret)})
    assert r.status_code == 200 and 'id="signed-out-others"' in r.text
    assert (
        raw_client.get("/api/v1/me", headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    )
    raw_client.cookies.set(SESSION_COOKIE, elsewhere)
    assert raw_client.get("/account").status_code in (302, 303, 401)
    assert client.get("/account").status_code == 200  # this browser stays signed in
    with Session(engine) as s:
        live = s.exec(
            select(UserSession).where(
                UserSession.user_id == user.id, col(UserSession.revoked_at).is_(None)
            )
        ).all()
        assert len(live) == 1
        assert all(t.revoked_at for t in s.exec(select(ApiToken)).all())


def test_the_page_offers_an_otpauth_link_and_the_codes_as_a_download(
    client: Any, engine: Engine, make_user: Callable[..., User], login: Any
) -> None:
    user = make_user(password=STRONG)
    login(client, user)
    client.post("/account/2fa/start")
    page = client.get("/account/2fa").text
    link = re.search(r'id="totp-link" href="([^"]+)"', page)
    assert link and link.group(1).startswith("otpauth://totp/")
    with Session(engine) as s:
        secret = s.get(User, user.id).totp_pending_secret  # type: ignore[union-attr]
    assert f"secret={secret}" in link.group(1)
    r = client.post("/account/2fa/confirm", data={"code": code_at(secret)})
    codes = re.findall(r"<code>([a-z2-9]{5}-[a-z2-9]{5})</code>", r.text)
    download = re.search(r'id="recovery-codes-download" download="[^"]+" href="([^"]+)"', r.text)
    assert download and download.group(1).startswith("data:text/plain")
    assert unquote(download.group(1).split(",", 1)[1]).split() == codes
