"""The live sizing fragment versus ``GET /healthz`` in the same app, same run.

One uvicorn process, one worker, SQLite, 16 keep-alive connections from bench/loadgen.py
(asyncio streams: its own CPU share is measured and reported next to the server's, so
the baseline is the server's, not the client's). The fragment is driven with replayed
typing: 6 models × 20 token budgets × 2 context lengths = 240 distinct ``/size``
requests with ``HX-Request: true``, cycled in order.

A py-spy flame graph of the server serving the fragment goes to docs/bench/size-fragment.svg
(py-spy samples a separate, shorter run so its overhead is not in the measured one).

    .venv/bin/python -m bench.bench_http
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from bench.common import ROOT, AppProcess, app_env, free_port, machine, seeded_sqlite
from bench.loadgen import Load, cores, drive

USERS = 16
SECONDS = 10
MODELS = (
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen2.5-14b",
    "mistral-7b-v0.3",
    "mixtral-8x7b",
    "gemma-2-27b",
)
TOKENS = (
    "1B", "2B", "3B", "5B", "8B", "10B", "20B", "30B", "50B", "80B",
    "100B", "200B", "300B", "500B", "800B", "1T", "2T", "3T", "5T", "8T",
)  # fmt: skip
SEQS = ("4096", "8192")
HX = {"HX-Request": "true"}
FLAME = ROOT / "docs" / "bench" / "size-fragment.svg"
METRICS_TOKEN = "bench-metrics-token"  # noqa: S105 - a throwaway server's scrape token


def fragment_lookups(url: str) -> tuple[float, float]:
    """(hits, misses) of the server's rendered-fragment cache so far, from /metrics
    (0, 0 when the server does not count them)."""
    try:
        text = httpx.get(
            url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=5
        ).text
    except httpx.HTTPError:
        return 0.0, 0.0
    got = dict(re.findall(r'size_fragment_cache_lookups_total\{result="(\w+)"\} (\S+)', text))
    return float(got.get("hit", 0)), float(got.get("miss", 0))


def typing_paths() -> list[str]:
    """Distinct /size queries in the order a person trying budgets would send them."""
    return [
        f"/size?model={m}&tokens={t}&seq_len={s}&mbs=1&method=full"
        for m in MODELS
        for s in SEQS
        for t in TOKENS
    ]


def _flame(pid: int, url: str, paths: list[str], seconds: int = 6) -> str:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        return "py-spy not installed: no flame graph"
    FLAME.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(  # noqa: S603
        [exe, "record", "-p", str(pid), "-d", str(seconds), "-r", "200", "-o", str(FLAME), "-n"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    drive("flame", url, paths, server_pid=pid, concurrency=USERS, seconds=seconds + 1, headers=HX)
    _out, err = spy.communicate(timeout=60)
    if spy.returncode != 0:
        return f"py-spy failed: {err.decode(errors='replace').strip()[-200:]}"
    return f"flame graph: `{FLAME.relative_to(ROOT)}`"


def run(
    users: int = USERS, seconds: int = SECONDS, flame: bool = True
) -> tuple[list[Load], str, str]:
    paths = typing_paths()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url = seeded_sqlite(tmp)
        env = app_env(url, APP_METRICS_TOKEN=METRICS_TOKEN)
        app = AppProcess(port=free_port(), env=env, log_path=tmp / "app.log")
        app.start()
        assert app.proc is not None
        pid = app.proc.pid
        try:
            # warm up: imports, templates, first connections
            drive("warm", app.url, paths[:40], server_pid=pid, concurrency=4, seconds=2, headers=HX)
            base = drive(
                "GET /healthz", app.url, ["/healthz"], server_pid=pid, concurrency=users,
                seconds=seconds,
            )  # fmt: skip
            h0, m0 = fragment_lookups(app.url)
            frag = drive(
                f"/size fragment, {len(paths)} distinct requests (replayed typing)",
                app.url, paths, server_pid=pid, concurrency=users, seconds=seconds, headers=HX,
            )  # fmt: skip
            h1, m1 = fragment_lookups(app.url)
            one = drive(
                "/size fragment, one URL", app.url, paths[:1], server_pid=pid,
                concurrency=users, seconds=seconds, headers=HX,
            )  # fmt: skip
            h2, m2 = fragment_lookups(app.url)
            frag.cache_hits, frag.cache_misses = h1 - h0, m1 - m0
            one.cache_hits, one.cache_misses = h2 - h1, m2 - m1
            note = _flame(pid, app.url, paths) if flame else "flame graph skipped"
        finally:
            app.stop()
    return [base, frag, one], note, machine()


def report(loads: list[Load], note: str, where: str) -> str:
    base, frag, one = loads
    lines = [
        "## Live sizing fragment vs `GET /healthz`",
        "",
        f"One uvicorn process, one worker, SQLite; {USERS} keep-alive connections from "
        f"`bench/loadgen.py` (asyncio streams), {SECONDS} s each, loopback ({where}). "
        "CPU columns are CPU-seconds per wall-second (1.00 = one whole core) over the same "
        f"interval: the client's own (getrusage) and the server's (psutil); the machine has "
        f"{cores()} cores.",
        "",
        "| endpoint | requests | non-200 | req/s | p50 ms | p95 ms | p99 ms | client CPU | server CPU | server CPU ms/request | distinct URLs | repeat rate | fragment cache hit rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in loads:
        bad = r.requests - r.statuses.get(200, 0) + r.errors
        looked = r.cache_hits + r.cache_misses
        hit_rate = f"{r.cache_hits / looked:.1%}" if looked else "–"
        lines.append(
            f"| {r.name} | {r.requests} | {bad} | {r.rps:.0f} | {r.p50:.1f} | {r.pct(95):.1f} "
            f"| {r.pct(99):.1f} | {r.client_cpu:.2f} | {r.server_cpu:.2f} "
            f"| {r.server_cpu_ms:.2f} | {r.distinct} | {r.repeat_rate:.1%} | {hit_rate} |"
        )
    ratio = frag.rps / base.rps if base.rps else float("nan")
    lines += [
        "",
        f"**Ratio: the fragment on distinct requests serves {ratio:.2f}× `/healthz`** "
        f"(one URL: {one.rps / base.rps if base.rps else float('nan'):.2f}×). "
        "The repeat rate is the share of requests whose URL the run had already sent: the "
        "hit rate any cache keyed on the request could reach at best; the fragment cache "
        "hit rate is the server's own count (`size_fragment_cache_lookups_total` on "
        "`/metrics`; the warm-up before the runs had filled it with the first 40 URLs). "
        "Server CPU ms/request is the server's CPU time over the run divided by the "
        "requests served: the figure to compare when the shared machine is busy.",
        "",
        f"The client used {base.client_cpu:.0%} of a core against `/healthz` while the server "
        f"used {base.server_cpu:.0%}: "
        + (
            "the server, not the client, was the limit."
            if base.client_cpu < base.server_cpu
            else "**the client used more CPU than the server: treat the baseline with care.**"
        ),
        "",
        f"Profile: {note} (py-spy, 200 Hz, while serving the distinct requests).",
        "",
        "Reproduce: `.venv/bin/python -m bench.bench_http`",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    ls, n, w = run()
    print(report(ls, n, w))
