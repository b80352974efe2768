"""The card's layout is the throughput model's best at its node count, not the static
order's: the plans are priced with the first few layouts that order proposes, and the chosen
plan is then re-ranked with one layout of every family (TP, EP, ZeRO-3 or not) — the static
order cannot see what a ZeRO-3 layout's gathers cost when each micro-batch gathers again,
nor a MoE's small expert GEMMs under TP (``SkuSearch.refined``)."""

from __future__ import annotations

from typing import Any

import pytest

from app.sizing import layout, size
from app.sizing.memory import SAFETY_MARGIN, fit_verdict
from app.sizing.recommend import choose_plan
from tests.sizing.test_search_bounded import _search

CASES = [
    # a trillion-parameter MoE in FP4 without optimizer offload: ZeRO-3 re-gathers every
    # micro-batch, so the card is pipelined with expert parallel
    (
        {
            "model": {"preset": "kimi-k2"},
            "tokens": 1e12,
            "precision": "fp4",
            "framework": "megatron",
            "offload_optimizer": False,
        },
        "hgx-b300",
    ),
    ({"model": {"preset": "llama-3.1-405b"}, "tokens": 1.5e13, "seq_len": 4096}, "hgx-h100"),
    ({"model": {"preset": "qwen3-235b-a22b"}, "tokens": 1.5e13, "seq_len": 4096}, "hgx-h200"),
    ({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12}, "hgx-b200"),
]


@pytest.mark.parametrize(("req", "sku"), CASES)
def test_the_card_is_at_least_as_fast_as_every_familys_best_sure_layout(
    req: dict[str, Any], sku: str
) -> None:
    s = _search(req, sku)
    plan = s.refined(choose_plan(s.plans(), s))
    limit = s.usable * (1 - SAFETY_MARGIN)
    reps = layout.best_layouts(s.r.job, s.variants, plan.nodes, want=1, per_tp=True)
    sure = [s.with_model(c) for c in reps if fit_verdict(c.memory, limit) == "fits"]
    assert sure and fit_verdict(plan.candidate.memory, limit) == "fits"
    assert plan.candidate.efficiency >= max(c.efficiency for c in sure) - 1e-12
    # and the answer shows that plan
    o = next(o for o in size({**req, "sku": sku})["options"] if o["sku"] == sku)
    assert o["nodes"] == plan.nodes and o["layout"] == plan.candidate.layout.as_dict()


def test_kimi_k2_without_offload_is_pipelined_with_expert_parallel_not_zero3() -> None:
    req, sku = CASES[0]
    o = size({**req, "sku": sku})["options"][0]
    assert o["fits"] and o["layout"]["ep"] > 1 and o["layout"]["sharding"] != "zero3"
