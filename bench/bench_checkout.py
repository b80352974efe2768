"""Checkouts per second: PostgreSQL with 4 app processes (``BENCH_APP_PROCESSES``) versus
pgbench's TPC-B at the same concurrency (the database's own ceiling for a small write
transaction on this machine), and SQLite with one process.

A checkout here is the whole thing a customer's click does: POST /api/v1/orders with
"pay": true — order row, stock reservation under the SKU lock, ledger hold with the
balance check, timeline event, notification and email outbox row, in one transaction.

    .venv/bin/python -m bench.bench_checkout            # needs PostgreSQL on 127.0.0.1
"""

from __future__ import annotations

import os
import re
import resource
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
from tests.support.servers import app_processes

CONCURRENCY = 16
ATTEMPTS = 600
PER_CUSTOMER = 30
FLAME = ROOT / "docs" / "bench" / "checkout.svg"
PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
# scratch databases are created as <prefix>checkout, <prefix>pgbench, <prefix>profile and dropped
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench_")
PGBENCH_RUNS = 3
# app processes serving the PostgreSQL storm (4, as the Dockerfile's WEB_CONCURRENCY; another
# count for an A/B such as docs/benchmarks-ab.md's "four app processes or two")
APP_PROCESSES = int(os.environ.get("BENCH_APP_PROCESSES", "4"))


@dataclass
class Rate:
    name: str
    per_second: float
    detail: str
    cpu_ms: float = 0.0  # client + app + database CPU milliseconds per checkout


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


class PgCpu:
    """CPU seconds of PostgreSQL's server processes over an interval. Backends come and go
    (pgbench's exit when it does), so a thread samples every server process's CPU every
    0.1 s and keeps each one's last reading: a backend that exits still counts up to its
    last sample (its final few milliseconds, disconnecting, are lost)."""

    def __init__(self) -> None:
        import threading

        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._sample()  # processes already running count from now
        self._first = dict(self._last)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        for p in psutil.process_iter(["name"]):
            try:
                if (p.info["name"] or "").startswith("postgres"):
                    t = p.cpu_times()
                    self._last[p.pid] = t.user + t.system
            except psutil.Error:
                pass

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._sample()
        return sum(v - self._first.get(pid, 0.0) for pid, v in self._last.items())


