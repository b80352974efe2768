"""Profile one paid checkout on PostgreSQL: every SQL statement it sends (an SQLAlchemy
event listener), round trips, and how long the SKU stock row and the balance row stay locked.

    TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/<db> \
        .venv/bin/python -m bench.profile_checkout [-v]

The database is reset (schema migrated, catalog seeded) before the run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, text

from bench.common import ROOT
from tests.support.storm import arrange

_ = ROOT


def _reset(url: str) -> None:
    from app.main import import_models
    from app.migrate import upgrade

    eng = create_engine(url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(text("DROP SCHEMA public CASCADE"))
        c.execute(text("CREATE SCHEMA public"))
    eng.dispose()
    import_models()
    upgrade(url)


def profile(url: str, *, verbose: bool = False, checkouts: int = 5) -> dict[str, Any]:
    """The statements of the last of ``checkouts`` paid checkouts by one customer; lock
    spans are the median over the runs (the first one warms the process)."""
    from app.main import create_app
    from app.settings import Settings

    _reset(url)
    engine = create_engine(url)
    setup = arrange(engine, customers=1, affords=lambda i: checkouts + 1)
    engine.dispose()
    app = create_app(
        Settings(
            environment="test",
            database_url=url,
            secret_key="bench-secret-0123456789-abcdefghijklmnop",
            simulation=True,
        )
    )
    eng = app.state.engine
    log: list[tuple[float, str]] = []

    @event.listens_for(eng, "before_cursor_execute")
    def _before(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        log.append((time.perf_counter(), " ".join(statement.split())))

    @event.listens_for(eng, "commit")
    def _commit(_c: Any) -> None:
        log.append((time.perf_counter(), "COMMIT"))

    c = setup.customers[0]
    body = {
        "sku": "hgx-h100",
        "nodes": 1,
        "image": "ubuntu-24.04-cuda",
        "ssh_key_ids": [c.key_id],
        "pay": True,
    }
    results = []
    with TestClient(app) as client:
        for i in range(checkouts):
            log.clear()
            t0 = time.perf_counter()
            r = client.post(
                "/api/v1/orders",
                json=body,
                headers={
                    "Authorization": f"Bearer {c.token}",
                    "Idempotency-Key": f"prof-{i}-{time.time()}",
                },
            )
            t1 = time.perf_counter()
            assert r.status_code in (200, 201), r.text
            commit_at = next((t for t, s in reversed(log) if s == "COMMIT"), t1)
            stock_at = next(
                (t for t, s in log if re.search(r"FROM catalog_sku_stock .*FOR UPDATE", s)), None
            )
            bal_at = next(
                (
                    t
                    for t, s in log
                    if re.search(r"FROM ledger_accounts .*FOR UPDATE|UPDATE ledger_accounts", s)
                ),
                None,
            )
            results.append(
                {
                    "queries": sum(1 for _t, s in log if s != "COMMIT"),
                    "stock_statements": sum(
                        1
                        for t, s in log
                        if stock_at is not None and t >= stock_at and s != "COMMIT"
                    ),
                    "ms": (t1 - t0) * 1000,
                    "stock_lock_ms": (commit_at - stock_at) * 1000 if stock_at else None,
                    "balance_lock_ms": (commit_at - bal_at) * 1000 if bal_at else None,
                }
            )
            if verbose and i == checkouts - 1:
                t_first = log[0][0] if log else t0
                for t, s in log:
                    print(f"{(t - t_first) * 1000:7.2f} ms  {s[:160]}")
    eng.dispose()
    out = dict(results[-1])
    for k in ("ms", "stock_lock_ms", "balance_lock_ms"):
        vals = [r[k] for r in results[1:] if r[k] is not None]
        out[k] = statistics.median(vals) if vals else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    url = os.environ["TEST_DATABASE_URL"]
    print(profile(url, verbose=args.v))


if __name__ == "__main__":
    main()
