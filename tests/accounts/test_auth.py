"""Sign-up, login, logout, sessions and throttling through the real pages."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.accounts import service, throttle
from app.accounts.audit import AuditEvent
from app.accounts.models import AuthFailure, User, UserSession
from app.accounts.security import SESSION_COOKIE
from app.clock import FixedClock
from app.errors import InvalidInput, TooManyRequests
from app.main import create_app
from app.settings import Settings
from tests.accounts.helpers import STRONG, reset_csrf, signup, web_login, web_logout
from tests.conftest import AppClient, _with_csrf_cookie

GENERIC = "That email and password do not match an account."


def _set_cookie_headers(r: Any) -> list[str]:
    return [v for k, v in r.headers.multi_items() if k.lower() == "set-cookie"]


def test_signup_normalises_email_and_logs_in(client: TestClient, engine: Engine) -> None:
    r = signup(client, "  Ann.Lee@Example.COM ", next="/nodes")
    assert r.status_code == 303 and r.headers["location"] == "/nodes"
    cookies = [c for c in _set_cookie_headers(r) if c.startswith(SESSION_COOKIE + "=")]
    assert len(cookies) == 1
    low = cookies[0].lower()
    assert "httponly" in low and "samesite=lax" in low and "path=/" in low
    assert "secure" not in low  # test environment; see test_cookie_is_secure_in_production
    assert client.get("/account").status_code == 200
    with Session(engine) as s:
        user = s.exec(select(User)).one()
        assert user.email == "ann.lee@example.com" and user.role == "customer"
        assert user.password_hash.startswith("$argon2id$")


def test_cookie_is_secure_in_production(db_url: str, clock: FixedClock) -> None:
    settings = Settings(
        environment="production",
        database_url=db_url,
        secret_key="prod-secret-0123456789-abcdefghijklmnopqrstuv",
        base_url="https://gpunodes.example",
        webhook_secret="webhook-secret-0123456789-abcdef",
        force_simulation=True,
        allowed_hosts="testserver",
    )
    app = create_app(settings, clock=clock)
    with AppClient(app, base_url="https://testserver", follow_redirects=False) as c:
        from itsdangerous import URLSafeSerializer

        from tests.conftest import CSRF_TOKEN

        c.cookies.set(
            "csrftoken",
            URLSafeSerializer("prod-secret-0123456789-abcdefghijklmnopqrstuv", salt="csrf").dumps(
                CSRF_TOKEN
            ),
        )
        r = c.post("/signup", data={"email": "prod@example.com", "password": STRONG})
        assert r.status_code == 303
        for cookie in _set_cookie_headers(r):
            assert "secure" in cookie.lower(), cookie
        assert "max-age=63072000" in r.headers["strict-transport-security"]
    app.state.engine.dispose()


def test_signup_errors_next_to_fields_and_keep_the_email(client: TestClient) -> None:
    r = client.post("/signup", data={"email": "not-an-email", "password": "short"})
    assert r.status_code == 422
    assert 'id="e-email"' in r.text and 'id="e-password"' in r.text
    assert 'value="not-an-email"' in r.text
    assert "short" not in r.text.split("<main", 1)[1]  # the password is never re-filled
    r = client.post("/signup", data={"email": "bob@example.com", "password": "bob@example.com"})
    assert r.status_code == 422 and "must not be your email" in r.text


def test_duplicate_signup_is_refused_without_creating_anything(
    client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="taken@example.com")
    r = client.post("/signup", data={"email": "TAKEN@example.com", "password": STRONG})
    assert r.status_code == 422 and "can&#39;t be used for a new account" in r.text
    with Session(engine) as s:
        assert len(s.exec(select(User)).all()) == 1
        assert s.exec(select(UserSession)).all() == []


def test_login_logout_and_next_only_same_site(
    client: TestClient, make_user: Callable[..., User]
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    r = web_login(client, "Ann@Example.com", next="/console?x=1")
    assert r.status_code == 303 and r.headers["location"] == "/console?x=1"
    web_logout(client)
    for evil in (
        "https://evil.example/",
        "//evil.example",
        "/\\evil.example",
        "javascript:alert(1)",
    ):
        r = web_login(client, "ann@example.com", next=evil)
        assert r.headers["location"] == "/console", evil
        web_logout(client)
    r = client.get("/login?next=//evil.example")
    assert 'name="next" value="/console"' in r.text


def test_login_messages_never_reveal_whether_the_email_exists(
    client: TestClient, make_user: Callable[..., User]
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    wrong = client.post("/login", data={"email": "ann@example.com", "password": "wrong password!"})
    unknown = client.post(
        "/login", data={"email": "nobody@example.com", "password": "wrong password!"}
    )
    assert wrong.status_code == unknown.status_code == 422
    assert GENERIC in wrong.text and GENERIC in unknown.text
    # Five more of each: both lock identically.
    for _ in range(5):
        wrong = client.post("/login", data={"email": "ann@example.com", "password": "x" * 12})
        unknown = client.post("/login", data={"email": "nobody@example.com", "password": "x" * 12})
    assert wrong.status_code == unknown.status_code == 429
    assert wrong.text.replace("ann@", "X@") == unknown.text.replace("nobody@", "X@")


def test_logout_revokes_the_server_side_session(
    client: TestClient, new_client: Callable[[], AppClient], make_user: Callable[..., User]
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    web_login(client, "ann@example.com")
    stolen = client.cookies.get(SESSION_COOKIE)
    other = new_client()
    other.cookies.set(SESSION_COOKIE, stolen)
    assert other.get("/account").status_code == 200
    r = web_logout(client)
    assert r.status_code == 303
    assert any(
        c.startswith(SESSION_COOKIE + '=""') or "max-age=0" in c.lower()
        for c in _set_cookie_headers(r)
    )
    assert other.get("/account").status_code == 303  # the copied cookie died too


def test_login_rotates_session_and_csrf(
    client: TestClient, make_user: Callable[..., User], engine: Engine
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    before_csrf = client.cookies.get("csrftoken")
    r = client.post("/login", data={"email": "ann@example.com", "password": STRONG})
    assert any(c.startswith("csrftoken=") for c in _set_cookie_headers(r))
    assert r.cookies.get("csrftoken") != before_csrf
    reset_csrf(client)
    first = client.cookies.get(SESSION_COOKIE)
    web_login(client, "ann@example.com")  # log in again in the same browser
    assert client.cookies.get(SESSION_COOKIE) != first
    with Session(engine) as s:
        rows = s.exec(select(UserSession).order_by(UserSession.id)).all()  # type: ignore[arg-type]
        assert rows[0].revoked_at is not None and rows[1].revoked_at is None


def test_throttling_per_account_then_recovers(
    client: TestClient, make_user: Callable[..., User], clock: FixedClock
) -> None:
    make_user(email="ann@example.com", password=STRONG)
    for _ in range(5):
        r = client.post("/login", data={"email": "ann@example.com", "password": "wrong password"})
        assert r.status_code == 422
    r = client.post("/login", data={"email": "ann@example.com", "password": STRONG})
    assert r.status_code == 429 and "Too many attempts" in r.text  # even the right password
    clock.advance(timedelta(minutes=16))
    assert web_login(client, "ann@example.com").status_code == 303


def test_throttling_per_address(client: TestClient) -> None:
    for i in range(20):
        r = client.post("/login", data={"email": f"u{i}@example.com", "password": "wrong password"})
        assert r.status_code == 422
    r = client.post("/login", data={"email": "fresh@example.com", "password": "wrong password"})
    assert r.status_code == 429


def test_throttling_holds_across_two_app_instances(
    settings: Settings, clock: FixedClock, make_user: Callable[..., User]
) -> None:
    """Two processes (two apps, two engines) sharing one database count the same failures."""
    make_user(email="ann@example.com", password=STRONG)
    apps = [create_app(settings, clock=clock), create_app(settings, clock=clock)]
    clients = [AppClient(a, base_url="http://testserver", follow_redirects=False) for a in apps]
    try:
        for c in clients:
            c.__enter__()
            _with_csrf_cookie(c)
        for i in range(5):
            r = clients[i % 2].post(
                "/login", data={"email": "ann@example.com", "password": "nope nope nope"}
            )
            assert r.status_code == 422
        for c in clients:
            r = c.post("/login", data={"email": "ann@example.com", "password": STRONG})
            assert r.status_code == 429
    finally:
        for c in clients:
            c.__exit__(None, None, None)
        for a in apps:
            a.state.engine.dispose()


def test_failures_count_even_when_the_caller_rolls_back(engine: Engine, clock: FixedClock) -> None:
    """A caller that lets the error propagate (its transaction rolls back) still counts."""
    for _ in range(5):
        with Session(engine) as s:
            try:
                service.authenticate(
                    s,
                    email="who@example.com",
                    password="bad password",
                    now=clock.now(),
                    ip="10.0.0.9",
                )
            except InvalidInput:
                s.rollback()
    with Session(engine) as s:
        assert throttle.failures(s, throttle.LOGIN_ACCOUNT, "who@example.com", clock.now()) == 5
        assert throttle.failures(s, throttle.LOGIN_ADDRESS, "10.0.0.9", clock.now()) == 5
        assert len(s.exec(select(AuditEvent).where(AuditEvent.action == "login.failed")).all()) == 5
        try:
            service.authenticate(
                s, email="who@example.com", password="bad password", now=clock.now()
            )
        except TooManyRequests:
            pass
        else:  # pragma: no cover
            raise AssertionError("not throttled")
        keys = [r.key for r in s.exec(select(AuthFailure)).all()]
        assert all("who@" not in k and "10.0.0.9" not in k for k in keys)  # stored hashed


def test_disabled_account_cannot_log_in_and_is_signed_out(
    client: TestClient,
    make_user: Callable[..., User],
    login: Any,
    engine: Engine,
    clock: FixedClock,
) -> None:
    ann = make_user(email="ann@example.com", password=STRONG)
    ops = make_user(role="ops")
    login(client, ann)
    assert client.get("/account").status_code == 200
    with Session(engine) as s:
        service.set_active(s, s.get(User, ops.id), ann.id, False, clock.now())  # type: ignore[arg-type]
        s.commit()
    assert client.get("/account").status_code == 303
    r = client.post("/login", data={"email": "ann@example.com", "password": STRONG})
    assert r.status_code == 403 and "disabled" in r.text
    r = client.post("/login", data={"email": "ann@example.com", "password": "wrong password"})
    assert r.status_code == 422 and "disabled" not in r.text  # no hint without the password


def test_anonymous_get_redirects_to_login_with_next(raw_client: TestClient) -> None:
    r = raw_client.get("/account?tab=keys")
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/account%3Ftab%3Dkeys"


def test_logged_in_visitor_skips_login_page(
    client: TestClient, make_user: Callable[..., User], login: Any
) -> None:
    login(client, make_user())
    assert client.get("/login?next=/nodes").headers["location"] == "/nodes"
    assert client.get("/signup").headers["location"] == "/account"


def test_inline_errors_for_forms_that_embed_the_account_step() -> None:
    assert service.inline_errors(mode="signup", email="ann@example.com", password=STRONG) == {}
    errs = service.inline_errors(mode="signup", email="bad", password="short")
    assert set(errs) == {"email", "password"}
    assert service.inline_errors(mode="login", email="ann@example.com", password="") == {
        "password": "Enter your password."
    }
    assert "account_mode" in service.inline_errors(
        mode="hack", email="a@example.com", password=STRONG
    )


def test_too_many_signups_from_one_network_say_so_without_a_password_reset(
    client: TestClient,
) -> None:
    """The sign-up limit (10 an hour per address) has no account to reset a password for."""
    for i in range(10):
        client.cookies.delete(SESSION_COOKIE)
        assert signup(client, f"n{i}@example.com").status_code == 303
    client.cookies.delete(SESSION_COOKIE)
    r = signup(client, "n10@example.com")
    assert r.status_code == 429
    assert "Too many new accounts from this network" in r.text
    assert "reset your password" not in r.text
