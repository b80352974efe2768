"""Framework-aware memory: pipeline schedules, context parallel, ranges and fit verdicts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sizing import PRESETS
from app.sizing.activations import Stack
from app.sizing.memory import (
    FRAMEWORKS,
    MAX_RANGE_RATIO,
    Job,
    Layout,
    activation_bytes,
    fit_verdict,
    layer_activation_bytes_per_token,
    memory,
    memory_range,
)
from app.sizing.params import Architecture, count

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PRESET_IDS = sorted(PRESETS)
FRAMEWORK_IDS = sorted(FRAMEWORKS)


def _job(pid: str, framework: str = "fsdp2", seq: int = 8192, **kw: object) -> Job:
    p = PRESETS[pid]
    return Job(
        p.arch,
        count(p.arch),
        "full",
        seq,
        str(kw.pop("precision", "bf16")),
        "adamw",
        "fp32",
        True,
        True,
        16,
        framework=framework,
        **kw,  # type: ignore[arg-type]
    )


def _lay(**kw: object) -> Layout:
    base: dict[str, object] = {
        "sharding": "zero3",
        "shard_group": 8,
        "tp": 1,
        "pp": 1,
        "ep": 1,
        "cp": 1,
        "micro_batch_size": 1,
        "recompute": "selective",
        "offload_optimizer": False,
        "offload_params": False,
        "world": 8,
    }
    base.update(kw)
    return Layout(**base)  # type: ignore[arg-type]


# --- properties ----------------------------------------------------------------------------


@FAST
@given(
    pid=st.sampled_from(PRESET_IDS),
    fw=st.sampled_from(FRAMEWORK_IDS),
    pp=st.sampled_from([2, 4, 8]),
    schedule=st.sampled_from(["1f1b", "interleaved", "gpipe"]),
    v=st.integers(1, 4),
    m=st.integers(1, 64),
    extra=st.integers(1, 64),
    recompute=st.sampled_from(["none", "selective", "full"]),
    mbs=st.integers(1, 4),
)
def test_more_microbatches_in_flight_never_need_less_first_stage_memory(
    pid: str,
    fw: str,
    pp: int,
    schedule: str,
    v: int,
    m: int,
    extra: int,
    recompute: str,
    mbs: int,
) -> None:
    job = _job(pid, fw, seq=4096)
    if pp > job.arch.num_layers:
        return
    few = _lay(
        pp=pp,
        pp_schedule=schedule,
        virtual_stages=v,
        num_microbatches=m,
        recompute=recompute,
        micro_batch_size=mbs,
        world=8 * pp,
    )
    many = replace(few, num_microbatches=m + extra)
    assert many.in_flight >= few.in_flight
    a_few, _ = activation_bytes(job, few, first_stage=True)
    a_many, _ = activation_bytes(job, many, first_stage=True)
    assert a_many >= a_few


@FAST
@given(
    pid=st.sampled_from(PRESET_IDS),
    fw=st.sampled_from(FRAMEWORK_IDS),
    cp=st.sampled_from([1, 2, 4, 8]),
    tp=st.sampled_from([1, 2, 8]),
    recompute=st.sampled_from(["none", "selective", "full"]),
    seq_k=st.sampled_from([8, 32, 128]),
    flash=st.booleans(),
)
def test_adding_cp_ranks_never_raises_activation_memory_per_gpu(
    pid: str, fw: str, cp: int, tp: int, recompute: str, seq_k: int, flash: bool
) -> None:
    job = replace(_job(pid, fw, seq=seq_k * 1024), flash_attention=flash)
    if job.arch.num_attention_heads % tp:
        return
    lay = _lay(tp=tp, cp=cp, recompute=recompute, world=8 * tp * cp)
    more = replace(lay, cp=cp * 2, world=lay.world * 2)
    assert (
        activation_bytes(job, more, first_stage=True)[0]
        <= (activation_bytes(job, lay, first_stage=True)[0])
    )


@FAST
@given(
    pid=st.sampled_from(PRESET_IDS),
    fw=st.sampled_from(FRAMEWORK_IDS),
    sharding=st.sampled_from(["ddp", "zero1", "zero2", "zero3"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    mbs=st.integers(1, 8),
    recompute=st.sampled_from(["none", "selective", "full"]),
    precision=st.sampled_from(["bf16", "fp8", "fp4"]),
)
def test_range_always_contains_the_likely_value(
    pid: str,
    fw: str,
    sharding: str,
    tp: int,
    pp: int,
    mbs: int,
    recompute: str,
    precision: str,
) -> None:
    job = _job(pid, fw, seq=4096, precision=precision)
    if job.arch.num_attention_heads % tp or pp > job.arch.num_layers:
        return
    lay = _lay(
        sharding=sharding,
        tp=tp,
        pp=pp,
        micro_batch_size=mbs,
        recompute=recompute,
        world=8 * tp * pp,
    )
    mem = memory(job, lay)
    lo, hi = memory_range(mem)
    assert 0 < lo <= mem.total <= hi
    assert hi / lo <= MAX_RANGE_RATIO + 1e-6
    lo_a, hi_a = memory_range(mem, mem.allocated)
    assert lo_a <= mem.allocated <= hi_a


# --- worked examples ------------------------------------------------------------------------


def test_pipeline_schedules_hold_the_documented_micro_batches() -> None:
    assert _lay(pp=4, world=32).in_flight == 4  # 1F1B: pp
    assert _lay(pp=4, num_microbatches=2, world=32).in_flight == 2  # fewer than pp
    inter = _lay(pp=4, pp_schedule="interleaved", virtual_stages=2, world=32)
    assert inter.in_flight == pytest.approx(4 + 3 / 2)  # Megatron-LM: pp + (pp-1)/v
    assert _lay(pp=4, pp_schedule="gpipe", num_microbatches=16, world=32).in_flight == 16


def test_fsdp2_and_megatron_shard_over_cp_ranks() -> None:
    job = _job("llama-3.1-8b", "fsdp2")
    # 8 GPUs as DP 4 x CP 2: the shard group is the 8 ranks of DP x CP
    over_cp = memory(job, _lay(shard_group=8, cp=2))
    dp_only = memory(job, _lay(shard_group=4, cp=2))
    assert over_cp.master_weights < dp_only.master_weights
    assert FRAMEWORKS["fsdp2"].shard_over_cp and FRAMEWORKS["megatron"].shard_over_cp


def test_fsdp2_keeps_no_persistent_bf16_copy_but_megatron_does() -> None:
    lay = _lay()
    fsdp2 = memory(_job("llama-3.1-8b", "fsdp2"), lay)
    meg = memory(_job("llama-3.1-8b", "megatron"), _lay(sharding="zero1"))
    assert fsdp2.weights == 0  # FP32 sharded parameters are the master copy
    assert meg.weights == pytest.approx(2 * 8_030_261_248, rel=1e-6)


def test_op_level_sac_keeps_less_than_no_recompute_and_more_than_full() -> None:
    job = _job("llama-3.1-8b", "fsdp2")
    none = activation_bytes(job, _lay(recompute="none"), first_stage=True)[0]
    sac = activation_bytes(job, _lay(recompute="selective"), first_stage=True)[0]
    full = activation_bytes(job, _lay(recompute="full"), first_stage=True)[0]
    assert full < sac < none


def test_compile_chunked_loss_offload_and_optimizer_in_backward_save_memory() -> None:
    lay = _lay(recompute="full")
    base = memory(_job("llama-3.1-8b", "hf"), lay)
    for kw in (
        {"compile": True},
        {"chunked_loss": True},
        {"activation_offload": True},
        {"optimizer_in_backward": True},
    ):
        assert memory(_job("llama-3.1-8b", "hf", **kw), lay).total < base.total, kw


def test_fp4_keeps_a_quantised_copy_beside_bf16_and_fp32_masters() -> None:
    lay = _lay(sharding="zero1")
    bf16 = memory(_job("llama-3.1-8b", "megatron"), lay)
    fp4 = memory(_job("llama-3.1-8b", "megatron", precision="fp4"), lay)
    fp8 = memory(_job("llama-3.1-8b", "megatron", precision="fp8"), lay)
    n = 8_030_261_248
    assert fp4.weights - bf16.weights == pytest.approx(1.125 * n, rel=1e-6)
    assert bf16.weights < fp8.weights < fp4.weights
    assert fp4.master_weights == bf16.master_weights


def test_fit_verdicts() -> None:
    mem = memory(_job("llama-3.1-8b"), _lay())
    lo, hi = memory_range(mem)
    assert fit_verdict(mem, hi + 1) == "fits"
    assert fit_verdict(mem, (mem.total + hi) / 2) == "tight"
    assert fit_verdict(mem, mem.total - 1) == "does_not_fit"


def test_kimi_k2_fp4_on_eight_b300_nodes_fits_with_expert_parallel() -> None:
    job = _job("kimi-k2", "megatron", seq=4096, precision="fp4")
    lay = _lay(sharding="zero1", shard_group=64, tp=1, pp=8, ep=64, world=512)
    mem = memory(job, lay)
    assert mem.total < 268e9  # B300: 288 GB HBM3e
    assert job.arch.moe is not None and job.arch.moe.num_experts == 384


def test_megatron_non_gated_experts_keep_the_probs_weighted_product() -> None:
    """Megatron multiplies the router's probs into a GeLU expert's activation output without
    a fused kernel: one more expert-width tensor per routed copy; gated SwiGLU experts (fused
    kernel) and other frameworks are unchanged."""
    gated = PRESETS["mixtral-8x7b"].arch
    assert gated.moe is not None
    gelu = replace(gated, gated_mlp=False)
    k, f = gated.moe.experts_per_token, gated.moe.expert_intermediate_size

    def per_token(arch: Architecture, probs_in_act: bool) -> float:
        return layer_activation_bytes_per_token(
            arch,
            Stack(moe_probs_in_act=probs_in_act),
            moe_layer=True,
            tp=1,
            kv_len=4096,
            flash=True,
            recompute="none",
        )

    assert per_token(gelu, True) - per_token(gelu, False) == pytest.approx(k * 2.0 * f)
    assert per_token(gated, True) == per_token(gated, False)
    assert FRAMEWORKS["megatron"].moe_probs_in_act
    assert not FRAMEWORKS["fsdp2"].moe_probs_in_act


def test_eager_stacks_keep_repeated_kv_and_the_gated_product() -> None:
    """torchtitan-style code (fsdp2, hf) repeats K/V to every query head before attention
    and runs an eager SwiGLU; Megatron's fused kernels keep neither. Measured on an H200
    (tools/gpu_memory): the difference is exactly these tensors."""
    a = PRESETS["llama-3.1-8b"].arch
    q = a.num_attention_heads * a.head_dim
    kv = a.num_kv_heads * a.head_dim

    def per_token(fw: str) -> float:
        p = FRAMEWORKS[fw]
        return layer_activation_bytes_per_token(
            a,
            Stack(repeat_kv=p.repeat_kv, fused_gated_act=p.fused_gated_act),
            moe_layer=False,
            tp=1,
            kv_len=8192,
            flash=True,
            recompute="none",
        )

    extra = 2 * 2.0 * (q - kv) + 2.0 * a.intermediate_size
    assert per_token("fsdp2") - per_token("megatron") == pytest.approx(extra)
    assert per_token("hf") == per_token("fsdp2")


def test_fsdp2_keeps_gathered_bf16_copies_on_a_single_rank() -> None:
    """FSDP2's cast to the gather dtype materialises BF16 copies even with one rank."""
    job = _job("llama-3.2-1b")
    lay = Layout("zero3", 1, 1, 1, 1, 1, 1, "none", False, False, 1)
    mem = memory(job, lay)
    assert mem.gather_buffers > 0
    assert (
        memory(_job("llama-3.2-1b", "megatron"), replace(lay, sharding="zero1")).gather_buffers == 0
    )


