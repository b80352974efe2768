"""What the search proposes to the throughput model, and which counts the walk prices.

Two ways a customer got a slower plan than the engine could have shown:

* a MoE at a node count the customer picked: the static order of layouts proposed the
  first three fitting layouts, all with TP ≥ 2, and the throughput model never saw the
  TP 1 × EP 8 layout that is twice as fast (Kimi K2 on 18 B300 nodes: 4.4 % vs 8.6 %);
* the walk over node counts aimed at "fewest nodes per month" with the first count's
  efficiency only; when a later count ran a faster layout, the counts that efficiency
  points at were never priced (Llama 3.1 8B at 128k on B300: 2 nodes for 151 days shown
  instead of 5 nodes for 61 days at the same price).
"""

from __future__ import annotations

from typing import Any

from app.sizing import size


def _one(req: dict[str, Any]) -> dict[str, Any]:
    (opt,) = size(req)["options"]
    return opt


KIMI = {"model": {"preset": "kimi-k2"}, "tokens": 1e12, "precision": "fp4", "sku": "hgx-b300"}


def test_a_pinned_moe_count_is_not_left_with_a_slower_tensor_parallel_layout() -> None:
    # what the search shows is at least as fast as a fitting layout the customer could pin
    chosen = _one({**KIMI, "nodes": 18})
    pinned = _one(
        {
            **KIMI,
            "nodes": 18,
            "recompute": "full",
            "parallelism": {"sharding": "zero3", "tp": 1, "ep": 8},
        }
    )
    assert pinned["fit"] == "fits" and chosen["fit"] == "fits"
    assert chosen["training_days"] <= pinned["training_days"]


def test_more_nodes_of_the_same_moe_never_take_longer() -> None:
    days = [_one({**KIMI, "nodes": n})["training_days"] for n in (9, 12, 18)]
    assert days == sorted(days, reverse=True), days


def test_the_walk_prices_the_count_a_faster_layout_points_at() -> None:
    req = {
        "model": {"preset": "llama-3.1-8b"},
        "tokens": 1e12,
        "seq_len": 131072,
        "sku": "hgx-b300",
        # the fused-kernel stack, whose faster layouts appear at some node counts only
        "framework": "megatron",
    }
    shown = _one(req)
    # no node count the customer could pin is as cheap (plans within 5 % count as equally
    # cheap) and sooner than the plan shown: the walk priced every count a layout points at
    for n in range(1, 9):
        pinned = _one({**req, "nodes": n})
        if pinned["rental_cost_usd"] <= shown["rental_cost_usd"] * 1.05:
            assert shown["training_days"] <= pinned["training_days"], n
