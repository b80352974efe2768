"""Where the live fragment's server CPU goes: first answers versus cached ones.

``bench.bench_http`` reports one blended figure for 240 distinct /size requests. This
splits it, in server CPU time (psutil, user + system) per request, which the other
sessions on a shared machine disturb far less than req/s:

1. the 200 first answers (the 40 first URLs warmed), sent one at a time, then the same on
   a fresh server with 16 at once;
2. cached answers: a second pass over all 240 URLs (every one a hit), one URL, and
   ``/healthz``, each with 16 keep-alive connections from bench/loadgen.py.

With a first answer at F ms and a cached one at H ms, a 10 s run of bench_http at C cores
serves about ``200 + (10·C·1000 − 200·F) / H`` requests.

    PYTHONPATH=$PWD .venv/bin/python -m bench.fragment_split
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import httpx

from bench.bench_http import HX, typing_paths
from bench.common import AppProcess, app_env, free_port, seeded_sqlite
from bench.loadgen import _tree_cpu, drive

WARM = 40


def first_answers(url: str, concurrency: int, tmp: Path) -> float:
    """Server CPU ms per first answer (fresh server, the first WARM URLs warmed)."""
    app = AppProcess(port=free_port(), env=app_env(url), log_path=tmp / f"first{concurrency}.log")
    app.start()
    assert app.proc is not None
    paths = typing_paths()

    async def go() -> float:
        async with httpx.AsyncClient(base_url=app.url, headers=HX, timeout=60) as client:
            for p in paths[:WARM]:
                await client.get(p)
            assert app.proc is not None
            c0 = _tree_cpu(app.proc.pid)
            todo = iter(paths[WARM:])

            async def worker() -> None:
                for p in todo:
                    r = await client.get(p)
                    assert r.status_code == 200, (p, r.status_code)

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return (_tree_cpu(app.proc.pid) - c0) * 1000 / (len(paths) - WARM)

    try:
        return asyncio.run(go())
    finally:
        app.stop()


def cached_answers(url: str, tmp: Path, seconds: float = 4) -> list[tuple[str, float, float]]:
    """(name, req/s, server CPU ms/request) for cached fragments and /healthz."""
    app = AppProcess(port=free_port(), env=app_env(url), log_path=tmp / "cached.log")
    app.start()
    assert app.proc is not None
    pid, paths = app.proc.pid, typing_paths()
    out = []
    try:
        drive("fill", app.url, paths, server_pid=pid, concurrency=4, seconds=seconds, headers=HX)
        for name, ps, headers in (
            ("GET /healthz", ["/healthz"], None),
            ("/size fragment, 240 distinct, all cached", paths, HX),
            ("/size fragment, one URL", paths[:1], HX),
        ):
            r = drive(name, app.url, ps, server_pid=pid, seconds=seconds, headers=headers)
            out.append((name, r.rps, r.server_cpu_ms))
    finally:
        app.stop()
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url = seeded_sqlite(tmp)
        print("| what | req/s | server CPU ms/request |")
        print("|---|---:|---:|")
        for c in (1, 16):
            ms = first_answers(url, c, tmp)
            print(
                f"| first answers, {len(typing_paths()) - WARM} URLs, {c} at once | – | {ms:.1f} |"
            )
        for name, rps, ms in cached_answers(url, tmp):
            print(f"| {name} | {rps:.0f} | {ms:.2f} |")


if __name__ == "__main__":
    main()
