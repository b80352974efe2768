"""Concurrent deliveries of one notification (threads, separate transactions) credit once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FixedClock
from app.ledger import service as ledger
from app.payments import service as payments
from app.reconcile import run_checks

from .conftest import Provider


def test_concurrent_redeliveries_credit_once(
    provider: Provider,
    topup: Callable[..., Any],
    make_user: Callable[..., Any],
    engine: Engine,
    clock: FixedClock,
) -> None:
    user = make_user()
    inv = topup(user.id, 77_700, "USDT")
    provider.pay(inv.id, int(inv.due_units))
    bodies = [provider.body(inv.id, "InvoiceSettled", delivery_id=f"d{i % 5}") for i in range(40)]
    barrier = threading.Barrier(len(bodies))

    def deliver(body: bytes) -> bool:
        barrier.wait()
        with Session(engine) as s:
            out = payments.handle_webhook(
                s,
                body,
                payments.sign(body, provider.secret),
                secret=provider.secret,
                now=clock.now(),
            )
            s.commit()
            return bool(out["credited"])

    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        credited = list(pool.map(deliver, bodies))
    assert credited.count(True) == 1
    with Session(engine) as s:
        assert ledger.available_cents(s, user.id) == 77_700
        assert run_checks(s) == []
