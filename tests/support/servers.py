"""Real app processes for multi-process tests: uvicorn on free loopback ports.

Used by the concurrency storms and fault tests (PostgreSQL), which need several
processes sharing one database the way production does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
# The event loop of the app processes, as `make run` serves (uvloop: less CPU per request
# than asyncio's own loop, docs/benchmarks-ab.md); UVICORN_LOOP=asyncio for an A/B.
LOOP = os.environ.get("UVICORN_LOOP", "uvloop")
# The HTTP parser, as `make run` serves: httptools with the request head bounded
# (app/web/http1.py); UVICORN_HTTP=h11 for an A/B.
HTTP = os.environ.get("UVICORN_HTTP", "app.web.http1:BoundedHttpTools")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AppProcess:
    port: int
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: float = 30.0) -> AppProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "app.main:asgi",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--loop",
                LOOP,
                "--http",
                HTTP,
                # the app's own TrustedProxies decides which forwarding headers to believe
                # (as `make run` does): uvicorn's would trust any from 127.0.0.1
                "--no-proxy-headers",
                *self.extra_args,
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.wait_ready(wait)
        return self

    def wait_ready(self, wait: float = 30.0, path: str = "/healthz") -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"app process exited early; log: {self.log_path.read_text()[-2000:]}"
                )
            try:
                if httpx.get(self.url + path, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"app on {self.url} not ready; log: {self.log_path.read_text()[-2000:]}")

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def app_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APP_")}
    env.update(
        {
            "DATABASE_URL": database_url,
            "APP_DATABASE_URL": database_url,
            "APP_ENVIRONMENT": "test",
            "APP_SECRET_KEY": "test-secret-key-that-is-long-enough-0123456789",
            "APP_WEBHOOK_SECRET": "test-webhook-secret",
            "APP_SIMULATION": "true",
            "APP_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@contextmanager
def app_processes(
    database_url: str, n: int, tmp: Path, **extra_env: str
) -> Iterator[list[AppProcess]]:
    procs = [
        AppProcess(
            port=free_port(), env=app_env(database_url, **extra_env), log_path=tmp / f"app{i}.log"
        )
        for i in range(n)
    ]
    try:
        for p in procs:
            p.start()
        yield procs
    finally:
        for p in procs:
            p.stop()
