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
from app.sizing.recommend import NEAR_CHEAPEST, choose_plan
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
    # a MoE's card is re-ranked with every (TP, EP) pair; a dense one's counts all were
    # ranked with one layout of each ZeRO-3-or-not family
    family = layout.tp_ep_zero3 if s.r.job.arch.moe is not None else layout.zero3_and_ep
    reps = layout.best_layouts(s.r.job, s.variants, plan.nodes, want=1, family=family)
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


def test_a_layout_met_at_a_larger_count_is_aimed_at_the_fewest_count_that_offers_it() -> None:
    """DeepSeek-V3 on H200: only ZeRO-3 fits on 7 nodes (two months); PP 2 x EP 8 first
    fits on 8 (whole data-parallel groups) and finishes in one. The walk met that layout on
    14 nodes and aimed its one-month count at 5, under the first fit: the aim now goes to
    the fewest count offering the shape, so the card is 8 nodes, not 14 for the same month
    at 75 % more. No self-serve count finishes as soon for less than the near-cheapest band
    allows."""
    s = _search({"model": {"preset": "deepseek-v3"}, "seq_len": 4096, "tokens": 1e11}, "hgx-h200")
    chosen = s.refined(choose_plan(s.plans(), s))
    assert (chosen.nodes, chosen.months) == (8, 1)
    for p in s.self_serve_plans():
        if p.months <= chosen.months:
            assert chosen.cost_cents <= p.cost_cents * (1 + NEAR_CHEAPEST), p.nodes


@pytest.mark.parametrize(
    "preset", ["llama-3.1-8b", "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b", "deepseek-v3"]
)
@pytest.mark.parametrize("seq", [4096, 32768])
def test_the_runner_up_is_another_layout(preset: str, seq: int) -> None:
    """ "Runner-up layout on the same node" names another layout: the parent commit named the
    card's own in 117 of the grid's 1,049 options (its runner-up came from a longer list,
    whose first could be a layout the card's shorter list had not seen)."""
    answer = size({"model": {"preset": preset}, "seq_len": seq, "tokens": 1e12})
    for o in answer["options"]:
        if "runner_up" in o:
            assert o["runner_up"]["layout"] != o["layout"], o["sku"]
