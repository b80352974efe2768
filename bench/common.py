"""Shared helpers for benchmarks: a seeded temporary app, free ports, locust runs."""

from __future__ import annotations

import csv
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import AppProcess, app_env, free_port  # noqa: E402


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def seeded_sqlite(tmp: Path) -> str:
    """A migrated, seeded SQLite database in tmp (what `make run` builds)."""
    url = f"sqlite:///{tmp / 'bench.db'}"
    env = app_env(url)
    subprocess.run([sys.executable, "-m", "app", "db", "upgrade"], cwd=ROOT, env=env, check=True)  # noqa: S603
    subprocess.run(
        [sys.executable, "-m", "app", "seed"], cwd=ROOT, env=env, check=True, capture_output=True
    )  # noqa: S603
    return url


@dataclass
class LoadResult:
    name: str
    requests: int
    failures: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


def run_locust(
    host: str, path: str, *, users: int, seconds: int, headers: str = "", name: str
) -> LoadResult:
    """Drive one path with locust (headless, bounded users and duration) and read its CSV."""
    with tempfile.TemporaryDirectory() as d:
        prefix = str(Path(d) / "stats")
        env = dict(os.environ, BENCH_PATH=path, BENCH_HEADERS=headers)
        subprocess.run(  # noqa: S603
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(ROOT / "bench" / "locustfile.py"),
                "--headless",
                "-u",
                str(users),
                "-r",
                str(users),
                "--run-time",
                f"{seconds}s",
                "--host",
                host,
                "--csv",
                prefix,
                "--only-summary",
                "--stop-timeout",
                "2",
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
            check=False,
            capture_output=True,
        )
        with open(prefix + "_stats.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    agg = next(r for r in rows if r["Name"] == "Aggregated")
    return LoadResult(
        name=name,
        requests=int(agg["Request Count"]),
        failures=int(agg["Failure Count"]),
        rps=float(agg["Requests/s"]),
        p50_ms=float(agg["50%"]),
        p95_ms=float(agg["95%"]),
        p99_ms=float(agg["99%"]),
    )


__all__ = [
    "AppProcess",
    "LoadResult",
    "app_env",
    "free_port",
    "machine",
    "run_locust",
    "seeded_sqlite",
]
