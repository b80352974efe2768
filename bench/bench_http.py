"""The live sizing fragment versus a bare FastAPI JSON endpoint in the same app.

Same process, same workers, same load tool settings: the ratio says what the sizing
engine + template rendering cost per request relative to the framework floor.

    .venv/bin/python -m bench.bench_http
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.common import (
    AppProcess,
    LoadResult,
    app_env,
    free_port,
    machine,
    run_locust,
    seeded_sqlite,
)

SIZE_QUERY = "model=llama-3.1-8b&tokens=1T&seq_len=4096&mbs=1&method=full"
USERS = 16
SECONDS = 15


def run(users: int = USERS, seconds: int = SECONDS) -> tuple[LoadResult, LoadResult, str]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url = seeded_sqlite(tmp)
        app = AppProcess(
            port=free_port(),
            env=app_env(url),
            log_path=tmp / "app.log",
            extra_args=["--workers", "2"],
        )
        app.start()
        try:
            base = run_locust(
                app.url, "/healthz", users=users, seconds=seconds, name="bare JSON /healthz"
            )
            frag = run_locust(
                app.url,
                f"/size?{SIZE_QUERY}",
                users=users,
                seconds=seconds,
                headers=json.dumps({"HX-Request": "true"}),
                name="live sizing fragment /size (htmx)",
            )
        finally:
            app.stop()
    return base, frag, machine()


def report(base: LoadResult, frag: LoadResult, where: str) -> str:
    ratio = frag.rps / base.rps if base.rps else float("nan")
    lines = [
        "## Live sizing fragment vs a bare JSON endpoint",
        "",
        f"One uvicorn process with 2 workers on SQLite, locust headless, {USERS} users, no think time, "
        f"{SECONDS} s each, on loopback ({where}).",
        "",
        "| endpoint | requests | failures | req/s | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in (base, frag):
        lines.append(
            f"| {r.name} | {r.requests} | {r.failures} | {r.rps:.0f} | {r.p50_ms:.0f} | {r.p95_ms:.0f} | {r.p99_ms:.0f} |"
        )
    lines += [
        "",
        f"**Ratio: the sizing fragment serves {ratio:.2f}× the bare endpoint's requests per second.**",
        "",
        "Reproduce: `.venv/bin/python -m bench.bench_http`",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    b, f, w = run()
    print(report(b, f, w))
