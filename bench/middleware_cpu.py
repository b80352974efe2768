"""CPU of one request through the whole ASGI stack in-process (no socket, no HTTP parser):
``GET /healthz`` called directly on the app 3,000 times, 7 rounds; the per-request CPU
(process time) of the best and the median round. The A/B figure for middleware changes:
run it in the old and the new tree back to back.

    PYTHONPATH=$PWD .venv/bin/python -m bench.middleware_cpu
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

os.environ.setdefault("APP_DATABASE_URL", f"sqlite:///{tempfile.gettempdir()}/middleware_cpu.db")
from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402

app = create_app(Settings())


async def call(path: str, method: str = "GET", headers: tuple = ()) -> list[dict]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"x"),
            (b"accept-language", b"en-US,en;q=0.9"),
            (b"cookie", b"lang=en; x=1"),
            *headers,
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(m: dict) -> None:
        sent.append(m)

    await app(scope, receive, send)
    return sent


async def main() -> None:
    for _ in range(300):
        await call("/healthz")
    best = []
    for _round in range(7):
        t = time.process_time()
        for _ in range(3000):
            await call("/healthz")
        best.append((time.process_time() - t) / 3000 * 1e6)
    print(f"/healthz µs/request: min {min(best):.1f} med {sorted(best)[3]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