def test_experts_under_ep_stay_whole_as_the_launch_file_runs_them() -> None:
    """With EP the exported Megatron file sets ``--expert-tensor-parallel-size 1`` (torchtitan's
    default is 1 as well): each GPU holds 1/ep of the stage's experts, whole, whatever the TP
    degree, and their ZeRO-1 state is sharded over tp × dp / ep ranks; without EP, TP splits
    them like any MLP."""
    job = _job("qwen3-30b-a3b", "megatron", seq=4096)
    moe = job.arch.moe
    assert moe is not None
    experts = job.counts.moe_layer_experts * moe.moe_layers_in(0, job.arch.num_layers)
    dense = job.counts.total - experts
    for tp, ep in ((1, 8), (2, 8), (4, 8), (2, 1), (4, 1)):
        lay = _lay(sharding="zero1", shard_group=8, tp=tp, ep=ep, world=8 * tp)
        mem = memory(job, lay)
        split = ep if ep > 1 else tp
        # BF16 weights whole on every rank of the data-parallel group (ZeRO-1)
        assert mem.weights == pytest.approx(2.0 * (dense / tp + experts / split), rel=1e-9)
        # the FP32 master is sharded: the experts' over tp * 8 / split ranks
        shard = dense / tp / 8 + experts / split / (8 * tp // split)
        assert mem.master_weights == pytest.approx(4.0 * shard, rel=1e-9)


def test_op_level_sac_recomputes_grouped_experts_and_keeps_per_expert_linears() -> None:
    """torchtitan's op-level SAC saves ``aten.mm`` outputs (every other one) and attention;
    the routed experts run as one grouped GEMM, which its list does not name, so an MoE
    block keeps no routed-expert tensor and no dispatched copy. HF code loops over the
    experts with plain linears: those are ``aten.mm`` and every other one is kept."""
    a = PRESETS["qwen3-30b-a3b"].arch
    assert a.moe is not None
    k, f, h = a.moe.experts_per_token, a.moe.expert_intermediate_size, a.hidden_size

    def per_token(grouped: bool, recompute: str = "selective") -> float:
        return layer_activation_bytes_per_token(
            a,
            Stack(selective="op", grouped_experts=grouped),
            moe_layer=True,
            tp=1,
            kv_len=8192,
            flash=True,
            recompute=recompute,
        )

    # per-expert linears keep one branch output and the input of each routed copy more
    assert per_token(False) - per_token(True) == pytest.approx(k * 2.0 * (f + h) + k * 2.0 * h)
    # kept: the block input, attention (q, v, output, log-sum-exp) and the router's logits
    assert per_token(True) < 0.25 * per_token(True, "none")
    assert per_token(True) > per_token(True, "full")


def test_torchtitan_moe_with_op_sac_on_b200_is_sized_near_its_measured_peak() -> None:
    """mlc-ai/pith-train issue 79: torchtitan, Qwen3-30B-A3B on 8 x B200, FSDP 8, micro-batch
    8 x 8,192 tokens, op-level SAC, compiled blocks and an eight-chunk loss: 141.8 GiB
    reserved. Keeping the routed experts' tensors put the answer above 400 GiB."""
    p = PRESETS["qwen3-30b-a3b"]
    job = _job("qwen3-30b-a3b", "fsdp2", compile=True, chunked_loss=True)
    mem = memory(job, _lay(micro_batch_size=8))
    assert p.arch.moe is not None
    assert 141.8 * 0.9 <= mem.reserved / 2**30 <= 141.8 * 1.2
