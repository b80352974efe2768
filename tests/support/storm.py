"""A checkout storm: many customers with API tokens and exact balances, many concurrent
``POST /api/v1/orders {"pay": true}`` attempts, and the checks that nothing was lost.

Shared by the storm and fault tests (tests/faults/) and the checkout benchmark (bench/).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from app.accounts.models import User
from app.accounts.security import create_api_token, hash_password
from app.accounts.service import add_ssh_key
from app.catalog.models import IncomingBatch
from app.catalog.service import list_price_cents
from app.clock import SimulatedClock
from app.ledger import service as ledger
from app.orders.models import Order
from app.reconcile import run_checks

SKU = "hgx-h100"
IMAGE = "ubuntu-24.04-cuda"


@dataclass
class Customer:
    user_id: int
    token: str
    affords: int
    key_id: int = 0


def _public_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pub = Ed25519PrivateKey.generate().public_key()
    return (
        pub.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        ).decode()
        + " storm"
    )


@dataclass
class StormSetup:
    price_cents: int
    customers: list[Customer]

    @property
    def expected_paid(self) -> int:
        return sum(c.affords for c in self.customers)


@dataclass
class StormResult:
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    server_errors: int = 0
    seconds: float = 0.0


def arrange(
    engine: Engine, *, customers: int, affords: Callable[[int], int], seed: int = 7
) -> StormSetup:
    """Customers with tokens and balances affording exactly ``affords(i)`` first months,
    plus a large incoming batch so stock never limits the storm (money does)."""
    from app.catalog.seed import seed as seed_catalog

    clock = SimulatedClock(engine)
    now = clock.now()
    rng = random.Random(seed)
    out: list[Customer] = []
    password_hash = hash_password("storm-password-123")
    with Session(engine, expire_on_commit=False) as s:
        seed_catalog(s, now)
        s.add(
            IncomingBatch(
                sku_id=SKU,
                quantity=100_000,
                expected_on=(now + timedelta(days=20)).date(),
                created_at=now,
            )
        )
        price = list_price_cents(s, SKU)
        for i in range(customers):
            u = User(
                email=f"storm{i}-{rng.randrange(10**9)}@example.com",
                password_hash=password_hash,
                created_at=now,
            )
            s.add(u)
            s.flush()
            assert u.id is not None
            _row, raw = create_api_token(s, u, "storm", now)
            key = add_ssh_key(s, u, "storm", _public_key(), now)
            k = affords(i)
            # Exactly k first months, plus a remainder that cannot pay one more.
            amount = k * price + rng.randrange(0, price)
            if amount:
                ledger.grant_promotion(
                    s,
                    user_id=u.id,
                    amount_cents=amount,
                    reason="storm",
                    now=now,
                    idempotency_key=f"storm-{u.id}",
                )
            assert key.id is not None
            out.append(Customer(u.id, raw, k, key.id))
        s.commit()
    return StormSetup(price, out)


async def _fire(
    urls: list[str],
    attempts: list[tuple[Customer, str]],
    concurrency: int,
    retries: int,
    retry_seconds: float,
) -> StormResult:
    result = StormResult()
    sem = asyncio.Semaphore(concurrency)
    url_cycle = itertools.cycle(urls)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:

        async def one(c: Customer, key: str) -> None:
            async with sem:
                loop = asyncio.get_running_loop()
                give_up = loop.time() + retry_seconds
                tries = 0
                while tries <= retries or loop.time() < give_up:
                    tries += 1
                    base = next(url_cycle)
                    try:
                        r = await client.post(
                            f"{base}/api/v1/orders",
                            json={
                                "sku": SKU,
                                "nodes": 1,
                                "image": IMAGE,
                                "ssh_key_ids": [c.key_id],
                                "pay": True,
                            },
                            headers={"Authorization": f"Bearer {c.token}", "Idempotency-Key": key},
                        )
                    except httpx.HTTPError:
                        result.transport_errors += 1
                        await asyncio.sleep(0.3)
                        continue  # a client retries with the same key: idempotency makes it safe
                    if r.status_code >= 500:
                        result.server_errors += 1
                        await asyncio.sleep(0.3)
                        continue
                    result.statuses[r.status_code] += 1
                    return
                result.statuses[-1] += 1  # gave up

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.gather(*(one(c, k) for c, k in attempts))
        result.seconds = loop.time() - t0
    return result


def storm(
    urls: list[str],
    setup: StormSetup,
    *,
    attempts: int,
    concurrency: int = 64,
    retries: int = 5,
    retry_seconds: float = 0.0,
    seed: int = 11,
) -> StormResult:
    rng = random.Random(seed)
    plan = [
        (setup.customers[i % len(setup.customers)], f"storm-{seed}-{i}") for i in range(attempts)
    ]
    rng.shuffle(plan)
    return asyncio.run(_fire(urls, plan, concurrency, retries, retry_seconds))


def verify(engine: Engine, setup: StormSetup) -> dict[str, int]:
    """Exactly k orders paid per customer, exact balances, no half-made order, ledger clean."""
    problems: list[str] = []
    paid_total = 0
    with Session(engine) as s:
        for c in setup.customers:
            paid = s.exec(
                select(func.count())
                .select_from(Order)
                .where(Order.user_id == c.user_id, col(Order.status) == "paid")
            ).one()
            paid_total += paid
            if paid != c.affords:
                problems.append(f"user {c.user_id}: {paid} paid orders, affords {c.affords}")
            held = ledger.held_cents(s, c.user_id)
            if held != c.affords * setup.price_cents:
                problems.append(
                    f"user {c.user_id}: held {held} != {c.affords} × {setup.price_cents}"
                )
            if ledger.available_cents(s, c.user_id) < 0:
                problems.append(f"user {c.user_id}: negative balance")
        # No half-made order: paid ⇔ a pending hold and a stock reservation.
        for o in s.exec(select(Order).where(col(Order.status) == "paid")).all():
            if o.first_hold_id is None or ledger.get_hold(s, o.first_hold_id) is None:
                problems.append(f"order {o.id} paid without a hold")
            if o.promised_date is None:
                problems.append(f"order {o.id} paid without a frozen promise")
        unpaid_with_hold = s.exec(
            select(func.count())
            .select_from(Order)
            .where(col(Order.status) == "awaiting_payment", col(Order.first_hold_id).is_not(None))
        ).one()
        if unpaid_with_hold:
            problems.append(f"{unpaid_with_hold} unpaid orders carry a hold")
        violations = run_checks(s)
    problems += [str(v) for v in violations]
    assert not problems, "\n".join(problems[:30])
    return {"paid": paid_total}
