"""HTTP route and CLI: same JSON in and out; bad input names the field (422 / exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, date, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.sizing import router
from app.clock import FixedClock
from app.sizing import SizingError, size


@pytest.fixture(scope="module")
def router_client() -> TestClient:
    app = FastAPI()
    app.include_router(router)
    # the router reads the app's clock (the customer's today for finish dates); no engine:
    # the answer then carries no delivery dates, as when the catalog cannot be read
    app.state.clock = FixedClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    return TestClient(app)


GOOD = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "seq_len": 4096}

BAD: list[tuple[dict[str, Any], str]] = [
    ({**GOOD, "model": {"preset": "llama-9"}}, "model.preset"),
    ({**GOOD, "tokens": -5}, "tokens"),
    ({**GOOD, "tokens": "lots"}, "tokens"),
    ({**GOOD, "mfu": 1.5}, "mfu"),
    ({**GOOD, "mfu": 0}, "mfu"),
    ({**GOOD, "seq_len": 2_000_000}, "seq_len"),  # over the 1,048,576 any model may ask
    ({**GOOD, "colour": "red"}, "colour"),
    ({**GOOD, "sku": "hgx-a100"}, "sku"),
    ({**GOOD, "nodes": 0}, "nodes"),
    ({**GOOD, "micro_batch_size": 2.5}, "micro_batch_size"),
    ({**GOOD, "precision": "fp4", "sku": "hgx-h100"}, "precision"),  # H100: no FP4 cores
    ({**GOOD, "recompute": "sometimes"}, "recompute"),
    ({**GOOD, "flash_attention": "yes"}, "flash_attention"),
    ({**GOOD, "model": {"params": -7e9}}, "model.params"),
    ({**GOOD, "model": {"params": 1e20}}, "model.params"),
    ({**GOOD, "model": {}}, "model"),
    ({**GOOD, "model": {"architecture": {"vocab_size": 32000}}}, "model.architecture.hidden_size"),
    (
        {
            **GOOD,
            "model": {
                "architecture": {
                    "vocab_size": 32000,
                    "hidden_size": 4096,
                    "intermediate_size": 11008,
                    "num_layers": 32,
                    "num_attention_heads": 32,
                    "num_kv_heads": 5,
                }
            },
        },
        "model.architecture.num_kv_heads",
    ),
    ({**GOOD, "parallelism": {"tp": 3}}, "parallelism.tp"),
    ({**GOOD, "parallelism": {"sharding": "zero4"}}, "parallelism.sharding"),
    ({**GOOD, "parallelism": {"ep": 2}}, "parallelism.ep"),
    ({**GOOD, "parallelism": {"ring": 2}}, "parallelism.ring"),
    ({k: v for k, v in GOOD.items() if k != "tokens"}, "tokens"),
]


def test_post_returns_the_engine_answer(router_client: TestClient) -> None:
    r = router_client.post("/api/v1/sizing", json=GOOD)
    assert r.status_code == 200
    body = r.json()
    assert body["params"] == 8030261248
    assert {o["sku"] for o in body["options"]} >= {"hgx-h100", "hgx-b200", "gb300-nvl72"}
    assert body["recommendation"]["sku"]
    for o in body["options"]:
        assert set(o["memory_per_gpu_bytes"]) == {
            "weights",
            "gradients",
            "master_weights",
            "optimizer_states",
            "activations",
            "overhead",
            "total",
        }
    # the route sizes as of the customer's today (its clock; UTC here), with no stock read
    assert body == json.loads(json.dumps(size(GOOD, today=date(2026, 12, 1))))


@pytest.mark.parametrize(("req", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_input_is_422_naming_the_field(
    router_client: TestClient, req: dict[str, Any], field: str
) -> None:
    r = router_client.post("/api/v1/sizing", json=req)
    assert r.status_code == 422
    fields = [e["field"] for e in r.json()["detail"]["errors"]]
    assert field in fields
    with pytest.raises(SizingError) as ei:
        size(req)
    assert field in [f for f, _ in ei.value.errors]
    assert ei.value.field and ei.value.message


def test_a_context_past_the_models_own_is_sized_with_a_warning(router_client: TestClient) -> None:
    """MLPerf fine-tunes Llama 2 70B (pre-trained at 4k) at 8k: the engine sizes such a run
    as asked and says, in both languages, what training past the model's context needs."""
    req = {
        "model": {"preset": "llama-2-70b"},
        "tokens": 1e9,
        "seq_len": 8192,
        "method": "lora",
        "precision": "fp8",
        "framework": "megatron",
    }
    r = router_client.post("/api/v1/sizing", json=req)
    assert r.status_code == 200, r.text
    body = r.json()
    codes = [w["code"] for w in body["warning_codes"]]
    assert "warning.beyond_native_context" in codes
    (w,) = [w for w in body["warning_codes"] if w["code"] == "warning.beyond_native_context"]
    assert w["params"] == {"seq_len": 8192, "max_seq_len": 4096}
    assert body["recommendation"]["sku"] and body["recommendation"]["nodes"] >= 1
    assert any("4096" in t and "8192" in t for t in body["warnings"])
    zh = size(req, lang="zh_CN")["warnings"]
    assert any("预训练" in t and "4096" in t for t in zh)
    # within the model's own context: no such warning
    short = size({**req, "seq_len": 4096})
    assert "warning.beyond_native_context" not in [w["code"] for w in short["warning_codes"]]


