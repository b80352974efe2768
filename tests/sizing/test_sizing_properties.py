"""Property tests (Hypothesis) of the memory model and of ``size`` as a whole."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sizing import PRESETS, size
from app.sizing.memory import Job, Layout, memory
from app.sizing.params import Architecture, MoE, count, derive_architecture

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def archs(draw: st.DrawFn) -> Architecture:
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv * draw(st.integers(1, 8))
    head_dim = draw(st.sampled_from([64, 128]))
    moe = None
    if draw(st.booleans()):
        e = draw(st.sampled_from([4, 8, 16, 64]))
        moe = MoE(
            e,
            draw(st.integers(1, min(e, 8))),
            draw(st.integers(128, 8192)),
            draw(st.integers(0, 2)),
        )
    return Architecture(
        vocab_size=draw(st.integers(1000, 260_000)),
        hidden_size=heads * head_dim,
        intermediate_size=draw(st.integers(256, 40_000)),
        num_layers=draw(st.integers(1, 96)),
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        tie_embeddings=draw(st.booleans()),
        moe=moe,
    )


def job(a: Architecture, *, seq: int = 4096, flash: bool = True, method: str = "full") -> Job:
    return Job(a, count(a), method, seq, "bf16", "adamw", "bf16", True, flash, 16)


@st.composite
def layouts(draw: st.DrawFn, sharding: str | None = None) -> Layout:
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    sh = sharding or draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
    return Layout(
        sharding=sh,
        shard_group=1 if sh == "ddp" else dp,
        tp=tp,
        pp=pp,
        ep=1,
        cp=1,
        micro_batch_size=draw(st.integers(1, 8)),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        offload_optimizer=draw(st.booleans()),
        offload_params=False,
        world=tp * pp * dp,
    )


def states(m: Any) -> int:
    return int(m.weights + m.gradients + m.master_weights + m.optimizer_states)


@FAST
@given(
    archs(),
    layouts(),
    st.sampled_from(["num_layers", "intermediate_size", "vocab_size"]),
    st.integers(1, 4096),
)
def test_more_parameters_never_need_less_memory(
    a: Architecture, lay: Layout, dim: str, extra: int
) -> None:
    from dataclasses import replace

    bigger = replace(a, **{dim: getattr(a, dim) + extra})
    assert count(bigger).total >= count(a).total
    assert memory(job(bigger), lay).total >= memory(job(a), lay).total


@FAST
@given(
    archs(),
    layouts(sharding="zero3"),
    st.sampled_from(["zero1", "zero2", "zero3"]),
    st.integers(0, 4),
    st.integers(1, 4),
)
def test_larger_shard_group_never_raises_model_states(
    a: Architecture, lay: Layout, sharding: str, k: int, more: int
) -> None:
    from dataclasses import replace

    small = replace(
        lay, sharding=sharding, shard_group=2**k, world=lay.tp * lay.pp * 2 ** (k + more)
    )
    large = replace(small, shard_group=2 ** (k + more))
    assert states(memory(job(a), large)) <= states(memory(job(a), small))


@FAST
@given(archs(), layouts(), st.booleans(), st.sampled_from([512, 4096, 32768]))
def test_activations_full_le_selective_le_none(
    a: Architecture, lay: Layout, flash: bool, seq: int
) -> None:
    from dataclasses import replace

    j = job(a, seq=seq, flash=flash)
    acts = [memory(j, replace(lay, recompute=r)).activations for r in ("full", "selective", "none")]
    assert acts[0] <= acts[1] <= acts[2]


SKUS = ["hgx-h100", "hgx-h200", "hgx-b200", "hgx-b300", "mi355x", "gb300-nvl72"]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["preset", "params", "architecture"]))
    max_seq = 32768
    if kind == "preset":
        pid = draw(st.sampled_from(sorted(PRESETS)))
        model: dict[str, Any] = {"preset": pid}
        max_seq = min(max_seq, PRESETS[pid].max_seq_len)
    elif kind == "params":
        model = {"params": draw(st.floats(1e6, 2e12))}
    else:
        a = draw(archs())
        arch: dict[str, Any] = {
            "vocab_size": a.vocab_size,
            "hidden_size": a.hidden_size,
            "intermediate_size": a.intermediate_size,
            "num_layers": a.num_layers,
            "num_attention_heads": a.num_attention_heads,
            "num_kv_heads": a.num_kv_heads,
            "head_dim": a.head_dim,
            "tie_embeddings": a.tie_embeddings,
        }
        if a.moe is not None:
            arch["moe"] = {
                "num_experts": a.moe.num_experts,
                "experts_per_token": a.moe.experts_per_token,
                "expert_intermediate_size": a.moe.expert_intermediate_size,
                "shared_experts": a.moe.shared_experts,
            }
        model = {"architecture": arch}
    method = draw(st.sampled_from(["full", "lora", "qlora"]))
    req: dict[str, Any] = {
        "model": model,
        "method": method,
        "tokens": draw(st.floats(1e3, 1e13)),
        "seq_len": draw(st.integers(16, max_seq)),
        "micro_batch_size": draw(st.integers(1, 8)),
        "precision": "bf16" if method != "full" else draw(st.sampled_from(["bf16", "fp8"])),
        "optimizer": draw(st.sampled_from(["adamw", "adamw8bit"])),
        "grad_dtype": draw(st.sampled_from(["bf16", "fp32"])),
        "flash_attention": draw(st.booleans()),
        "mfu": draw(st.one_of(st.none(), st.floats(0.01, 1.0))),
        "sku": draw(st.one_of(st.none(), st.sampled_from(SKUS))),
        "nodes": draw(st.one_of(st.none(), st.integers(1, 64))),
    }
    if draw(st.booleans()):
        req["recompute"] = draw(st.sampled_from(["none", "selective", "full"]))
    if draw(st.booleans()):
        req["parallelism"] = {
            "sharding": draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"])),
            "tp": draw(st.sampled_from([1, 2, 4, 8])),
            "pp": draw(st.sampled_from([1, 2])),
        }
        if kind in ("preset", "params"):
            a = (
                PRESETS[model["preset"]].arch
                if kind == "preset"
                else derive_architecture(model["params"])
            )
            heads, kv_heads = a.num_attention_heads, a.num_kv_heads
        else:
            heads = model["architecture"]["num_attention_heads"]
            kv_heads = model["architecture"]["num_kv_heads"]
        tp = req["parallelism"]["tp"]
        if heads % tp or kv_heads % tp:
            # keep the request valid: TP must divide the heads and the KV heads
            req["parallelism"]["tp"] = 1
        if kind != "preset":
            req["parallelism"]["pp"] = 1  # generated models may have a single layer
    return req


def walk(x: Any, path: str = "") -> None:
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return
    if isinstance(x, (int, float)):
        assert math.isfinite(x), path
        assert x >= 0, path
    elif isinstance(x, dict):
        for k, v in x.items():
            walk(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            walk(v, f"{path}[{i}]")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_no_nan_infinity_or_negative_for_valid_input(req: dict[str, Any]) -> None:
    out = size(req)
    walk(out)
    assert out["options"]
    assert out["assumptions"]
