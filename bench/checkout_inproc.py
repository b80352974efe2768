"""CPU of one paid checkout in-process on PostgreSQL, split by layer (no uvicorn, no client).

    TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/<db> \
        PYTHONPATH=$PWD .venv/bin/python -m bench.checkout_inproc [-n 200] [--profile asgi]

- ``services``: ``create_order_for_checkout`` + ``pay_order`` + COMMIT in a session, called
  directly (what the checkout's own code and SQLAlchemy cost);
- ``asgi``: ``POST /api/v1/orders`` through the whole ASGI app (middleware, routing,
  dependencies, thread-pool hops, token check, JSON), driven by a minimal in-process ASGI
  call on an asyncio loop, one at a time.

CPU is ``time.process_time`` (every thread of this process) per checkout; the database
server's CPU is not counted. The database is reset (schema migrated, catalog seeded).
``--profile services|asgi`` prints cProfile's top functions for that part (``--sort tottime``
for each function's own time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import time
from typing import Any

from sqlalchemy import create_engine
from sqlmodel import Session

from bench.common import ROOT
from bench.profile_checkout import _reset
from tests.support.storm import IMAGE, SKU, arrange

_ = ROOT


def _services(app: Any, customer: Any, n: int, tag: str) -> list[float]:
    from app.accounts.models import User
    from app.orders import service

    engine = app.state.engine
    clock = app.state.clock
    out = []
    for i in range(n):
        t0 = time.process_time()
        with Session(engine, expire_on_commit=False) as s:
            user = s.get(User, customer.user_id)
            assert user is not None
            now = clock.now()
            draft = service.OrderDraft(
                sku_id=SKU, quantity=1, image_id=IMAGE, ssh_key_ids=[customer.key_id]
            )
            made = service.create_order_for_checkout(
                s, user=user, draft=draft, idempotency_key=f"{tag}-{i}", now=now
            )
            assert made.order.id is not None
            service.pay_order(
                s,
                user=user,
                order_id=made.order.id,
                idempotency_key=made.order.idempotency_key,
                now=now,
                order=made.order,
                seen_promise=made.promise,
            )
            s.commit()
        out.append((time.process_time() - t0) * 1000)
    return out


async def _asgi_call(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/orders",
        "raw_path": b"/api/v1/orders",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def _asgi(app: Any, customer: Any, n: int, tag: str) -> list[float]:
    body = json.dumps(
        {"sku": SKU, "nodes": 1, "image": IMAGE, "ssh_key_ids": [customer.key_id], "pay": True}
    ).encode()

    async def run() -> list[float]:
        out = []
        for i in range(n):
            headers = [
                (b"host", b"127.0.0.1:8000"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"authorization", f"Bearer {customer.token}".encode()),
                (b"idempotency-key", f"{tag}-{i}".encode()),
            ]
            t0 = time.process_time()
            status = await _asgi_call(app, body, headers)
            out.append((time.process_time() - t0) * 1000)
            assert status in (200, 201), status
        return out

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--profile", choices=["services", "asgi"])
    ap.add_argument("--sort", choices=["cumulative", "tottime"], default="cumulative")
    args = ap.parse_args()
    url = os.environ["TEST_DATABASE_URL"]
    from app.main import create_app
    from app.settings import Settings

    _reset(url)
    engine = create_engine(url)
    setup = arrange(engine, customers=2, affords=lambda i: 3 * args.n + 20)
    engine.dispose()
    app = create_app(
        Settings(
            environment="test",
            database_url=url,
            secret_key="bench-secret-0123456789-abcdefghijklmnop",
            simulation=True,
        )
    )
    warm = 10
    _services(app, setup.customers[0], warm, "warm-s")
    _asgi(app, setup.customers[1], warm, "warm-a")
    parts = {"services": _services, "asgi": _asgi}
    for name, fn in parts.items():
        cust = setup.customers[0] if name == "services" else setup.customers[1]
        prof = cProfile.Profile(time.process_time) if args.profile == name else None
        if prof is not None:
            prof.enable()
        vals = fn(app, cust, args.n, name)
        if prof is not None:
            prof.disable()
        print(
            f"{name:9s} CPU ms per checkout: median {statistics.median(vals):.2f}, "
            f"mean {statistics.mean(vals):.2f}, p10 {statistics.quantiles(vals, n=10)[0]:.2f} "
            f"(n={len(vals)})"
        )
        if prof is not None:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(60)
    app.state.engine.dispose()


if __name__ == "__main__":
    main()
