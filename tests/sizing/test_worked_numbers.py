"""The product page's worked numbers (design/sizing.md table), as table tests."""

from __future__ import annotations

import pytest

from app.sizing import compute, size

# the page's worked numbers pin the training stack and the utilisation they assume
SEVEN_B_1T = {"model": {"params": 7e9}, "tokens": 1e12, "framework": "fsdp2"}
FSDP_ONE_NODE = {"sharding": "zero3", "shard_group": 8}


def _one_node(sku: str) -> dict:
    out = size({**SEVEN_B_1T, "sku": sku, "nodes": 1, "mfu": 0.4, "parallelism": FSDP_ONE_NODE})
    (opt,) = out["options"]
    return opt


def test_7b_times_1t_tokens_is_4_2e22_flops() -> None:
    assert size(SEVEN_B_1T)["training_flops"] == pytest.approx(4.2e22, rel=0.01)
    assert compute.training_flops(7_000_000_000, 1e12) == pytest.approx(4.2e22, rel=1e-9)


@pytest.mark.parametrize(
    ("sku", "days"),
    [("hgx-b200", 67.0), ("hgx-h200", 153.0)],
)
def test_7b_1t_on_one_node_at_40_percent(sku: str, days: float) -> None:
    opt = _one_node(sku)
    assert opt["fits"]
    assert opt["training_days"] == pytest.approx(days, rel=0.01)


def test_h200_run_is_about_five_months() -> None:
    opt = _one_node("hgx-h200")
    assert opt["training_days"] / (730 / 24) == pytest.approx(5.0, abs=0.1)
    assert opt["months"] == 6  # whole months: 5.04 rounds up


def test_b200_time_from_the_formula() -> None:
    s = compute.training_seconds(4.2e22, 8, 2250, 0.4)
    assert s / 86400 == pytest.approx(67.5, abs=0.1)


def test_70b_checkpoint_12_to_16_bytes_per_param() -> None:
    lo, hi = size({"model": {"params": 7e10}, "tokens": 1e9})["checkpoint_range_bytes"]
    assert lo == pytest.approx(0.84e12, rel=0.001)
    assert hi == pytest.approx(1.12e12, rel=0.001)


def test_1t_tokens_as_32_bit_ids_is_4_tb() -> None:
    out = size({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12})
    assert out["dataset_bytes"] == pytest.approx(4e12, rel=1e-9)
    assert compute.dataset_bytes(1e12, 32000) == 2e12  # 16-bit IDs when the vocab fits


@pytest.mark.parametrize(
    ("hours", "usd"),
    [(730, 5.98), (72, 60.59)],
)
def test_b200_effective_price_per_gpu_hour(hours: float, usd: float) -> None:
    cents = compute.effective_cents_per_gpu_hour(3_490_000, 8, hours)
    assert compute.cents_to_usd(cents) == pytest.approx(usd, abs=0.01)


def test_b200_option_reports_24_7_rate_and_break_even() -> None:
    opt = _one_node("hgx-b200")
    assert opt["usd_per_gpu_hour_24_7"] == 5.98
    assert opt["unit_price_usd_month"] == 34900.0
    # 34,900 / (8 × 730 × 5.99) ≈ 0.998: monthly only pays off at near 24/7 use
    assert opt["break_even_utilisation"] == pytest.approx(0.998, abs=0.001)
    assert opt["months"] == 3  # 67.5 days → 3 whole months
    assert opt["rental_cost_usd"] == 104700.0
