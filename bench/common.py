"""Shared helpers for benchmarks: a seeded temporary app, free ports (load: bench/loadgen.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
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


__all__ = [
    "AppProcess",
    "app_env",
    "free_port",
    "machine",
    "seeded_sqlite",
]
