"""Nothing one request does can stall the process (issue 13), in-process checks.

- SQLite: a GET reads without the write lock; a POST's transaction takes it at BEGIN.
- A locked database answers 503 with Retry-After: as a page, an htmx fragment and JSON.
- Pool exhaustion and PostgreSQL serialisation failures answer the same 503.
- Request bodies: a declared length over the cap is refused at once (413); a streamed body
  is counted (413); a body that does not arrive in time is refused (408).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.clock import FixedClock
from app.db import reader, writer
from app.main import create_app
from app.orders.models import Order
from app.settings import Settings
from app.web import middleware
from tests.conftest import AppClient, _with_csrf_cookie
from tests.ops.helpers import seed_catalog, ssh_public_key
from tests.support.factories import fund


def awaiting_order(engine: Engine, user: User, now: datetime, key: str = "k1") -> Order:
    """An order waiting for payment, and the balance to pay it."""
    from app.orders import service

    with Session(engine, expire_on_commit=False) as s:
        draft, errors = service.parse_draft(
            {
                "sku": "hgx-h100",
                "nodes": "1",
                "image": "ubuntu-24.04-cuda",
                "new_key_name": "laptop",
                "new_key_text": ssh_public_key(),
            }
        )
        assert not errors, errors
        u = s.get(User, user.id)
        assert u is not None
        order, _ = service.create_order(s, user=u, draft=draft, idempotency_key=key, now=now)
        s.commit()
    fund(engine, user, order.monthly_total_cents, now, key=f"fund-{key}")
    return order


@contextmanager
def sqlite_write_lock(url: str) -> Iterator[sqlite3.Connection]:
    """Another connection holding SQLite's write lock."""
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


@pytest.fixture
def sqlite_url(sqlite_template: Any, tmp_path: Any) -> str:
    import shutil

    target = tmp_path / "busy.db"
    shutil.copy(sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def busy_app(sqlite_url: str, clock: FixedClock) -> Iterator[FastAPI]:
    """The app on a SQLite file with a short busy timeout (a locked database shows fast)."""
    from tests.conftest import TEST_SECRET

    settings = Settings(
        environment="test",
        database_url=sqlite_url,
        secret_key=TEST_SECRET,
        simulation=True,
        sqlite_busy_timeout_ms=300,
    )
    application = create_app(settings, clock=clock)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def busy_client(busy_app: FastAPI) -> Iterator[AppClient]:
    with AppClient(busy_app, base_url="http://testserver", follow_redirects=False) as c:
        _with_csrf_cookie(c)
        yield c


def _user(engine: Engine, now: datetime, email: str = "busy@example.com") -> User:
    from app.accounts.security import hash_password

    with Session(engine, expire_on_commit=False) as s:
        u = User(email=email, password_hash=hash_password("correct horse battery"), created_at=now)
        s.add(u)
        s.commit()
        s.refresh(u)
        return u


def _login(client: AppClient, engine: Engine, user: User, now: datetime) -> None:
    from app.accounts.security import SESSION_COOKIE, create_session
    from tests.conftest import TEST_SECRET

    with Session(engine) as s:
        cookie = create_session(s, user, now, TEST_SECRET)
        s.commit()
    client.cookies.set(SESSION_COOKIE, cookie)


# --- SQLite: reads deferred, writes immediate -----------------------------------------------


def test_sqlite_read_session_takes_no_write_lock_and_writer_does(sqlite_url: str) -> None:
    from app.db import make_engine

    engine = make_engine(sqlite_url, busy_timeout_ms=100)
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None, timeout=0)
    try:
        with Session(reader(engine)) as reading:
            reading.exec(text("SELECT 1"))  # type: ignore[call-overload]
            other.execute("BEGIN IMMEDIATE")  # a reader does not stand in a writer's way
            other.execute("ROLLBACK")
        with Session(writer(engine)) as writing:
            writing.exec(text("SELECT 1"))  # type: ignore[call-overload]
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")  # the writer holds the lock from BEGIN
    finally:
        other.close()
        engine.dispose()


def test_pages_read_while_another_connection_holds_the_write_lock(
    busy_app: FastAPI, busy_client: AppClient, sqlite_url: str, clock: FixedClock
) -> None:
    engine = busy_app.state.engine
    seed_catalog(engine, clock.now())
    user = _user(engine, clock.now())
    order = awaiting_order(engine, user, clock.now())
    _login(busy_client, engine, user, clock.now())
    with sqlite_write_lock(sqlite_url):
        assert busy_client.get("/nodes").status_code == 200
        assert busy_client.get("/deploy").status_code == 200
        assert busy_client.get(f"/orders/{order.id}/review").status_code == 200
        # The console marks notifications read in a short write of its own: with the lock
        # taken that write waits and gives up -> 503, never a 500.
        assert busy_client.get("/console").status_code in (200, 503)
    assert busy_client.get("/console").status_code == 200


# --- 503 + Retry-After ---------------------------------------------------------------------


