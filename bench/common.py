"""Shared helpers for benchmarks: a seeded temporary app, free ports (load: bench/loadgen.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import AppProcess, app_env, free_port  # noqa: E402


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _reference_unit(i: int, memo: dict[tuple[int, int], float]) -> float:
    k = (i & 1023, i % 7)
    v = memo.get(k)
    if v is None:
        v = memo[k] = max(1.0, i * 1.5) / (1 + (i & 7))
    return v + min(i & 15, 3)


def python_speed_ms(rounds: int = 5) -> float:
    """CPU milliseconds for a fixed pure-Python workload (calls, small tuples, dictionary
    lookups, float arithmetic: the kind of code the sizing engine is), best of ``rounds``.

    Not a benchmark of the app: a yardstick of the machine in this run. The shared 2-core
    machine runs the same code 3-4x slower in some phases than in others (the sizing
    section's third-party llm-analysis rate moves with it), and the search goal is in
    milliseconds, so each run states the yardstick next to the search figures.
    """
    best = float("inf")
    for _ in range(rounds):
        memo: dict[tuple[int, int], float] = {}
        t = time.process_time()
        total = 0.0
        for i in range(100_000):
            total += _reference_unit(i, memo)
        best = min(best, time.process_time() - t)
    return best * 1000


def seeded_sqlite(tmp: Path) -> str:
    """A migrated, seeded SQLite database in tmp (what `make run` builds)."""
    url = f"sqlite:///{tmp / 'bench.db'}"
    env = app_env(url)
    subprocess.run([sys.executable, "-m", "app", "db", "upgrade"], cwd=ROOT, env=env, check=True)  # noqa: S603
    subprocess.run(
        [sys.executable, "-m", "app", "seed"], cwd=ROOT, env=env, check=True, capture_output=True
    )  # noqa: S603
    return url


__all__ = [
    "AppProcess",
    "app_env",
    "free_port",
    "machine",
    "python_speed_ms",
    "seeded_sqlite",
]
