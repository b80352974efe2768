"""Shared fixtures.

Every data-layer/HTTP test runs on SQLite, and again on PostgreSQL when
``TEST_DATABASE_URL`` is set (CI sets it). The schema is always built by the Alembic
migrations: once per run into a template (SQLite: a file copied per test; PostgreSQL:
tables truncated between tests).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from itsdangerous import URLSafeSerializer
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session, hash_password
from app.clock import FixedClock
from app.main import create_app, import_models
from app.settings import Settings
from app.web.csrf import bind as csrf_bind

TEST_SECRET = "test-secret-key-that-is-long-enough-0123456789"
CSRF_TOKEN = "test-csrf-token"
PG_URL = os.environ.get("TEST_DATABASE_URL")
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # a Tuesday

import_models()

pytest_plugins = ["tests.support.browser"]


def _backends() -> list[Any]:
    params: list[Any] = ["sqlite"]
    if PG_URL:
        params.append(pytest.param("postgres", marks=pytest.mark.postgres))
    return params


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.migrate import upgrade

    path = tmp_path_factory.mktemp("db") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


def _reset_postgres(url: str) -> None:
    from app.migrate import upgrade

    eng = create_engine(url)
    with eng.begin() as conn:
        conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    eng.dispose()
    upgrade(url)


@pytest.fixture(scope="session")
def postgres_ready() -> str:
    assert PG_URL
    _reset_postgres(PG_URL)
    return PG_URL


def truncate_all(url: str) -> None:
    from app.db import metadata

    eng = create_engine(url)
    names = ", ".join(f'"{t.name}"' for t in metadata.sorted_tables)
    with eng.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    eng.dispose()


@pytest.fixture(params=_backends())
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        target = tmp_path / "test.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    url = request.getfixturevalue("postgres_ready")
    truncate_all(url)
    return url


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """For tests that only make sense on PostgreSQL (several processes)."""
    if not PG_URL:
        pytest.skip("TEST_DATABASE_URL not set")
    url = request.getfixturevalue("postgres_ready")
    truncate_all(url)
    return url


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(
        environment="test",
        database_url=db_url,
        secret_key=TEST_SECRET,
        simulation=True,
        webhook_secret="test-webhook-secret",
        smtp_port=int(os.environ.get("TEST_SMTP_PORT", "8025")),
        # a price change from another app instance shows on the very next /size fragment;
        # the production interval has its own test (tests/configurator/test_fragment_cache.py)
        fragment_price_max_age_ms=0,
    )


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def app(settings: Settings, clock: FixedClock) -> Iterator[FastAPI]:
    application = create_app(settings, clock=clock)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def engine(app: FastAPI) -> Engine:
    return app.state.engine  # type: ignore[no-any-return]


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session for arranging and inspecting data; commit explicitly when arranging."""
    with Session(engine, expire_on_commit=False) as s:
        yield s


class AppClient(TestClient):
    """TestClient that sends the CSRF token on unsafe methods, as our pages do."""

    csrf = True

    def request(self, method: str, url: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if self.csrf and method.upper() not in ("GET", "HEAD", "OPTIONS"):
            headers = dict(kwargs.pop("headers", None) or {})
            # The token of the client's current cookie (login/logout rotate it), as a page would.
            token = CSRF_TOKEN
            raw = self.cookies.get("csrftoken")
            if raw:
                try:
                    token = URLSafeSerializer(TEST_SECRET, salt="csrf").loads(raw)
                except Exception:  # noqa: BLE001 - a garbled cookie: send the default
                    token = CSRF_TOKEN
            # Signed in: the token is bound to the session cookie (app/web/csrf.py).
            token = csrf_bind(TEST_SECRET, self.cookies.get(SESSION_COOKIE), token)
            headers.setdefault("X-CSRF-Token", token)
            kwargs["headers"] = headers
        return super().request(method, url, **kwargs)


def _with_csrf_cookie(client: TestClient) -> None:
    value = URLSafeSerializer(TEST_SECRET, salt="csrf").dumps(CSRF_TOKEN)
    client.cookies.set("csrftoken", value)


@pytest.fixture
def client(app: FastAPI) -> Iterator[AppClient]:
    with AppClient(app, base_url="http://testserver", follow_redirects=False) as c:
        _with_csrf_cookie(c)
        yield c


@pytest.fixture
def raw_client(app: FastAPI) -> Iterator[TestClient]:
    """No automatic CSRF token: for testing that protection."""
    with TestClient(app, base_url="http://testserver", follow_redirects=False) as c:
        yield c


@pytest.fixture
def make_user(engine: Engine, clock: FixedClock) -> Callable[..., User]:
    counter = {"n": 0}

    def _make(
        role: str = "customer", email: str | None = None, password: str = "correct horse battery"
    ) -> User:
        counter["n"] += 1
        with Session(engine, expire_on_commit=False) as s:
            user = User(
                email=email or f"{role}{counter['n']}@example.com",
                password_hash=hash_password(password),
                role=role,
                created_at=clock.now(),
            )
            s.add(user)
            s.commit()
            s.refresh(user)
            return user

    return _make


@pytest.fixture
def login(
    app: FastAPI, engine: Engine, clock: FixedClock
) -> Callable[[TestClient, User], TestClient]:
    """Log a client in as a user by creating a real server-side session."""

    def _login(c: TestClient, user: User) -> TestClient:
        with Session(engine) as s:
            cookie = create_session(s, user, clock.now(), TEST_SECRET)
            s.commit()
        c.cookies.set(SESSION_COOKIE, cookie)
        return c

    return _login


@pytest.fixture
def new_client(app: FastAPI) -> Callable[[], AppClient]:
    """Another browser (its own cookies) against the same app."""
    made: list[AppClient] = []

    def _new() -> AppClient:
        c = AppClient(app, base_url="http://testserver", follow_redirects=False)
        c.__enter__()
        _with_csrf_cookie(c)
        made.append(c)
        return c

    yield _new  # type: ignore[misc]
    for c in made:
        c.__exit__(None, None, None)
