"""App CPU per paid checkout over HTTP on PostgreSQL: the A/B figure for the checkout path.

A fresh scratch database, ``--processes`` uvicorn app processes, the storm client
(tests/support/storm.py) firing ``--attempts`` paid checkouts at ``--concurrency``; the
app processes' CPU time (user + system, psutil) over the storm divided by the checkouts
paid. Wall-clock rates move with whatever else the machine runs; CPU per checkout moves
much less, so compare it old vs new back to back, several repeats.

    PYTHONPATH=$PWD .venv/bin/python -m bench.checkout_cpu [--repeats 3] [--spy out.txt]

``--spy FILE`` records the first app process with py-spy (collapsed stacks, 500 Hz) and
prints the functions with the largest inclusive share of its samples.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

from bench.bench_checkout import PgCpu, _drop, _fresh_pg, _migrate
from bench.common import ROOT
from bench.loadgen import _tree_cpu
from tests.support.servers import app_processes
from tests.support.storm import StormSetup, arrange, storm, verify

_ = ROOT


def once(attempts: int, processes: int, concurrency: int, spy: Path | None) -> float:
    name = os.environ.get("BENCH_DB_PREFIX", "bench_") + "cpu"
    url = _fresh_pg(name)
    try:
        _migrate(url)
        engine = create_engine(url)
        per_customer = 30
        n = max(1, attempts // per_customer)
        full = arrange(engine, customers=n + 1, affords=lambda i: per_customer)
        setup = StormSetup(full.price_cents, full.customers[:n])
        warm = StormSetup(full.price_cents, full.customers[n:])
        with tempfile.TemporaryDirectory() as d, app_processes(url, processes, Path(d)) as procs:
            pids = [p.proc.pid for p in procs if p.proc is not None]
            # warm every process (imports, first-call caches) outside the measurement
            storm([p.url for p in procs], warm, attempts=4 * processes, concurrency=processes)
            rec = None
            if spy is not None:
                exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
                rec = subprocess.Popen(  # noqa: S603
                    [
                        exe,
                        "record",
                        "-p",
                        str(pids[0]),
                        "-r",
                        "500",
                        "--gil",
                        "-f",
                        "raw",
                        "-o",
                        str(spy),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            s0 = sum(_tree_cpu(p) for p in pids)
            pg = PgCpu()
            result = storm(
                [p.url for p in procs], setup, attempts=attempts, concurrency=concurrency
            )
            cpu = sum(_tree_cpu(p) for p in pids) - s0
            pg_cpu = pg.stop()
            if rec is not None:
                rec.send_signal(2)
                rec.wait(60)
        ok = result.statuses[201] + result.statuses[200]
        verify(engine, setup)
        engine.dispose()
        per = 1000 * cpu / max(ok, 1)
        print(
            f"{ok} paid in {result.seconds:.1f} s ({ok / result.seconds:.1f}/s), "
            f"app CPU {per:.2f} ms per checkout, PostgreSQL {1000 * pg_cpu / max(ok, 1):.2f} ms "
            "(every server process: other work on the machine counts too)"
        )
        return per
    finally:
        _drop(name)


def top(path: Path, n: int = 45) -> None:
    """Inclusive share of samples per function (each counted once per stack)."""
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        c = int(count)
        total += c
        seen = set()
        for frame in stack.split(";"):
            fn = frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].split(":")[0]
            if fn not in seen:
                seen.add(fn)
                incl[fn] += c
    for fn, c in incl.most_common(n):
        print(f"{100 * c / total:5.1f}%  {fn}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=300)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--spy", type=Path)
    args = ap.parse_args()
    vals = [
        once(args.attempts, args.processes, args.concurrency, args.spy if i == 0 else None)
        for i in range(args.repeats)
    ]
    print(f"median app CPU ms per checkout: {statistics.median(vals):.2f} ({vals})")
    if args.spy is not None:
        top(args.spy)


if __name__ == "__main__":
    main()
