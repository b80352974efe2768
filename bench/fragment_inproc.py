"""CPU per cached /size fragment and per /healthz through the whole ASGI app, in-process
(no sockets, no client): what the early fragment lookup and the middleware cost, apart
from the network and the load generator. ``--prof``: cProfile of the cached path.

    PYTHONPATH=$PWD .venv/bin/python -m bench.fragment_inproc [--prof]
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import app_env, seeded_sqlite

QUERY = b"model=llama-3.1-8b&tokens=1e10"
N = 5000


def main() -> None:
    os.environ.update(app_env(seeded_sqlite(Path(tempfile.mkdtemp()))))
    from app.main import asgi

    app = asgi()

    async def call(path: bytes = b"/size", query: bytes = QUERY) -> None:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path.decode(),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), (b"hx-request", b"true")],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            return None

        await app(scope, receive, send)

    async def run() -> None:
        for _ in range(3):  # the first answer fills the cache and the day's clock reading
            await call()
        for name, path, query in (
            ("cached fragment", b"/size", QUERY),
            ("/healthz", b"/healthz", b""),
        ):
            t = time.process_time()
            for _ in range(N):
                await call(path, query)
            print(f"{name}: {(time.process_time() - t) / N * 1e6:.1f} µs CPU per request")
        if "--prof" in sys.argv:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(N):
                await call()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)

    asyncio.run(run())


if __name__ == "__main__":
    main()
