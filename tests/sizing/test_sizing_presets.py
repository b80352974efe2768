"""Presets: exact published parameter counts, and the calibration file's model configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sizing import PRESETS, largest_full_training_model, list_presets
from app.sizing.params import count

CAL = Path(__file__).with_name("data") / "sizing-calibration.json"
# calibration file model name → preset id
CAL_NAMES = {
    "Llama 3.1 8B": "llama-3.1-8b",
    "Llama 3.1 70B": "llama-3.1-70b",
    "Llama 3.1 405B": "llama-3.1-405b",
    "Qwen2.5 7B": "qwen2.5-7b",
    "Qwen2.5 14B": "qwen2.5-14b",
    "Qwen2.5 32B": "qwen2.5-32b",
    "Qwen2.5 72B": "qwen2.5-72b",
    "Mistral 7B v0.3": "mistral-7b-v0.3",
    "Mixtral 8x7B": "mixtral-8x7b",
    "Mixtral 8x22B v0.1 (base)": "mixtral-8x22b",
    "DeepSeek-V3": "deepseek-v3",
    "Gemma 2 9B": "gemma-2-9b",
    "Gemma 2 27B": "gemma-2-27b",
    "Qwen3 8B": "qwen3-8b",
    "Qwen3 30B-A3B": "qwen3-30b-a3b",
}


@pytest.mark.parametrize("pid", sorted(PRESETS))
def test_preset_count_matches_published_exact_count(pid: str) -> None:
    p = PRESETS[pid]
    c = count(p.arch)
    assert c.total == pytest.approx(p.published_params, rel=1e-3)
    if p.published_active is not None:
        assert c.active == pytest.approx(p.published_active, rel=1e-3)
    assert p.sources, "every preset cites its sources"
    assert p.max_seq_len >= 4096


@pytest.mark.parametrize(("name", "pid"), sorted(CAL_NAMES.items()))
def test_calibration_model_configs_are_presets(name: str, pid: str) -> None:
    configs = {m["model"]: m for m in json.loads(CAL.read_text())["model_configs"]}
    exact = configs[name]["params_exact_computed_from_config"]
    total = exact["total"] if isinstance(exact, dict) else exact
    assert count(PRESETS[pid].arch).total == pytest.approx(total, rel=1e-3)
    assert PRESETS[pid].published_params == total


def test_list_presets_shape() -> None:
    rows = list_presets()
    assert {r["id"] for r in rows} == set(PRESETS)
    for r in rows:
        assert set(r) >= {"id", "name", "params", "max_seq_len"}
        assert r["params"] > 0


def test_largest_full_training_model_grows_with_memory() -> None:
    h100 = largest_full_training_model("hgx-h100")
    b300 = largest_full_training_model("hgx-b300")
    assert 0 < h100["params"] < b300["params"]
    # 16 B/param of model states alone bound it from above
    assert h100["params"] * 16 / 8 < 79.6 * 2**30
    assert h100["largest_preset"] is not None


NEW_2025 = {
    # id: (published total, its precision as stated by the publisher)
    "qwen3-32b": 32.8e9,
    "qwen3-235b-a22b": 235e9,
    "gpt-oss-20b": 20.91e9,
    "gpt-oss-120b": 116.83e9,
    "kimi-k2": 1.03e12,
    "llama-4-scout": 107.77e9,
    "llama-4-maverick": 400.7e9,
}


@pytest.mark.parametrize(("pid", "stated"), sorted(NEW_2025.items()))
def test_2025_presets_exist_with_counts_matching_the_stated_totals(pid: str, stated: float) -> None:
    p = PRESETS[pid]
    total = count(p.arch).total
    assert total == p.published_params
    assert total == pytest.approx(stated, rel=5e-3)
    assert {"arch", "count"} <= set(p.sources)


@pytest.mark.parametrize(("pid", "active"), [("gpt-oss-20b", 3.61e9), ("gpt-oss-120b", 5.13e9)])
def test_gpt_oss_active_count_without_input_embedding_matches_the_model_card(
    pid: str, active: float
) -> None:
    c = count(PRESETS[pid].arch)
    assert c.active - c.embedding == pytest.approx(active, rel=1e-3)


def test_gpt_oss_sliding_windows_and_sinks_change_attention_not_just_names() -> None:
    a = PRESETS["gpt-oss-120b"].arch
    assert a.attention_sinks and a.sliding_window == 128
    # half the layers see 128 keys: the mean attended length is about half of a dense model's
    assert a.mean_kv_len(8192) == pytest.approx(0.5 * 128 + 0.5 * 4096)
    assert PRESETS["qwen3-32b"].arch.mean_kv_len(8192) == 4096


def test_kimi_k2_is_mla_with_384_experts_and_llama4_maverick_interleaves_moe() -> None:
    k = PRESETS["kimi-k2"].arch
    assert k.mla is not None and k.moe is not None and k.moe.num_experts == 384
    m = PRESETS["llama-4-maverick"].arch
    assert m.moe is not None
    assert m.moe.moe_layers_in(0, m.num_layers) == 24  # every second layer
    assert not m.moe.is_moe_layer(0) and m.moe.is_moe_layer(1)