def test_non_object_body_is_422(router_client: TestClient) -> None:
    r = router_client.post("/api/v1/sizing", json=[1, 2])
    assert r.status_code == 422
    assert r.json()["detail"]["errors"][0]["field"] == "request"


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_unknown_keys_are_named(key: str) -> None:
    req = {**GOOD, key: 1}
    if key in GOOD or key in {
        "method",
        "seq_len",
        "micro_batch_size",
        "precision",
        "optimizer",
        "grad_dtype",
        "master_weights",
        "recompute",
        "flash_attention",
        "parallelism",
        "offload_optimizer",
        "offload_params",
        "nodes",
        "sku",
        "mfu",
        "lora_rank",
        "attention_flops",
        "token_bytes",
    }:
        return
    with pytest.raises(SizingError) as ei:
        size(req)
    assert (key, "unknown field") in ei.value.errors


def test_presets_endpoint(router_client: TestClient) -> None:
    r = router_client.get("/api/v1/sizing/presets")
    assert r.status_code == 200
    assert any(p["id"] == "deepseek-v3" for p in r.json())


def _cli(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.sizing", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_reads_stdin_and_writes_json() -> None:
    p = _cli([], json.dumps(GOOD))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["params"] == 8030261248


def test_cli_flags() -> None:
    p = _cli(["--preset", "mixtral-8x7b", "--tokens", "1e10", "--sku", "hgx-b200", "--indent", "0"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [o["sku"] for o in out["options"]] == ["hgx-b200"]


def test_cli_bad_input_exits_2_naming_the_field() -> None:
    p = _cli([], json.dumps({**GOOD, "mfu": 3}))
    assert p.returncode == 2
    assert json.loads(p.stderr)["errors"][0]["field"] == "mfu"
    p = _cli([], "{not json")
    assert p.returncode == 2


def test_cli_help_mentions_friendly_flags() -> None:
    p = _cli(["--help"])
    assert p.returncode == 0
    for flag in ("--preset", "--tokens", "--seq-len"):
        assert flag in p.stdout


def test_route_is_mounted_in_the_app(client: TestClient) -> None:
    """Through the real app factory (middleware included; conftest's CSRF-aware client)."""
    ok = client.post("/api/v1/sizing", json=GOOD)
    assert ok.status_code == 200, ok.text
    bad = client.post("/api/v1/sizing", json={**GOOD, "mfu": 2})
    assert bad.status_code == 422
    assert "mfu" in json.dumps(bad.json())


def test_thousands_of_bad_fields_are_counted_not_all_listed() -> None:
    """8,000 unknown keys answered 8,000 errors (695 KB): twenty are named, the rest counted."""
    from app.sizing.request import MAX_ERRORS

    body: dict[str, Any] = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12}
    body.update({f"x{i}": 1 for i in range(8000)})
    with pytest.raises(SizingError) as e:
        size(body)
    errors = e.value.as_dict()["errors"]
    assert len(errors) == MAX_ERRORS + 1
    assert errors[-1]["code"] == "request.more_errors"
    assert errors[-1]["params"] == {"n": 8000 - MAX_ERRORS}
