"""Every layout the engine offers is one its framework can run: tensor parallel divides the
attention heads and the KV heads (no training stack here replicates KV heads), expert
parallel divides the experts, every pipeline stage has a layer (and Megatron's interleaved
schedule an even split), and the sequence splits under TP (sequence parallel) and CP. The
launch exporter, which checks the same, never receives a layout it would refuse for that."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sizing import PRESETS, size, size_result
from app.sizing.launch import LaunchError, export_launch, invariants, plan_of
from app.sizing.request import parse, validate
from app.sizing.shapes import shapes
from app.sizing.splits import max_tp

FRAMEWORKS = ("megatron", "fsdp2", "deepspeed", "hf")
# the parallel kinds each stack runs (HF Trainer none; DeepSpeed PP and EP only)
RUNS = {
    "megatron": {"tp", "pp", "ep", "cp"},
    "fsdp2": {"tp", "pp", "ep", "cp"},
    "deepspeed": {"pp", "ep"},
    "hf": set(),
}


def _runnable(preset: str, framework: str, seq: int, s: object, *, virtual: int = 1) -> list[str]:
    a = PRESETS[preset].arch
    tp, pp, ep, cp = s.tp, s.pp, s.ep, s.cp  # type: ignore[attr-defined]
    bad = []
    for kind, deg in (("tp", tp), ("pp", pp), ("ep", ep), ("cp", cp)):
        if deg > 1 and kind not in RUNS[framework]:
            bad.append(f"{framework} has no {kind}")
    if a.num_attention_heads % tp:
        bad.append(f"TP {tp} vs {a.num_attention_heads} heads")
    if a.num_kv_heads % tp:
        bad.append(f"TP {tp} vs {a.num_kv_heads} KV heads")
    if ep > 1 and (a.moe is None or a.moe.num_experts % ep):
        bad.append(f"EP {ep}")
    if pp > 1 and pp * virtual > a.num_layers:
        bad.append(f"PP {pp}x{virtual} vs {a.num_layers} layers")
    if framework == "megatron" and pp > 1 and virtual > 1 and a.num_layers % (pp * virtual):
        bad.append(f"interleaved {pp}x{virtual} vs {a.num_layers} layers")
    if seq % (tp * cp) or (cp > 1 and (seq // cp) % 2):
        bad.append(f"sequence {seq} under TP {tp} CP {cp}")
    return bad


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(PRESETS)),
    st.sampled_from(FRAMEWORKS),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.sampled_from([4, 8]),
    st.sampled_from([2048, 4096, 32768, 131072]),
    st.sampled_from([1, 2, 3, 4]),
)
def test_every_offered_shape_is_runnable_by_its_framework(
    preset: str, framework: str, nodes: int, g: int, seq: int, virtual: int
) -> None:
    job = parse(
        {
            "model": {"preset": preset},
            "tokens": 1e11,
            "seq_len": min(seq, PRESETS[preset].max_seq_len),
            "framework": framework,
        }
    ).job
    if virtual > 1:
        job = replace(job, pp_schedule="interleaved", virtual_stages=virtual)
    offered = shapes(job, nodes, g)
    assert offered, "every job is offered at least one shape"
    for s in offered:
        assert not _runnable(preset, framework, job.seq_len, s, virtual=virtual), s


def test_qwen25_7b_never_gets_tp8_but_keeps_tp4() -> None:
    """28 heads, 4 KV heads: TP 8 splits neither; TP 4 (and 2) split both."""
    job = parse(
        {
            "model": {"preset": "qwen2.5-7b"},
            "tokens": 1e11,
            "seq_len": 4096,
            "framework": "megatron",
        }
    ).job
    tps = {s.tp for n in (1, 2, 4) for s in shapes(job, n, 8)}
    assert 8 not in tps
    assert {2, 4} <= tps


def test_gqa_with_four_kv_heads_caps_tp_at_four() -> None:
    a = PRESETS["qwen3-235b-a22b"].arch  # 64 heads, 4 KV heads
    assert max_tp(a, 4096, 8) == 4
    assert max_tp(PRESETS["llama-3.1-70b"].arch, 4096, 8) == 8
    assert max_tp(PRESETS["qwen2.5-7b"].arch, 4096, 8) == 4  # 28 heads: 4 divides, 8 not
    assert max_tp(PRESETS["llama-3.1-8b"].arch, 4098, 8) == 2  # the sequence: 4098 = 2·2049


@pytest.mark.parametrize(
    "preset, framework",
    [
        ("qwen2.5-7b", "megatron"),
        ("qwen3-30b-a3b", "megatron"),
        ("qwen3-235b-a22b", "fsdp2"),
        ("llama-3.2-3b", "megatron"),
    ],
)
def test_every_option_passes_the_exporters_rules(preset: str, framework: str) -> None:
    req = {
        "model": {"preset": preset},
        "tokens": 1e12,
        "seq_len": 4096,
        "framework": framework,
        "nodes": 4,
    }
    result = size_result(req)
    v = validate(req)
    for i, o in enumerate(result.options):
        if o.layout is None:
            continue
        assert o.layout["tp"] == 1 or PRESETS[preset].arch.num_kv_heads % o.layout["tp"] == 0
        assert invariants(plan_of(v, result, i)) == []


def test_exporter_refuses_a_tp_the_kv_heads_do_not_split() -> None:
    """A plan whose TP splits the heads but not the KV heads is refused, never written."""
    req = {
        "model": {"preset": "qwen2.5-7b"},
        "tokens": 1e11,
        "sku": "hgx-h100",
        "nodes": 1,
        "parallelism": {"sharding": "zero1", "tp": 4},
    }
    bad = plan_of(validate(req), size_result(req), 0)
    assert invariants(bad) == []
    qwen3 = replace(bad, arch=PRESETS["qwen3-8b"].arch)  # 32 heads, 8 KV heads: TP 4 is fine
    assert invariants(qwen3) == []
    gqa2 = replace(bad, arch=replace(PRESETS["qwen2.5-7b"].arch, num_kv_heads=2))
    assert any("KV heads" in r for r in invariants(gqa2))


def test_pinned_tp_the_kv_heads_do_not_split_is_a_field_error() -> None:
    from app.sizing.errors import SizingError

    req = {
        "model": {"preset": "qwen3-30b-a3b"},
        "tokens": 1e11,
        "sku": "hgx-h100",
        "nodes": 1,
        "parallelism": {"sharding": "zero1", "tp": 8},
    }
    with pytest.raises(SizingError) as e:
        parse(req)
    assert e.value.field == "parallelism.tp"
    assert e.value.codes[0][1].code == "request.tp_kv_heads"


def test_pinned_interleaved_pipeline_megatron_cannot_split_is_not_offered() -> None:
    """Llama 3.1 8B has 32 layers: PP 4 × 3 virtual stages does not split evenly, which
    Megatron-Core's interleaved schedule refuses; the answer says why instead of a plan."""
    req = {
        "model": {"preset": "llama-3.1-8b"},
        "tokens": 1e11,
        "sku": "hgx-h100",
        "nodes": 1,
        "framework": "megatron",
        "pp_schedule": "interleaved",
        "virtual_stages": 3,
        "parallelism": {"sharding": "zero1", "tp": 2, "pp": 4},
    }
    out = size(req)
    codes = [n["code"] for o in out["options"] for n in o.get("note_codes", [])]
    assert "note.layout_split" in codes
    with pytest.raises(LaunchError):
        export_launch(req, 0, "megatron")


def test_seq_unit_under_cp_is_even_chunks_per_rank() -> None:
    from app.sizing.splits import seq_unit

    assert seq_unit(1, 1) == 1
    assert seq_unit(8, 1) == 8
    assert seq_unit(1, 4) == 8  # 2·CP load-balanced chunks
    assert seq_unit(4, 2) == 8
    assert math.lcm(8, 2) * 2 == seq_unit(8, 2)
