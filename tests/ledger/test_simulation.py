"""A seeded random workload against an auditor that predicts every balance.

Top-ups (paid in full, in part, over, late, never; notifications duplicated, redelivered
and out of order), holds placed / posted / voided (and resolved again), renewals charged,
ops adjustments, idempotent replays and conflicting keys, and failures halfway (an
exception injected at a random flush inside an operation, or a crash before commit):
after every step the touched balances must equal the auditor's, every N steps and at the
end the full reconciliation runs, and ``python -m app ledger check`` passes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FixedClock
from app.errors import DomainError
from app.ledger import service as ledger
from app.ledger.postings import cents_for_crypto
from app.ledger.service import HoldAlreadyResolved, IdempotencyConflict, InsufficientBalance
from app.payments import service as payments
from app.payments.rates import CURRENCIES
from app.reconcile import run_checks

ROOT = Path(__file__).resolve().parents[2]
STEPS = int(os.environ.get("LEDGER_SIM_STEPS", "5000"))
FULL_CHECK_EVERY = 500
EVENTS = ["InvoiceReceivedPayment", "InvoicePaymentSettled", "InvoiceSettled", "InvoiceProcessing"]


class Injected(RuntimeError):
    pass


@dataclass
class Inv:
    id: int
    user: int
    amount: int
    due: int
    currency: str
    rate: str
    paid: int = 0  # units seen inside the window
    credited: bool = False
    expires_at: Any = None
    monitoring_until: Any = None


@dataclass
class Model:
    avail: dict[int, int] = field(default_factory=dict)
    held: dict[int, int] = field(default_factory=dict)
    holds: dict[int, tuple[int, int, str]] = field(
        default_factory=dict
    )  # id → (user, amount, status)
    keys: dict[tuple[int, str], tuple[str, int, Any]] = field(
        default_factory=dict
    )  # → (cmd, amount, result)
    invoices: dict[int, Inv] = field(default_factory=dict)


def test_randomized_ledger_simulation(
    engine: Engine, clock: FixedClock, make_user: Callable[..., Any], db_url: str, settings: Any
) -> None:
    # The full run on the SQLite file; a shorter one on PostgreSQL (row locks, rollbacks).
    steps = STEPS if db_url.startswith("sqlite") else min(STEPS, 400)
    seed = int(os.environ.get("LEDGER_SIM_SEED", "20261201"))
    rng = random.Random(seed)
    users = [make_user().id for _ in range(5)]
    ops_user = make_user(role="ops")
    m = Model(avail={u: 0 for u in users}, held={u: 0 for u in users})
    secret = settings.webhook_secret
    counts: dict[str, int] = {}

    def tx(fn: Callable[[Session], Any], fail_at: int | None = None) -> Any:
        """Run fn in its own transaction; optionally raise at the n-th flush (mid-operation)."""
        with Session(engine, expire_on_commit=False) as s:
            if fail_at is not None:
                n = {"flushes": 0}

                def boom(*_a: Any) -> None:
                    n["flushes"] += 1
                    if n["flushes"] >= fail_at:
                        raise Injected("failure injected mid-transaction")

                event.listen(s, "before_flush", boom)
            try:
                out = fn(s)
                s.commit()
                return out
            except BaseException:
                s.rollback()
                raise

    def check_users(which: list[int]) -> None:
        with Session(engine) as s:
            for u in which:
                assert ledger.balance_summary(s, u) == (m.avail[u], m.held[u]), (step, u)

    def deliver(inv: Inv, etype: str, body: bytes | None = None) -> None:
        def go(s: Session) -> None:
            row = s.get(payments.Invoice, inv.id)
            b = body or payments.event_body(row, etype, clock.now())  # type: ignore[arg-type]
            payments.handle_webhook(s, b, payments.sign(b, secret), secret=secret, now=clock.now())

        tx(go)

    def predicted_credit(inv: Inv, units: int) -> int:
        if units >= inv.due:
            return inv.amount + cents_for_crypto(
                units - inv.due, inv.rate, CURRENCIES[inv.currency].decimals
            )
        return min(inv.amount, cents_for_crypto(units, inv.rate, CURRENCIES[inv.currency].decimals))

    def credit(inv: Inv, units: int) -> None:
        if not inv.credited:
            inv.credited = True
            m.avail[inv.user] += predicted_credit(inv, units)

    step = 0
    for step in range(steps):
        kind = rng.choices(
            [
                "topup",
                "pay",
                "hold",
                "resolve",
                "charge",
                "adjust",
                "replay",
                "time",
                "crash",
                "fail_mid",
            ],
            weights=[10, 14, 22, 16, 10, 4, 8, 6, 5, 5],
        )[0]
        counts[kind] = counts.get(kind, 0) + 1
        u = rng.choice(users)
        touched = [u]
        if kind == "topup":
            cur = rng.choice(list(CURRENCIES))
            amount = rng.randint(100, 500_000)
            row = tx(
                lambda s: payments.create_topup(
                    s, user_id=u, amount_cents=amount, currency=cur, now=clock.now()
                )
            )
            m.invoices[row.id] = Inv(
                row.id,
                u,
                amount,
                int(row.due_units),
                cur,
                row.rate,
                expires_at=clock.now() + timedelta(minutes=15),
                monitoring_until=clock.now() + timedelta(minutes=15, hours=24),
            )
        elif kind == "pay":
            open_invs = [i for i in m.invoices.values() if not i.credited]
            if not open_invs:
                continue
            inv = rng.choice(open_invs)
            touched = [inv.user]
            how = rng.choice(["full", "full", "part", "over", "rest"])
            units = {
                "full": inv.due - inv.paid,
                "part": max(1, inv.due // rng.randint(2, 5)),
                "over": inv.due - inv.paid + rng.randint(1, inv.due // 3 + 1),
                "rest": inv.due - inv.paid,
            }[how]
            if units <= 0:
                continue
            now = clock.now()
            in_window = now <= inv.monitoring_until
            tx(
                lambda s: payments.record_chain_payment(
                    s, s.get(payments.Invoice, inv.id), units, now=now, confirmed=True
                )
            )
            if in_window:
                inv.paid += units
            events = rng.sample(EVENTS, rng.randint(1, len(EVENTS)))
            for etype in events:
                deliver(inv, etype)
                if rng.random() < 0.3:  # the same delivery again, byte for byte
                    with Session(engine) as s:
                        row = s.get(payments.Invoice, inv.id)
                        assert row is not None
                        b = payments.event_body(row, etype, now, delivery_id=f"dup-{step}")
                    deliver(inv, etype, b)
                    deliver(inv, etype, b)
            if in_window and inv.paid >= inv.due:
                credit(inv, inv.paid)
            # paid below due, or outside the window: nothing now.
        elif kind == "time":
            clock.advance(timedelta(minutes=rng.choice([1, 5, 20, 60, 600, 1500])))
            tx(lambda s: payments.expire_due(s, clock.now()))
            for inv in m.invoices.values():
                if not inv.credited and clock.now() >= inv.monitoring_until and inv.paid:
                    credit(inv, inv.paid)
                if clock.now() >= inv.monitoring_until:
                    inv.credited = True  # final either way: nothing more is credited
            touched = users
        elif kind in ("hold", "charge"):
            amount = rng.randint(1, 300_000)
            key = f"{kind}-{step}"
            oid = rng.randint(1, 10_000)
            try:
                if kind == "hold":
                    res = tx(
                        lambda s: (
                            ledger.place_hold(
                                s,
                                user_id=u,
                                amount_cents=amount,
                                idempotency_key=key,
                                now=clock.now(),
                                reason="order",
                                order_id=oid,
                            ).id
                        )
                    )
                else:
                    res = tx(
                        lambda s: (
                            ledger.charge(
                                s,
                                user_id=u,
                                amount_cents=amount,
                                idempotency_key=key,
                                now=clock.now(),
                                reason="renewal",
                                order_id=oid,
                            ).id
                        )
                    )
            except InsufficientBalance as e:
                assert m.avail[u] < amount and e.shortfall_cents == amount - m.avail[u]
                continue
            assert m.avail[u] >= amount
            m.avail[u] -= amount
            if kind == "hold":
                m.held[u] += amount
                m.holds[res] = (u, amount, "pending")
            m.keys[(u, key)] = (kind, amount, (res, oid))
        elif kind == "resolve":
            if not m.holds:
                continue
            hid = rng.choice(list(m.holds))
            hu, amt, status = m.holds[hid]
            touched = [hu]
            want = rng.choice(["posted", "voided"])
            try:
                if want == "posted":
                    tx(lambda s: ledger.post_hold(s, hid, now=clock.now()))
                else:
                    tx(lambda s: ledger.void_hold(s, hid, now=clock.now(), reason="cancelled"))
            except HoldAlreadyResolved:
                assert status not in ("pending", want)
                continue
            if status == "pending":
                m.holds[hid] = (hu, amt, want)
                m.held[hu] -= amt
                if want == "voided":
                    m.avail[hu] += amt
            else:
                assert status == want  # an idempotent replay
        elif kind == "adjust":
            amount = rng.choice([-1, 1]) * rng.randint(1, 50_000)
            try:
                tx(
                    lambda s: ledger.adjust(
                        s,
                        user_id=u,
                        amount_cents=amount,
                        reason="ops fix",
                        actor=ops_user,
                        now=clock.now(),
                        idempotency_key=f"adj-{step}",
                    )
                )
            except InsufficientBalance:
                assert m.avail[u] + amount < 0
                continue
            m.avail[u] += amount
        elif kind == "replay":
            mine = [(k, v) for k, v in m.keys.items()]
            if not mine:
                continue
            (ku, key), (cmd, amount, (res, oid)) = rng.choice(mine)
            touched = [ku]
            fn = ledger.place_hold if cmd == "hold" else ledger.charge
            if rng.random() < 0.5:
                got = tx(
                    lambda s: (
                        fn(
                            s,
                            user_id=ku,
                            amount_cents=amount,
                            idempotency_key=key,
                            now=clock.now(),
                            reason="r",
                            order_id=oid,
                        ).id
                    )
                )
                assert got == res
            else:
                with pytest.raises(IdempotencyConflict):
                    tx(
                        lambda s: fn(
                            s,
                            user_id=ku,
                            amount_cents=amount + 1,
                            idempotency_key=key,
                            now=clock.now(),
                            reason="r",
                            order_id=oid,
                        )
                    )
        elif kind in ("crash", "fail_mid"):
            # A multi-leg operation that dies: a crash before commit, or an exception injected
            # at a random flush inside the ledger's write path. Nothing may remain.
            amount = rng.randint(1, 100_000)
            fail_at = None if kind == "crash" else rng.randint(1, 4)

            def work(s: Session) -> None:
                ledger.place_hold(
                    s,
                    user_id=u,
                    amount_cents=amount,
                    idempotency_key=f"crash-{step}",
                    now=clock.now(),
                    reason="x",
                )
                ledger.charge(
                    s,
                    user_id=u,
                    amount_cents=1,
                    idempotency_key=f"crash-c-{step}",
                    now=clock.now(),
                    reason="x",
                )
                pending = [h for h, (hu, _a, st) in m.holds.items() if st == "pending"]
                if pending:
                    ledger.void_hold(s, rng.choice(pending), now=clock.now(), reason="x")
                open_invs = [i for i in m.invoices.values() if not i.credited]
                if open_invs:
                    inv = rng.choice(open_invs)
                    row = s.get(payments.Invoice, inv.id)
                    payments.record_chain_payment(s, row, inv.due, now=clock.now(), confirmed=True)  # type: ignore[arg-type]
                    b = payments.event_body(row, "InvoiceSettled", clock.now())  # type: ignore[arg-type]
                    payments.handle_webhook(
                        s, b, payments.sign(b, secret), secret=secret, now=clock.now()
                    )
                raise Injected("crash before commit")

            with pytest.raises((Injected, InsufficientBalance, DomainError)):
                tx(work, fail_at=fail_at)
            touched = users
        check_users(touched)
        if step % FULL_CHECK_EVERY == 0:
            with Session(engine) as s:
                assert run_checks(s) == [], step
    check_users(users)
    with Session(engine) as s:
        assert run_checks(s) == []
    assert min(counts.get(k, 0) for k in ("pay", "resolve", "crash", "fail_mid", "replay")) > 0
    proc = subprocess.run(
        [sys.executable, "-m", "app", "ledger", "check", "--database-url", db_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all checks passed" in proc.stdout
