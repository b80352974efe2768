"""What the engine recommends: what a customer can actually check out, honestly ranked."""

from __future__ import annotations

from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.sizing import size
from app.sizing.recommend import NEAR_CHEAPEST, rank


def test_amd_is_not_recommended_unless_the_stack_runs_on_rocm() -> None:
    req = {"model": {"params": 7e9}, "tokens": 1e12}
    out = size(req)
    amd = next(o for o in out["options"] if o["sku"] == "mi355x")
    assert out["recommendation"]["sku"] != "mi355x"
    assert amd["rental_cost_usd"] < next(
        o["rental_cost_usd"] for o in out["options"] if o["sku"] == out["recommendation"]["sku"]
    )
    assert "ROCm" in out["recommendation"]["reason"]
    assert size({**req, "rocm_ok": True})["recommendation"]["sku"] == "mi355x"


def test_a_deadline_raises_the_node_count_to_finish_in_time() -> None:
    req = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12, "sku": "hgx-h100"}
    free = size(req)["options"][0]
    rushed = size({**req, "max_days": 10})["options"][0]
    assert rushed["nodes"] > free["nodes"]
    assert rushed["training_days"] <= 10
    assert rushed["meets_deadline"] is True


def test_clusters_beyond_self_serve_are_a_sales_conversation() -> None:
    out = size({"model": {"preset": "llama-3.1-70b"}, "tokens": 1e12, "max_days": 30})
    big = [o for o in out["options"] if o["self_serve"] and o["nodes"] > SELF_SERVE_MAX_NODES]
    assert big and all(o["talk_to_sales"] for o in big)


def test_ranking_prefers_the_faster_of_two_near_equal_prices() -> None:
    a = {"rental_cost_usd": 100_000.0, "training_days": 700.0}
    b = {"rental_cost_usd": 100_000.0 * (1 + NEAR_CHEAPEST / 2), "training_days": 30.0}
    c = {"rental_cost_usd": 200_000.0, "training_days": 5.0}

    def cost(o: dict) -> float:
        return float(o["rental_cost_usd"])

    def days(o: dict) -> float:
        return float(o["training_days"])

    assert rank([a, c, b], cost, days) == [b, a, c]