def _checkout_requests(setup: Any, targets: list[tuple[str, int]], tag: str) -> list[list[bytes]]:
    """Every customer's paid checkouts as raw HTTP requests (one idempotency key each), in a
    shuffled order, dealt round-robin to the app processes."""
    import json
    import random

    from bench.loadgen import request_bytes
    from tests.support.storm import IMAGE, SKU

    plan = [(c, f"{tag}-{c.user_id}-{i}") for c in setup.customers for i in range(PER_CUSTOMER)]
    random.Random(11).shuffle(plan)
    out: list[list[bytes]] = [[] for _ in targets]
    for n, (c, key) in enumerate(plan):
        host, port = targets[n % len(targets)]
        body = json.dumps(
            {"sku": SKU, "nodes": 1, "image": IMAGE, "ssh_key_ids": [c.key_id], "pay": True}
        ).encode()
        headers = {
            "Authorization": f"Bearer {c.token}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        }
        out[n % len(targets)].append(
            request_bytes(host, port, "/api/v1/orders", headers, method="POST", body=body)
        )
    return out


def _flame(pid: int, flame: Path, url: str, procs: list[Any]) -> None:
    """A second storm, not timed, while py-spy samples one app process: the profiler slows
    the process it samples (it stops it 200 times a second), so it never runs during the
    storm whose rate is reported."""
    from bench.loadgen import send_once
    from tests.support.storm import arrange

    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        return
    engine = create_engine(url)
    setup = arrange(
        engine, customers=ATTEMPTS // PER_CUSTOMER, affords=lambda i: PER_CUSTOMER, seed=8
    )
    engine.dispose()
    targets = [("127.0.0.1", p.port) for p in procs]
    flame.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(  # noqa: S603
        [exe, "record", "-p", str(pid), "-d", "6", "-r", "200", "-n", "-o", str(flame)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # py-spy attached before the load starts
    send_once("flame", targets, _checkout_requests(setup, targets, "flame"), server_pids=[pid])
    spy.wait(60)


def _checkouts(url: str, processes: int, tmp: Path, name: str, flame: Path | None = None) -> Rate:
    """Paid checkouts from the light client (bench/loadgen.py ``send_once``: each request sent
    exactly once, no HTTP library), then the money checked: exactly k paid per customer,
    exact holds, ledger clean (tests/support/storm.py ``verify``)."""
    from bench.loadgen import send_once
    from tests.support.storm import arrange, verify

    engine = create_engine(url)
    setup = arrange(engine, customers=ATTEMPTS // PER_CUSTOMER, affords=lambda i: PER_CUSTOMER)
    is_pg = url.startswith("postgresql")
    with app_processes(url, processes, tmp) as procs:
        pids = [p.proc.pid for p in procs if p.proc is not None]
        targets = [("127.0.0.1", p.port) for p in procs]
        reqs = _checkout_requests(setup, targets, "bench")
        meter = PgCpu() if is_pg else None
        load = send_once(name, targets, reqs, server_pids=pids, concurrency=CONCURRENCY)
        db = meter.stop() / load.seconds if meter is not None else 0.0
        if flame is not None:
            _flame(pids[0], flame, url, procs)
    paid = verify(engine, setup)["paid"]
    engine.dispose()
    ok = load.statuses[201] + load.statuses[200]
    per = 1000 * load.seconds / max(ok, 1)
    db_part = f", PostgreSQL {db:.2f} ({db * per:.1f} ms)" if is_pg else ""
    return Rate(
        name,
        ok / load.seconds,
        f"{ok} paid checkouts of {ATTEMPTS} requests in {load.seconds:.1f} s "
        f"({paid} paid orders verified), {processes} process(es), {CONCURRENCY} connections, "
        f"{len(setup.customers)} customers × {PER_CUSTOMER}; p50 {load.p50:.0f} ms, "
        f"p95 {load.pct(95):.0f} ms; CPU cores (ms per checkout): client "
        f"{load.client_cpu:.2f} ({load.client_cpu * per:.1f} ms), app processes "
        f"{load.server_cpu:.2f} ({load.server_cpu * per:.1f} ms){db_part}",
        cpu_ms=(load.client_cpu + load.server_cpu + db) * per,
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
    runs, cpu = [], []
    for _ in range(PGBENCH_RUNS):
        meter = PgCpu()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(  # noqa: S603
            pgbench_command(dbname), check=True, capture_output=True, text=True
        ).stdout
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
        t = re.search(r"number of transactions actually processed: (\d+)", out)
        runs.append(float(m.group(1)) if m else float("nan"))
        n = int(t.group(1)) if t else 0
        client = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        cpu.append(1000 * (meter.stop() + client) / n if n else float("nan"))
    tps = statistics.median(runs)
    return Rate(
        "pgbench TPC-B (built-in), median of 3",
        tps,
        f"scale 1, {CONCURRENCY} clients, 2 threads, 15 s each; runs: "
        + ", ".join(f"{r:.0f}" for r in runs)
        + f"; CPU (PostgreSQL + pgbench) {statistics.median(cpu):.2f} ms per transaction",
        cpu_ms=statistics.median(cpu),
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
                pg, APP_PROCESSES, tmp, f"checkout, PostgreSQL, {APP_PROCESSES} app processes",
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
    cores = os.cpu_count() or 1
    lines = [
        "## Checkouts per second",
        "",
        f"On {where}; load from the light client (`bench/loadgen.py` `send_once`: asyncio "
        "streams, no HTTP library, each prepared request sent once) on loopback, spread over "
        "the app processes; afterwards the money is checked (exactly k paid per customer, "
        "exact holds, ledger checks: `tests/support/storm.py` `verify`). CPU is CPU-seconds per "
        "wall-second over the run, and milliseconds of CPU per checkout.",
        "",
        "| what | per second | how |",
        "|---|---|---|",
        *[f"| {r.name} | {r.per_second:.1f} | {r.detail} |" for r in rates],
        "",
        f"**Ratios: PostgreSQL checkouts run at {pg.per_second / tpcb.per_second:.3f}× pgbench TPC-B "
        f"transactions at the same concurrency; SQLite with one process runs at "
        f"{lite.per_second / pg.per_second:.2f}× the PostgreSQL rate.**",
        "",
        f"What bounds the ratio on this {cores}-core machine: a checkout costs "
        f"{pg.cpu_ms:.1f} ms of CPU in all (client, app processes, PostgreSQL), a TPC-B "
        f"transaction {tpcb.cpu_ms:.2f} ms (PostgreSQL and pgbench), so even with every core "
        f"busy and no lock ever waited on, checkouts could reach "
        f"{1000 * cores / max(pg.cpu_ms, 1e-9):.0f}/s, "
        f"{(1000 * cores / max(pg.cpu_ms, 1e-9)) / tpcb.per_second:.3f}× the measured TPC-B rate. "
        "The app's Python per checkout (an HTTP request with a token check, ~9 SQL statements "
        "through SQLAlchemy, JSON in and out) is the largest part.",
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
        "The work is ordered by the lock it needs (app/orders/checkout.py `_pay_held`): "
        "without any lock, the promise read (nodes, batches, list price and the key's "
        "existing order in one `UNION ALL`), the SSH keys, the order row with its event, "
        "SAVEPOINT; then the balance row, taken by the one statement that debits it only "
        "if it covers the amount and, only then, credits the held account and writes the "
        "hold, its entry, postings and idempotency record, the order's paid UPDATE and the "
        "paid event, notification and email (a short balance writes nothing); last the "
        "SKU's stock row (locked, the promise confirmed in one read, the batch units and "
        "the reservation in one statement) and COMMIT, which releases the savepoint.",
        "",
        f"Flame graph of one of the {APP_PROCESSES} app processes during a second, untimed storm (py-spy "
        f"stops the process it samples 200 times a second, so it never runs during the timed "
        f"one): `{FLAME.relative_to(ROOT)}`.",
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
