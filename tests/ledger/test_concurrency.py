"""200 concurrent debits against a balance that affords exactly 37 of them.

SQLite: 200 threads, each with its own session (BEGIN IMMEDIATE serialises writers).
PostgreSQL: three uvicorn processes serving HTTP, 200 concurrent requests (row lock +
conditional UPDATE).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.accounts.models import User
from app.accounts.security import create_api_token
from app.clock import FixedClock
from app.db import make_engine
from app.ledger import service as ledger
from app.ledger.service import InsufficientBalance
from app.reconcile import run_checks
from tests.support.factories import fund

ROOT = Path(__file__).resolve().parents[2]
PRICE = 12_345
AFFORDS = 37
N = 200
START_BALANCE = PRICE * AFFORDS + PRICE - 1  # 37 fit, the 38th is short by one cent


def test_sqlite_threads(
    make_user: Callable[..., Any], engine: Engine, clock: FixedClock, db_url: str
) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("the PostgreSQL variant runs several processes below")
    user = make_user()
    fund(engine, user.id, START_BALANCE, clock.now(), "fund")
    barrier = threading.Barrier(N)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(i: int) -> None:
        barrier.wait()
        with Session(engine) as s:
            try:
                ledger.place_hold(
                    s,
                    user_id=user.id,
                    amount_cents=PRICE,
                    idempotency_key=f"k{i}",
                    now=clock.now(),
                    reason="t",
                )
                s.commit()
                result = "ok"
            except InsufficientBalance:
                s.commit()  # keep the declined attempt
                result = "short"
        with lock:
            outcomes.append(result)

    with ThreadPoolExecutor(max_workers=N) as pool:
        list(pool.map(attempt, range(N)))
    assert outcomes.count("ok") == AFFORDS and outcomes.count("short") == N - AFFORDS
    with Session(engine) as s:
        assert ledger.balance_summary(s, user.id) == (PRICE - 1, PRICE * AFFORDS)
        assert run_checks(s) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def servers(pg_url: str) -> Iterator[list[int]]:
    ports = [_free_port() for _ in range(3)]
    env = {
        **os.environ,
        "APP_DATABASE_URL": pg_url,
        "APP_ENVIRONMENT": "test",
        "APP_SECRET_KEY": "concurrency-test-secret-key-0123456789abcdef",
        "APP_SIMULATION": "false",
        "APP_LOG_LEVEL": "WARNING",
        "APP_DB_POOL_SIZE": "20",
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "tests.ledger.debit_app:make",
                "--host",
                "127.0.0.1",
                "--port",
                str(p),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # never read: a full pipe would block the server
        )
        for p in ports
    ]
    try:
        deadline = time.monotonic() + 60  # three cold starts on a busy 2-core machine
        for p in ports:
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{p}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start")
                time.sleep(0.1)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.postgres
def test_postgres_three_processes_over_http(
    pg_url: str, servers: list[int], clock: FixedClock
) -> None:
    engine = make_engine(pg_url)
    try:
        with Session(engine, expire_on_commit=False) as s:
            user = User(email="race@example.com", password_hash="x", created_at=clock.now())
            s.add(user)
            s.commit()
        fund(engine, user.id, START_BALANCE, clock.now(), "fund")
        with Session(engine) as s:
            _row, token = create_api_token(s, user, "race", clock.now())
            s.commit()

        async def fire() -> list[int]:
            limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
            async with httpx.AsyncClient(timeout=30, limits=limits) as c:
                headers = {"Authorization": f"Bearer {token}"}
                reqs = [
                    c.post(
                        f"http://127.0.0.1:{servers[i % len(servers)]}/api/test/debit",
                        json={"amount_cents": PRICE, "key": f"race-{i}"},
                        headers=headers,
                    )
                    for i in range(N)
                ]
                return [r.status_code for r in await asyncio.gather(*reqs)]

        codes = asyncio.run(fire())
        assert codes.count(201) == AFFORDS, codes
        assert codes.count(402) == N - AFFORDS, codes
        with Session(engine) as s:
            assert ledger.balance_summary(s, user.id) == (PRICE - 1, PRICE * AFFORDS)
            assert run_checks(s) == []
    finally:
        engine.dispose()
