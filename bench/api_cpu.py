"""Server CPU per request of the framework path: ``GET /healthz`` and a token-authenticated
JSON API read (``GET /api/v1/me``: middleware, routing, the session, the token
check, JSON), over HTTP on PostgreSQL, one or more uvicorn app processes.

The A/B figure for changes around the handler (middleware, dependencies, thread hops,
event loop): CPU milliseconds per request moves much less with the machine's other work
than requests per second, so compare old vs new back to back, several repeats.

    PYTHONPATH=$PWD .venv/bin/python -m bench.api_cpu [--processes 1] [--seconds 6]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

from bench.bench_checkout import _drop, _fresh_pg, _migrate
from bench.common import ROOT
from bench.loadgen import Load, drive
from tests.support.servers import app_processes
from tests.support.storm import arrange

_ = ROOT


def run(processes: int, seconds: float, concurrency: int) -> list[Load]:
    name = os.environ.get("BENCH_DB_PREFIX", "bench_") + "api_cpu"
    url = _fresh_pg(name)
    try:
        _migrate(url)
        engine = create_engine(url)
        setup = arrange(engine, customers=1, affords=lambda i: 0)
        engine.dispose()
        token = setup.customers[0].token
        auth = {"Authorization": f"Bearer {token}"}
        out = []
        with tempfile.TemporaryDirectory() as d, app_processes(url, processes, Path(d)) as procs:
            # one process measured (the others idle: drive() talks to one URL)
            app = procs[0]
            assert app.proc is not None
            pid = app.proc.pid
            drive("warm", app.url, ["/api/v1/me"], server_pid=pid, concurrency=4,
                  seconds=1.5, headers=auth)  # fmt: skip
            for label, path, headers in (
                ("GET /healthz", "/healthz", None),
                ("GET /api/v1/me", "/api/v1/me", auth),
            ):
                load = drive(label, app.url, [path], server_pid=pid, concurrency=concurrency,
                             seconds=seconds, headers=headers)  # fmt: skip
                bad = load.requests - load.statuses.get(200, 0) + load.errors
                print(
                    f"{label}: {load.rps:.0f} req/s, server CPU {load.server_cpu_ms:.3f} ms/request"
                    f", client CPU {load.client_cpu:.2f}, non-200 {bad} {dict(load.statuses)}"
                )
                out.append(load)
        return out
    finally:
        _drop(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    run(args.processes, args.seconds, args.concurrency)


if __name__ == "__main__":
    main()
