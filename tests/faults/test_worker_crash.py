"""kill -9 a worker in the middle of renewals, run it again (and a second one beside it):
each lease period is charged exactly once and the ledger reconciles."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from app.accounts.models import User
from app.accounts.security import hash_password
from app.clock import SimulatedClock
from app.ledger import service as ledger
from app.orders.models import Order, RenewalCharge
from app.reconcile import run_checks
from tests.support.servers import app_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
ORDERS = 120
PRICE = 1_690_000


def _worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "app", "worker", "--once"],
        cwd=ROOT,
        env=app_env(url, APP_SMTP_PORT="1"),  # no mail catcher: the outbox just retries later
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _charges(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(RenewalCharge)).one())


def test_killed_worker_then_two_workers_charge_each_period_once(
    pg_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    engine = create_engine(pg_url)
    now = SimulatedClock(engine).now()
    with Session(engine, expire_on_commit=False) as s:
        users = []
        for i in range(ORDERS // 4):
            u = User(
                email=f"renew{i}@example.com",
                password_hash=hash_password("renewal-pass-123"),
                created_at=now,
            )
            s.add(u)
            s.flush()
            assert u.id is not None
            # Each customer can pay every renewal due (4 leases × 1 month).
            ledger.grant_promotion(
                s,
                user_id=u.id,
                amount_cents=4 * PRICE,
                reason="renewals",
                now=now,
                idempotency_key=f"r{u.id}",
            )
            users.append(u)
        for i in range(ORDERS):
            u = users[i % len(users)]
            s.add(
                Order(
                    user_id=u.id,
                    idempotency_key=f"lease-{i}",
                    status="delivered",
                    sku_id="hgx-h100",
                    quantity=1,
                    image_id="ubuntu-24.04-cuda",
                    unit_price_cents=PRICE,
                    monthly_total_cents=PRICE,
                    created_at=now - timedelta(days=40),
                    paid_at=now - timedelta(days=40),
                    delivered_at=now - timedelta(days=32),
                    period_start=now - timedelta(days=32),
                    period_end=now - timedelta(days=1),
                    periods_paid=1,
                )
            )
        s.commit()

    victim = _worker(pg_url, log)
    # Kill it once the renewal run has visibly begun (a charge is committed), not after a
    # guessed sleep; then prove the kill landed mid-run: some periods charged, not all.
    deadline = time.monotonic() + 120
    while _charges(engine) == 0 and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(victim.pid, 9)
    victim.wait(10)
    at_kill = _charges(engine)
    assert 0 < at_kill < ORDERS, f"the kill did not land mid-run: {at_kill} of {ORDERS} charged"
    a, b = _worker(pg_url, log), _worker(pg_url, log)
    assert (a.wait(120), b.wait(120)) == (0, 0), log.read_text()[-3000:]

    with Session(engine) as s:
        charges = s.exec(select(RenewalCharge)).all()
        per_order: dict[int, int] = {}
        for c in charges:
            per_order[c.order_id] = per_order.get(c.order_id, 0) + 1
        assert len(per_order) == ORDERS, f"{len(per_order)} of {ORDERS} leases renewed"
        assert set(per_order.values()) == {1}
        assert all(c.status == "paid" for c in charges)
        renewed = s.exec(
            select(func.count()).select_from(Order).where(col(Order.periods_paid) == 2)
        ).one()
        assert renewed == ORDERS
        for u_id in {o.user_id for o in s.exec(select(Order)).all()}:
            assert ledger.available_cents(s, u_id) == 0  # 4 × PRICE granted, 4 renewals charged
        assert run_checks(s) == []
    engine.dispose()
