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
