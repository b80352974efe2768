"""Ledger operations per second, in-process, against a baseline measured in the same run.

Baseline: the smallest durable write transaction the same engine can do (one INSERT of a
two-column row, then COMMIT). Each ledger operation is a full unit of work: customer lock,
idempotency look-up, conditional balance UPDATE, entry + postings (+ hold, + key), COMMIT.
The ratio says what double entry and its guarantees cost over a bare write. Also: how long
``ledger check`` takes per 10,000 entries.

    .venv/bin/python -m bench.bench_ledger [--url sqlite:///...|postgresql+psycopg://...] [-n 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlmodel import Session  # noqa: E402

from app.accounts.models import User  # noqa: E402
from app.db import make_engine  # noqa: E402
from app.ledger import service as ledger  # noqa: E402
from app.main import import_models  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.reconcile import run_checks  # noqa: E402

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def timed(n: int, fn: Callable[[int], None]) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def run(url: str, n: int) -> list[tuple[str, float, float]]:
    import_models()
    upgrade(url)
    engine = make_engine(url)
    with Session(engine, expire_on_commit=False) as s:
        user = User(email=f"bench-{time.time_ns()}@example.com", password_hash="x", created_at=NOW)
        s.add(user)
        s.commit()
        pk = (
            "BIGSERIAL PRIMARY KEY"
            if engine.dialect.name == "postgresql"
            else "INTEGER PRIMARY KEY"
        )
        s.exec(text(f"CREATE TABLE IF NOT EXISTS bench_baseline (id {pk}, v INTEGER)"))  # type: ignore[call-overload]
        s.commit()
        ledger.grant_promotion(
            s, user_id=user.id, amount_cents=10**11, reason="bench", now=NOW, idempotency_key="b"
        )  # type: ignore[arg-type]
        s.commit()
    uid: int = user.id  # type: ignore[assignment]
    holds: list[int] = []

    def unit(fn: Callable[[Session, int], object]) -> Callable[[int], None]:
        def go(i: int) -> None:
            with Session(engine) as s:
                fn(s, i)
                s.commit()

        return go

    base = timed(n, unit(lambda s, i: s.exec(text(f"INSERT INTO bench_baseline (v) VALUES ({i})"))))  # type: ignore[call-overload]
    rows = [("baseline: one-row INSERT + COMMIT", base, 1.0)]

    def hold(s: Session, i: int) -> None:
        holds.append(
            ledger.place_hold(
                s, user_id=uid, amount_cents=100, idempotency_key=f"h{i}", now=NOW, reason="b"
            ).id
            or 0
        )

    for name, fn in (
        ("place_hold", hold),
        ("post_hold", lambda s, i: ledger.post_hold(s, holds[i], now=NOW)),
        (
            "charge",
            lambda s, i: ledger.charge(
                s, user_id=uid, amount_cents=100, idempotency_key=f"c{i}", now=NOW, reason="b"
            ),
        ),
        (
            "replayed charge (same key)",
            lambda s, i: ledger.charge(
                s, user_id=uid, amount_cents=100, idempotency_key="c0", now=NOW, reason="b"
            ),
        ),
        (
            "grant_promotion (credit)",
            lambda s, i: ledger.grant_promotion(
                s, user_id=uid, amount_cents=100, reason="b", now=NOW, idempotency_key=f"p{i}"
            ),
        ),
    ):
        ops = timed(n, unit(fn))
        rows.append((name, ops, ops / base))
    with Session(engine) as s:
        entries = s.exec(text("SELECT COUNT(*) FROM ledger_entries")).one()[0]  # type: ignore[call-overload]
        s.exec(text("DROP TABLE bench_baseline"))  # type: ignore[call-overload]
        s.commit()
        t0 = time.perf_counter()
        assert run_checks(s) == []
        secs = time.perf_counter() - t0
    rows.append(
        (f"`ledger check` over {entries} entries: seconds per 10k", secs * 10_000 / entries, 0.0)
    )
    engine.dispose()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="")
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        url = args.url or f"sqlite:///{d}/bench.db"
        rows = run(url, args.n)
    print(f"# Ledger operations ({url.split(':')[0]}, n={args.n}, one unit of work each)\n")
    print("| operation | per second | vs baseline |\n|---|---:|---:|")
    for name, ops, ratio in rows:
        print(f"| {name} | {ops:,.2f} | {ratio:.2f}× |" if ratio else f"| {name} | {ops:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
