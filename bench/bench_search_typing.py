"""The search as the live page sees it: a customer typing token budgets for a few models.

6 models × 2 contexts × 12 token budgets, every request distinct, answer cache emptied
before each call (the engine's own per-job memo is what is measured). CPU milliseconds per
request (``time.process_time``), so a loaded machine moves the figures less than wall time.
Run it in a fresh process; compare two versions back to back:

    .venv/bin/python -m bench.bench_search_typing
"""

from __future__ import annotations

import contextlib
import statistics
import time

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mixtral-8x7b", "deepseek-v3")
MODELS += ("qwen2.5-72b",)
SEQS = (4096, 8192)
TOKENS = tuple(float(t * 10**e) for e in (10, 11, 12) for t in (1, 2, 3, 5, 7))[:12]


def run() -> dict[str, float]:
    from app import sizing
    from app.sizing import engine

    cpu: list[float] = []
    for m in MODELS:
        for s in SEQS:
            for t in TOKENS:
                engine.cache_clear()
                c = time.process_time()
                with contextlib.suppress(Exception):  # a refusal is timed like an answer
                    sizing.size({"model": {"preset": m}, "tokens": t, "seq_len": s})
                cpu.append((time.process_time() - c) * 1000)
    cpu.sort()
    return {
        "requests": len(cpu),
        "p50_ms": statistics.median(cpu),
        "p95_ms": cpu[int(0.95 * (len(cpu) - 1))],
        "max_ms": cpu[-1],
    }


if __name__ == "__main__":
    r = run()
    print(
        f"{r['requests']:.0f} requests, CPU ms per request: p50 {r['p50_ms']:.1f} "
        f"p95 {r['p95_ms']:.1f} max {r['max_ms']:.1f}"
    )
