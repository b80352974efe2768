"""The search's memo (shared by equal jobs across requests) never changes an answer."""

from __future__ import annotations

from typing import Any

import pytest

from app.sizing import engine, memory, size


def _fresh(req: dict[str, Any]) -> dict[str, Any]:
    engine.cache_clear()
    with memory._SHARED_LOCK:
        memory._SHARED.clear()
    return size(req)


@pytest.mark.parametrize(
    ("preset", "seq"),
    [("llama-3.1-70b", 4096), ("mixtral-8x7b", 32768), ("qwen3-30b-a3b", 4096)],
)
def test_an_answer_after_other_token_budgets_equals_the_cold_answer(preset: str, seq: int) -> None:
    req = {"model": {"preset": preset}, "seq_len": seq, "tokens": 1e12}
    cold = _fresh(req)
    engine.cache_clear()
    for t in (1e11, 3e12, 1.5e13):  # typing: the same job, other budgets, memo kept
        engine.cache_clear()
        size({**req, "tokens": t})
    engine.cache_clear()
    assert size(req) == cold


def test_the_shared_memo_is_bounded() -> None:
    engine.cache_clear()
    for t in (1e11, 1e12):
        for seq in (1024, 2048, 4096, 8192, 16384):
            for preset in ("llama-3.1-8b", "qwen2.5-7b"):
                engine.cache_clear()
                size({"model": {"preset": preset}, "seq_len": seq, "tokens": t})
    assert len(memory._SHARED) <= memory.SHARED_JOBS
