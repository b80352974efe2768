"""Checkouts per second: PostgreSQL with 4 app processes versus pgbench's TPC-B at the same
concurrency (the database's own ceiling for a small write transaction on this machine),
and SQLite with one process.

A checkout here is the whole thing a customer's click does: POST /api/v1/orders with
"pay": true — order row, stock reservation under the SKU lock, ledger hold with the
balance check, timeline event, notification and email outbox row, in one transaction.

    .venv/bin/python -m bench.bench_checkout            # needs PostgreSQL on 127.0.0.1
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from bench.common import ROOT, machine
from bench.loadgen import _self_cpu, _tree_cpu
from tests.support.servers import app_processes

CONCURRENCY = 16
ATTEMPTS = 600
FLAME = ROOT / "docs" / "bench" / "checkout.svg"
PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
# scratch databases are created as <prefix>checkout, <prefix>pgbench, <prefix>profile and dropped
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench_")
PGBENCH_RUNS = 3


@dataclass
class Rate:
    name: str
    per_second: float
    detail: str


def _fresh_pg(name: str) -> str:
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def _migrate(url: str) -> None:
    from app.main import import_models
    from app.migrate import upgrade

    import_models()
    upgrade(url)


def _checkouts(url: str, processes: int, tmp: Path, name: str, flame: Path | None = None) -> Rate:
    from tests.support.storm import arrange, storm

    engine = create_engine(url)
    per_customer = 30
    setup = arrange(engine, customers=ATTEMPTS // per_customer, affords=lambda i: per_customer)
    engine.dispose()
    with app_processes(url, processes, tmp) as procs:
        pids = [p.proc.pid for p in procs if p.proc is not None]
        spy = None
        if flame is not None:
            exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
            if Path(exe).exists():
                flame.parent.mkdir(parents=True, exist_ok=True)
                spy = subprocess.Popen(  # noqa: S603
                    [
                        exe,
                        "record",
                        "-p",
                        str(pids[0]),
                        "-d",
                        "8",
                        "-r",
                        "200",
                        "-n",
                        "-o",
                        str(flame),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        c0 = _self_cpu()
        s0 = sum(_tree_cpu(p) for p in pids)
        result = storm([p.url for p in procs], setup, attempts=ATTEMPTS, concurrency=CONCURRENCY)
        client = (_self_cpu() - c0) / result.seconds
        server = (sum(_tree_cpu(p) for p in pids) - s0) / result.seconds
        if spy is not None:
            spy.wait(60)
    ok = result.statuses[201] + result.statuses[200]
    return Rate(
        name,
        ok / result.seconds,
        f"{ok} paid checkouts of {ATTEMPTS} attempts in {result.seconds:.1f} s, "
        f"{processes} process(es), {CONCURRENCY} concurrent clients, "
        f"{len(setup.customers)} customers × {per_customer}; CPU: client "
        f"{client:.2f}, app processes {server:.2f} cores "
        f"({1000 * server * result.seconds / max(ok, 1):.1f} app CPU ms per checkout)",
    )


def _drop(name: str) -> None:
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def pgbench_command(dbname: str) -> list[str]:
    exe = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
    return [
        exe,
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-c",
        str(CONCURRENCY),
        "-j",
        "2",
        "-T",
        "15",
        dbname,
    ]


def _pgbench(db: str) -> Rate:
    """TPC-B at scale 1: initialised once, run three times, the median reported."""
    exe = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
    dbname = db.rsplit("/", 1)[1]
    args = ["-h", "127.0.0.1", "-U", "postgres"]
    subprocess.run([exe, "-i", "-q", "-s", "1", *args, dbname], check=True, capture_output=True)  # noqa: S603
    runs = []
    for _ in range(PGBENCH_RUNS):
        out = subprocess.run(  # noqa: S603
            pgbench_command(dbname), check=True, capture_output=True, text=True
        ).stdout
        m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
        runs.append(float(m.group(1)) if m else float("nan"))
    tps = statistics.median(runs)
    return Rate(
        "pgbench TPC-B (built-in), median of 3",
        tps,
        f"scale 1, {CONCURRENCY} clients, 2 threads, 15 s each; runs: "
        + ", ".join(f"{r:.0f}" for r in runs),
    )


def run(flame: bool = True) -> tuple[list[Rate], dict[str, Any], str]:
    from bench.profile_checkout import profile

    rates: list[Rate] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prof_db = _fresh_pg(DB_PREFIX + "profile")
        prof = profile(prof_db)
        _drop(DB_PREFIX + "profile")
        name = DB_PREFIX + "checkout"
        pg = _fresh_pg(name)
        _migrate(pg)
        rates.append(
            _checkouts(
                pg, 4, tmp, "checkout, PostgreSQL, 4 app processes",
                flame=FLAME if flame else None,
            )
        )  # fmt: skip
        _drop(name)
        bench_db = _fresh_pg(DB_PREFIX + "pgbench")
        rates.append(_pgbench(bench_db))
        _drop(DB_PREFIX + "pgbench")
        sqlite = f"sqlite:///{tmp / 'bench.db'}"
        _migrate(sqlite)
        rates.append(_checkouts(sqlite, 1, tmp, "checkout, SQLite, 1 app process"))
    return rates, prof, machine()


def report(rates: list[Rate], prof: dict[str, Any], where: str) -> str:
    pg, tpcb, lite = rates
    lines = [
        "## Checkouts per second",
        "",
        f"On {where}; load from the asyncio httpx storm client (tests/support/storm.py) on "
        "loopback; CPU is CPU-seconds per wall-second over the storm.",
        "",
        "| what | per second | how |",
        "|---|---|---|",
        *[f"| {r.name} | {r.per_second:.1f} | {r.detail} |" for r in rates],
        "",
        f"**Ratios: PostgreSQL checkouts run at {pg.per_second / tpcb.per_second:.3f}× pgbench TPC-B "
        f"transactions at the same concurrency; SQLite with one process runs at "
        f"{lite.per_second / pg.per_second:.2f}× the PostgreSQL rate.**",
        "",
        'One paid checkout (`POST /api/v1/orders` with `"pay": true`) on PostgreSQL, '
        "profiled alone by `bench/profile_checkout.py` (an SQLAlchemy `before_cursor_execute` "
        f"listener): **{prof['queries']} statements** (each one round trip, plus COMMIT); "
        f"the customer's balance row is locked for {prof['balance_lock_ms']:.1f} ms and the "
        f"SKU's stock row for {prof['stock_lock_ms']:.1f} ms before COMMIT, "
        f"{prof['stock_statements']} statements under the stock lock "
        f"({prof['ms']:.1f} ms for the whole request in-process).",
        "",
        "A checkout serialises on its SKU's stock row (so two customers cannot both take the last "
        "node) and on the customer's balance row, and writes ~12 rows; TPC-B writes 4. "
        "The work is ordered by the lock it needs (app/orders/service.py `_pay_held`): "
        "without any lock, the promise read (nodes, batches and lead time in one `UNION ALL`), "
        "the order row, timeline events, notification and email outbox row; then the balance "
        "row (the ledger hold, the order's UPDATE); last the SKU's stock row (the promise "
        "confirmed in one read, the node/batch UPDATE, the reservation row) and COMMIT.",
        "",
        f"Flame graph of one of the four app processes during the storm: `{FLAME.relative_to(ROOT)}`.",
        "",
        "Reproduce: `.venv/bin/python -m bench.bench_checkout` (scratch databases "
        f"`{DB_PREFIX}*`, dropped afterwards; `BENCH_DB_PREFIX` renames them); the baseline alone: "
        "`pgbench -i -s 1 DB && pgbench -c 16 -j 2 -T 15 DB` (three times, median); "
        "one checkout's statements: `TEST_DATABASE_URL=... python -m bench.profile_checkout -v`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    started = time.perf_counter()
    r, pr, w = run()
    print(report(r, pr, w))
    print(f"(took {time.perf_counter() - started:.0f} s)")
    _ = ROOT