def test_locked_database_answers_503_with_retry_after_page_fragment_and_api(
    busy_app: FastAPI, busy_client: AppClient, sqlite_url: str, clock: FixedClock
) -> None:
    from app.accounts.security import create_api_token

    engine = busy_app.state.engine
    seed_catalog(engine, clock.now())
    user = _user(engine, clock.now())
    order = awaiting_order(engine, user, clock.now())
    _login(busy_client, engine, user, clock.now())
    with Session(engine) as s:
        u = s.get(User, user.id)
        assert u is not None
        _row, token = create_api_token(s, u, "busy", clock.now())
        s.commit()
    with sqlite_write_lock(sqlite_url):
        page = busy_client.post(f"/orders/{order.id}/pay", data={"idempotency_key": "p1"})
        fragment = busy_client.post(
            f"/orders/{order.id}/pay",
            data={"idempotency_key": "p1"},
            headers={"HX-Request": "true"},
        )
        with TestClient(busy_app, base_url="http://testserver") as api_client:
            api = api_client.post(
                f"/api/v1/orders/{order.id}/cancel", headers={"Authorization": f"Bearer {token}"}
            )
    for r in (page, fragment, api):
        assert r.status_code == 503, (r.status_code, r.text[:300])
        assert int(r.headers["retry-after"]) >= 1
    assert "<html" in page.text.lower() and "Try again in a few seconds" in page.text
    assert "<html" not in fragment.text.lower() and "Try again in a few seconds" in fragment.text
    assert fragment.headers.get("hx-retarget") == "#flash-region"
    assert api.json()["error"]["code"] == "busy"
    # Nothing changed: the order still waits for payment, and paying now works.
    with Session(engine) as s:
        o = s.get(Order, order.id)
        assert o is not None and o.status == "awaiting_payment"
    r = busy_client.post(f"/orders/{order.id}/pay", data={"idempotency_key": "p1"})
    assert r.status_code == 303


def test_pool_exhaustion_and_serialisation_failures_answer_503(
    busy_app: FastAPI, busy_client: AppClient
) -> None:
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    @busy_app.get("/_test/pool")
    def pool() -> None:
        raise PoolTimeout("QueuePool limit of size 10 overflow 10 reached")

    @busy_app.get("/api/_test/serialize")
    def serialize() -> None:
        raise OperationalError(
            "UPDATE ...", {}, Exception("could not serialize access due to concurrent update")
        )

    r = busy_client.get("/_test/pool")
    assert r.status_code == 503 and r.headers["retry-after"]
    r = busy_client.get("/api/_test/serialize")
    assert r.status_code == 503 and r.json()["error"]["code"] == "busy"


# --- Request bodies ------------------------------------------------------------------------


def test_declared_body_over_the_cap_is_refused_before_reading(
    busy_client: AppClient, busy_app: FastAPI
) -> None:
    calls: list[int] = []

    @busy_app.post("/_test/echo")
    def echo() -> dict[str, int]:  # pragma: no cover - must not be reached
        calls.append(1)
        return {"ok": 1}

    big = b"x" * (middleware.DEFAULT_BODY_LIMIT + 1)
    r = busy_client.post("/_test/echo", content=big, headers={"Content-Type": "text/plain"})
    assert r.status_code == 413 and calls == []
    r = busy_client.post(
        "/api/v1/sizing", content=big, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    r = busy_client.post(
        "/payments/webhook", content=b"{" + b" " * (64 * 1024) + b"}", headers={"btcpay-sig": "x"}
    )
    assert r.status_code == 413
    # Under the cap it goes through as before.
    r = busy_client.post("/_test/echo", content=b"hello", headers={"Content-Type": "text/plain"})
    assert r.status_code == 200 and calls == [1]


def test_body_limits_per_route() -> None:
    assert middleware.body_limit_for("/login") == 1024 * 1024
    assert middleware.body_limit_for("/payments/webhook") == 64 * 1024


def _run_asgi(
    app: Callable[..., Any], chunks: list[bytes | None], headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes, list[int]]:
    """Drive a pure ASGI app: ``None`` in ``chunks`` means the client stalls for good."""
    sent: list[dict[str, Any]] = []
    inner_calls: list[int] = []

    async def receive() -> dict[str, Any]:
        if not chunks:
            await asyncio.sleep(3600)
        chunk = chunks.pop(0)
        if chunk is None:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/login", "headers": headers}
    asyncio.run(app(scope, receive, send))
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), 0)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, inner_calls


def test_slow_body_gets_408_without_reaching_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(middleware, "BODY_READ_TIMEOUT_S", 0.2)
    reached: list[int] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(1)

    status, _body, _ = _run_asgi(
        middleware.BodyLimit(inner), [b"email=a", None], [(b"content-length", b"100")]
    )
    assert status == 408 and reached == []


def test_streamed_body_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(middleware, "DEFAULT_BODY_LIMIT", 1000)
    reached: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        msg = await receive()
        reached.append(msg["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    chunked = [(b"transfer-encoding", b"chunked")]
    status, _b, _ = _run_asgi(middleware.BodyLimit(inner), [b"x" * 600, b"x" * 600], chunked)
    assert status == 413 and reached == []
    status, _b, _ = _run_asgi(middleware.BodyLimit(inner), [b"x" * 400, b"y" * 400], chunked)
    assert status == 200 and reached == [b"x" * 400 + b"y" * 400]
