"""No request can stall a process (issue 13), against real uvicorn processes.

- Another connection holds the SQLite write lock (PostgreSQL: row locks) for a few seconds
  while POST /deploy, pay, top-up and cancel are in flight: /healthz and /nodes on the same
  process answer while the lock is still held (an order of events, not a timing).
- PostgreSQL, one worker process and several: 20 parallel form POSTs to pay, to cancel and
  a double-submitted /deploy all finish (303 for the winner, 303 or 409 for the rest, 503
  allowed; never 500 or no answer), each takes effect once, /healthz answers throughout.
- 10 slow-body clients do not stop /nodes from answering; a declared 300 MB body gets 413
  without the body being sent; a 1 MB request header is refused (4xx).
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeSerializer
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.accounts.models import User
from app.accounts.security import SESSION_COOKIE, create_session, hash_password
from app.clock import SimulatedClock
from app.db import make_engine
from app.orders.models import Order
from app.web.csrf import bind as csrf_bind
from tests.ops.helpers import paid_order, seed_catalog, ssh_public_key
from tests.support.servers import AppProcess, app_env, free_port
from tests.web.test_limits_and_busy import awaiting_order

SECRET = "test-secret-key-that-is-long-enough-0123456789"  # app_env's APP_SECRET_KEY
CSRF = "stall-test-csrf-token"
ALLOWED = {303, 409, 503}

pytestmark = [pytest.mark.slow]


@dataclass
class Arranged:
    user_id: int
    cookies: dict[str, str]
    pay_id: int  # awaiting payment, balance for exactly one first month
    topup_id: int  # awaiting payment
    cancel_id: int  # paid, late: cancelling refunds the first month in full
    funded_cents: int
    token: str = CSRF  # the form token for the signed-in clients (bound to their session)


def arrange(engine: Engine) -> Arranged:
    clock = SimulatedClock(engine)
    now = clock.now()
    past = now - timedelta(days=40)
    seed_catalog(engine, past)
    with Session(engine, expire_on_commit=False) as s:
        u = User(
            email=f"stall{time.monotonic_ns()}@example.com",
            password_hash=hash_password("correct horse battery"),
            created_at=past,
        )
        s.add(u)
        s.commit()
        s.refresh(u)
        cookie = create_session(s, u, now, SECRET)
        s.commit()
    late = paid_order(engine, u, past, key="late")  # promised weeks ago, never delivered
    to_pay = awaiting_order(engine, u, now, key="to-pay")
    to_top_up = awaiting_order(engine, u, now, key="to-top-up")
    with Session(engine) as s:
        from app.ledger import service as ledger

        funded = ledger.available_cents(s, u.id or 0)
    signer = URLSafeSerializer(SECRET, salt="csrf")
    assert late.id and to_pay.id and to_top_up.id and u.id
    return Arranged(
        user_id=u.id,
        cookies={SESSION_COOKIE: cookie, "csrftoken": signer.dumps(CSRF)},
        token=csrf_bind(SECRET, cookie, CSRF),
        pay_id=to_pay.id,
        topup_id=to_top_up.id,
        cancel_id=late.id,
        funded_cents=funded,
    )


def browser(url: str, a: Arranged) -> httpx.Client:
    return httpx.Client(base_url=url, cookies=a.cookies, follow_redirects=False, timeout=60)


def deploy_form(idem: str, token: str = CSRF) -> dict[str, Any]:
    return {
        "csrf_token": token,
        "sku": "hgx-h100",
        "nodes": "1",
        "image": "ubuntu-24.04-cuda",
        "new_key_name": f"key-{idem}",
        "new_key_text": ssh_public_key(),
        "idempotency_key": idem,
    }


@contextmanager
def server(
    url: str, tmp: Path, *, workers: int = 1, name: str = "app", **env: str
) -> Iterator[AppProcess]:
    extra = ["--workers", str(workers)] if workers > 1 else []
    p = AppProcess(
        port=free_port(),
        env=app_env(url, **env),
        log_path=tmp / f"{name}-{workers}.log",
        extra_args=extra,
    )
    p.start(wait=90)
    try:
        yield p
    finally:
        p.stop()


@contextmanager
def healthz_watch(url: str) -> Iterator[list[str]]:
    """Poll /healthz throughout; yields the list of problems seen."""
    problems: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=url, timeout=5) as c:
            while not stop.is_set():
                try:
                    r = c.get("/healthz")
                    if r.status_code != 200:
                        problems.append(f"status {r.status_code}")
                except httpx.HTTPError as e:
                    problems.append(repr(e))
                stop.wait(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        yield problems
    finally:
        stop.set()
        t.join(10)


def parallel(n: int, fn: Any) -> list[int]:
    """Run ``fn(i)`` in ``n`` threads at once; each returns a status (0: no answer)."""
    out = [0] * n
    gate = threading.Barrier(n)

    def run(i: int) -> None:
        gate.wait()
        try:
            out[i] = fn(i)
        except httpx.HTTPError:
            out[i] = 0

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


# --- the lock-holding test ------------------------------------------------------------------


@contextmanager
def hold_lock(url: str, user_id: int) -> Iterator[None]:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = create_engine(url)
    with engine.connect() as c:
        c.execute(text("SELECT 1 FROM users WHERE id = :u FOR UPDATE"), {"u": user_id})
        c.execute(text("SELECT 1 FROM orders WHERE user_id = :u FOR UPDATE"), {"u": user_id})
        c.execute(
            text("SELECT 1 FROM ledger_accounts WHERE user_id = :u FOR UPDATE"), {"u": user_id}
        )
        try:
            yield
        finally:
            c.rollback()
    engine.dispose()


@pytest.fixture
def live_url(db_url: str, tmp_path: Path) -> str:
    if db_url.startswith("sqlite"):
        # Its own file: the app server and this test share it.
        target = tmp_path / "live.db"
        shutil.copy(db_url.removeprefix("sqlite:///"), target)
        return f"sqlite:///{target}"
    return db_url


def test_healthz_answers_while_a_lock_holds_deploy_pay_topup_and_cancel(
    live_url: str, tmp_path: Path
) -> None:
    engine = make_engine(live_url)  # as the app opens it (SQLite: WAL from here on)
    a = arrange(engine)
    events: list[str] = []
    statuses: dict[str, int] = {}
    with server(live_url, tmp_path) as p:
        b = browser(p.url, a)
        # Signed out: no dependency touches the database before the handler does (the
        # case that froze the event loop when handlers were ``async def``).
        anon = httpx.Client(
            base_url=p.url,
            cookies={"csrftoken": a.cookies["csrftoken"]},
            follow_redirects=False,
            timeout=60,
        )
        signup = {
            **deploy_form("locked-signup"),
            "account_mode": "signup",
            "email": f"new{time.monotonic_ns()}@example.com",
            "password": "a long enough password 123",
        }
        posts = {
            "deploy_signup": lambda: anon.post("/deploy", data=signup),
            "deploy": lambda: b.post("/deploy", data=deploy_form("locked-deploy", a.token)),
            "pay": lambda: b.post(
                f"/orders/{a.pay_id}/pay", data={"csrf_token": a.token, "idempotency_key": "lp"}
            ),
            "topup": lambda: b.post(
                f"/orders/{a.topup_id}/topup",
                data={"csrf_token": a.token, "amount": "100000.00", "currency": "BTC"},
            ),
            "cancel": lambda: b.post(
                f"/orders/{a.cancel_id}/cancel", data={"csrf_token": a.token, "confirm": "yes"}
            ),
        }

        def run(name: str) -> None:
            try:
                statuses[name] = posts[name]().status_code
            except httpx.HTTPError:
                statuses[name] = 0
            events.append(f"done:{name}")

        with hold_lock(live_url, a.user_id):
            threads = [threading.Thread(target=run, args=(n,)) for n in posts]
            for t in threads:
                t.start()
            time.sleep(1.0)  # let them reach the server and wait on the lock
            with httpx.Client(base_url=p.url, timeout=4) as c:
                assert c.get("/healthz").status_code == 200
                events.append("healthz")
                assert c.get("/nodes").status_code == 200
                events.append("nodes")
            time.sleep(max(0.0, 5.0 - 1.0))
            events.append("release")
        for t in threads:
            t.join(60)
        b.close()
        anon.close()
    engine.dispose()
    release = events.index("release")
    assert events.index("healthz") < release and events.index("nodes") < release, events
    # The writers were really in flight behind the lock (pay locks the customer's rows
    # on PostgreSQL; on SQLite every write waits for the lock).
    assert events.index("done:pay") > release, events
    if live_url.startswith("sqlite"):
        assert all(events.index(f"done:{n}") > release for n in posts), events
    assert set(statuses) == set(posts)
    assert all(s in (303, 409, 422, 503) for s in statuses.values()), statuses


# --- the PostgreSQL storm of form POSTs -----------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("workers", [1, 3])
def test_parallel_form_posts_all_finish_and_take_effect_once(
    pg_url: str, tmp_path: Path, workers: int
) -> None:
    from app.ledger import service as ledger

    engine = create_engine(pg_url)
    a = arrange(engine)
    with Session(engine) as s:
        monthly = s.get(Order, a.pay_id).monthly_total_cents  # type: ignore[union-attr]
        late_monthly = s.get(Order, a.cancel_id).monthly_total_cents  # type: ignore[union-attr]
    with server(pg_url, tmp_path, workers=workers) as p, healthz_watch(p.url) as health:
        clients = [browser(p.url, a) for _ in range(20)]
        pay = parallel(
            20,
            lambda i: (
                clients[i]
                .post(
                    f"/orders/{a.pay_id}/pay",
                    data={"csrf_token": a.token, "idempotency_key": f"pay-{i % 3}"},
                )
                .status_code
            ),
        )
        cancel = parallel(
            20,
            lambda i: (
                clients[i]
                .post(
                    f"/orders/{a.cancel_id}/cancel",
                    data={"csrf_token": a.token, "confirm": "yes"},
                )
                .status_code
            ),
        )
        deploy = parallel(
            20,
            lambda i: clients[i].post("/deploy", data=deploy_form("double", a.token)).status_code,
        )
        nodes = clients[0].get("/nodes").status_code
        for c in clients:
            c.close()
    for name, got in (("pay", pay), ("cancel", cancel), ("deploy", deploy)):
        assert set(got) <= ALLOWED, (name, Counter(got))
        assert 303 in got, (name, Counter(got))
    assert health == [], health[:5]
    assert nodes == 200
    with Session(engine) as s:
        user = s.get(User, a.user_id)
        assert user is not None
        paid = s.get(Order, a.pay_id)
        cancelled = s.get(Order, a.cancel_id)
        assert paid is not None and paid.status == "paid"
        assert cancelled is not None and cancelled.status == "cancelled"
        made = s.exec(
            select(Order).where(
                Order.user_id == a.user_id,
                col(Order.id).notin_([a.pay_id, a.topup_id, a.cancel_id]),
            )
        ).all()
        assert len(made) == 1, [o.id for o in made]  # the double submit made one order
        available = ledger.available_cents(s, a.user_id)
        # One first month held for the paid order; the late order's month refunded once.
        assert available == a.funded_cents - monthly + late_monthly
    engine.dispose()


# --- slow and oversized bodies --------------------------------------------------------------

MB_1 = 1 << 20


def _raw(port: int, head: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head.encode())
    return s


def _status_of(s: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0


def test_slow_bodies_hold_no_slot_and_huge_declared_bodies_are_refused_unsent(
    live_url: str, tmp_path: Path
) -> None:
    if not live_url.startswith("sqlite"):
        pytest.skip("the edge behaves the same on both databases; once is enough")
    engine = make_engine(live_url)
    seed_catalog(engine, SimulatedClock(engine).now())
    engine.dispose()
    with server(live_url, tmp_path, APP_DB_POOL_SIZE="4") as p:
        slow = [
            _raw(
                p.port,
                "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-"
                "urlencoded\r\nContent-Length: 100\r\n\r\nemail=a",
            )
            for _ in range(10)
        ]
        try:
            with httpx.Client(base_url=p.url, timeout=5) as c:
                for _ in range(3):
                    assert c.get("/nodes").status_code == 200
                assert c.get("/login").status_code == 200
            for path in ("/payments/webhook", "/api/v1/sizing", "/login"):
                s = _raw(
                    p.port,
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: 314572800\r\n\r\n",
                )
                try:
                    assert _status_of(s) == 413, path  # answered with no body byte sent
                finally:
                    s.close()
            # The request line and headers are bounded too (the app's httptools protocol,
            # app/web/http1.py, feeds the parser at most 16 KB of them, as h11 would; stock
            # uvicorn httptools has no bound): a 1 MB header is refused, never held, and the
            # process answers on.
            status = 0
            try:
                s = _raw(
                    p.port, "GET /nodes HTTP/1.1\r\nHost: x\r\nX-Pad: " + "a" * MB_1 + "\r\n\r\n"
                )
                try:
                    status = _status_of(s)
                finally:
                    s.close()
            except OSError:  # reset while sending: refused as well
                status = 400
            assert 400 <= status < 500
            with httpx.Client(base_url=p.url, timeout=5) as c:
                assert c.get("/nodes").status_code == 200
        finally:
            for s in slow:
                s.close()


# --- the SQLite money storm -----------------------------------------------------------------


def test_sqlite_money_storm_through_two_processes_ends_exactly_k(
    live_url: str, tmp_path: Path
) -> None:
    """Two app processes on one SQLite file: checkouts serialise on BEGIN IMMEDIATE, so a
    storm against balances affording exactly k first months pays exactly k."""
    if not live_url.startswith("sqlite"):
        pytest.skip("the PostgreSQL storms live in test_storm_and_faults.py")
    from tests.support.storm import arrange as arrange_storm
    from tests.support.storm import storm, verify

    engine = make_engine(live_url)
    setup = arrange_storm(engine, customers=12, affords=lambda i: i % 3)  # k = 12
    with (
        server(live_url, tmp_path, name="one") as p1,
        server(live_url, tmp_path, name="two") as p2,
    ):
        result = storm([p1.url, p2.url], setup, attempts=120, concurrency=16, retry_seconds=60)
    assert result.statuses[-1] == 0, result
    assert sum(result.statuses.values()) == 120
    assert result.statuses[201] + result.statuses[200] == setup.expected_paid, result
    assert verify(engine, setup)["paid"] == setup.expected_paid
    engine.dispose()
