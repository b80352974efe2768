"""Time model: weak scaling, FP4 availability, the request's mfu override, calibration."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.catalog.specs import all_specs, spec
from app.sizing import size
from app.sizing.errors import SizingError
from app.sizing.gpus import Hardware, hardware_from_spec
from app.sizing.params import count
from app.sizing.presets import PRESETS
from app.sizing.profiles import profile
from app.sizing.request import parse
from app.sizing.throughput import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    OPT_BYTES_PER_PARAM,
    Setup,
    default_batch_tokens,
    gemm_split,
    predict,
)
from bench.throughput_accuracy import evaluate

PRESET_IDS = ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3")
SKUS = tuple(s.id for s in all_specs())


@st.composite
def jobs(draw: st.DrawFn) -> tuple[object, ...]:
    pid = draw(st.sampled_from(PRESET_IDS))
    arch = PRESETS[pid].arch
    sku = spec(draw(st.sampled_from(SKUS)))
    precisions = ["bf16", "fp8"] + (["fp4"] if sku.fp4_dense_tflops else [])
    precision = draw(st.sampled_from(precisions))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    cp = draw(st.sampled_from([1, 2]))
    ep = 1
    if arch.moe is not None:
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if arch.moe.num_experts % e == 0]))
    sharding = draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
    hsdp = draw(st.booleans())
    nodes = draw(st.integers(1, 16))
    factor = draw(st.integers(2, 8))
    g = sku.gpus_per_node
    setup = Setup(
        world=nodes * g,
        tp=tp,
        pp=pp,
        ep=ep,
        cp=cp,
        sharding=sharding,
        shard_group=max(1, g // (tp * cp)) if hsdp else None,
        micro_batch_size=draw(st.integers(1, 4)),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        # ZeRO-Offload's host optimizer step updates a smaller shard on more nodes, a real
        # super-linear effect the model keeps; the property is for on-GPU optimizer states
        offload_optimizer=False,
        num_microbatches=draw(st.integers(1, 64)),
        pp_schedule=draw(st.sampled_from(["1f1b", "interleaved", "gpipe", "dualpipe"])),
        virtual_stages=draw(st.integers(1, 4)),
    )
    seq = draw(st.sampled_from([2048, 4096, 32768]))
    return pid, sku, precision, setup, seq, factor


@settings(max_examples=60, deadline=None)
@given(jobs())
def test_gemm_split_adds_up_to_the_models_gemm_term(job: tuple[object, ...]) -> None:
    """The step-time decomposition in docs/sizing-accuracy-time.md uses ``gemm_split``; its
    parts must be exactly ``predict``'s GEMM term."""
    pid, sku, precision, setup, seq, _ = job
    assert isinstance(pid, str) and isinstance(setup, Setup) and isinstance(seq, int)
    assert isinstance(precision, str)
    arch = PRESETS[pid].arch
    c = count(arch)
    hw = hardware_from_spec(sku)  # type: ignore[arg-type]
    t = predict(arch, c, seq, precision, setup, hw)
    parts = gemm_split(arch, c, seq, precision, setup, hw)
    total = sum(parts.values()) * t.tokens_per_step_per_gpu
    assert total == pytest.approx(t.breakdown["gemm"], rel=1e-9)
    assert all(v >= 0 for v in parts.values())


def test_gemm_split_of_kimi_k2_is_dominated_by_its_small_expert_gemms() -> None:
    arch = PRESETS["kimi-k2"].arch
    c = count(arch)
    hw = hardware_from_spec(spec("hgx-b300"))
    setup = Setup(world=72, ep=8, sharding="zero3", recompute="full")
    t = predict(arch, c, 4096, "fp4", setup, hw)
    parts = gemm_split(arch, c, 4096, "fp4", setup, hw)
    assert sum(parts.values()) * t.tokens_per_step_per_gpu == pytest.approx(t.breakdown["gemm"])
    assert parts["routed_experts"] > 0.6 * sum(parts.values())


@pytest.mark.parametrize("world", [1, 2, 8])
def test_the_optimizer_shard_is_never_finer_than_the_data_parallel_ranks(world: int) -> None:
    """The optimizer step is priced for one NVLink domain's shard (8 ways on an HGX node),
    but one GPU steps the whole model's states and two GPUs half of them."""
    arch = PRESETS["llama-3.1-8b"].arch
    c = count(arch)
    hw = hardware_from_spec(spec("hgx-h200"))
    t = predict(arch, c, 4096, "bf16", Setup(world=world, sharding="zero3"), hw)
    full = c.total * OPT_BYTES_PER_PARAM / (hw.hbm_tbps * 1e12)
    assert t.breakdown["optimizer"] == pytest.approx(full / world)


def test_expert_shards_are_gathered_over_one_nic_per_gpu_when_ep_fills_the_node() -> None:
    """EP 8 on 8-GPU nodes: the ranks holding the same experts are one GPU per node, so
    their FSDP gathers and reduce-scatters cross nodes on that GPU's own NIC (not on the
    node's eight NICs together, which serve eight such groups at once)."""
    arch = PRESETS["deepseek-v3"].arch
    c = count(arch)
    # compute so fast that (beyond the host launch floor) nothing hides the traffic
    hw = Hardware(1e9, 1e9, 1e9, 1e6, 1800, 800, 8)
    world = 8 * 9
    setup = Setup(world=world, ep=8, sharding="zero3", num_microbatches=1)
    t = predict(arch, c, 4096, "bf16", setup, hw)
    assert arch.moe is not None
    n_moe = arch.num_layers - arch.moe.dense_layers
    p_exp = c.moe_layer_experts * n_moe / 8
    n = world // 8
    one_nic = 800 / 8 * 1e9 * 0.80  # NIC_EFF
    floor = (n - 1) / n * p_exp * (2 * 2 + 2) / one_nic
    assert t.breakdown["data_parallel_exposed"] >= floor


@pytest.mark.parametrize("framework", ["fsdp2", "megatron"])
def test_zero3_gathers_the_parameters_again_for_every_micro_batch(framework: str) -> None:
    """FSDP / ZeRO-3 frees the gathered parameters after each micro-batch's forward and
    backward, so gradient accumulation gathers them again every micro-batch (torchtitan's
    train loop runs each micro-batch's forward and backward in turn): the data-parallel
    traffic of a step grows with its micro-batches. Under a pipeline schedule the stage
    keeps them gathered until the last micro-batch (torch.distributed.pipelining defers
    resharding and the gradient reduce-scatter), so there it does not."""
    arch = PRESETS["llama-3.1-70b"].arch
    c = count(arch)
    # compute so fast that (beyond the host launch floor) nothing hides the traffic
    hw = Hardware(1e9, 1e9, 1e9, 1e6, 1800, 400, 8)
    stack = profile(framework)

    def dp_time(pp: int, m: int) -> float:
        setup = Setup(world=64, pp=pp, sharding="zero3", num_microbatches=m)
        t = predict(arch, c, 4096, "bf16", setup, hw, profile=stack)
        return t.breakdown["data_parallel_exposed"]

    one, eight = dp_time(1, 1), dp_time(1, 8)
    # 8 micro-batches: 8x the gathers; the gradients 8x where the stack reduces them per
    # micro-batch (fsdp2) and once from its gradient buffer otherwise (megatron)
    gathers, grads = 2 * 2, 2
    want = (8 * gathers + (8 if stack.grads_every_microbatch else 1) * grads) / (gathers + grads)
    assert eight / one == pytest.approx(want, rel=0.02)  # less what the host floor hides
    assert dp_time(4, 8) <= dp_time(4, 1)  # the same traffic, more compute to hide it


@pytest.mark.parametrize(("tp", "cp", "ratio"), [(8, 1, 12 / 8), (1, 2, 4 / 3)])
def test_a_full_recompute_replays_the_forwards_tp_and_cp_collectives(
    tp: int, cp: int, ratio: float
) -> None:
    """Recomputing the forward replays its two all-gathers and two reduce-scatters per layer
    under sequence parallel (12 collectives instead of 8), and the CP ring's forward KV pass
    (4 passes instead of 3): arXiv 2205.05198, section 5."""
    arch = PRESETS["llama-3.1-70b"].arch
    c = count(arch)
    hw = hardware_from_spec(spec("hgx-h100"))
    comm = {
        rc: predict(
            arch,
            c,
            8192,
            "bf16",
            Setup(world=8, tp=tp, cp=cp, sharding="zero3", num_microbatches=1, recompute=rc),
            hw,
        ).breakdown["collectives_exposed"]
        for rc in ("selective", "full")
    }
    assert comm["selective"] > 0
    assert comm["full"] == pytest.approx(comm["selective"] * ratio, rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(jobs())
def test_weak_scaling_never_raises_throughput_per_gpu(job: tuple[object, ...]) -> None:
    """The same job spread over more nodes, same per-GPU batch: tokens/s per GPU ≤ before."""
    pid, sku, precision, setup, seq, factor = job
    assert isinstance(pid, str) and isinstance(setup, Setup) and isinstance(seq, int)
    assert isinstance(precision, str) and isinstance(factor, int)
    arch = PRESETS[pid].arch
    c = count(arch)
    hw = hardware_from_spec(sku)  # type: ignore[arg-type]
    small = predict(arch, c, seq, precision, setup, hw)
    big_setup = Setup(**{**setup.__dict__, "world": setup.world * factor})
    big = predict(arch, c, seq, precision, big_setup, hw)
    assert big.tokens_per_s_per_gpu <= small.tokens_per_s_per_gpu * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(jobs())
def test_weak_scaling_holds_with_a_fixed_global_batch_too(job: tuple[object, ...]) -> None:
    """With the default global batch (fewer micro-batches per GPU on more nodes) too."""
    pid, sku, precision, setup, seq, factor = job
    assert isinstance(pid, str) and isinstance(setup, Setup) and isinstance(seq, int)
    assert isinstance(precision, str) and isinstance(factor, int)
    arch = PRESETS[pid].arch
    c = count(arch)
    hw = hardware_from_spec(sku)  # type: ignore[arg-type]
    base = {**setup.__dict__, "num_microbatches": None}
    small = predict(arch, c, seq, precision, Setup(**base), hw)
    big = predict(arch, c, seq, precision, Setup(**{**base, "world": setup.world * factor}), hw)
    assert big.tokens_per_s_per_gpu <= small.tokens_per_s_per_gpu * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(jobs(), st.floats(0, 1e11), st.floats(0, 1e11))
def test_more_offloaded_activations_never_raise_throughput(
    job: tuple[object, ...], a: float, b: float
) -> None:
    """Activation offload moves bytes over the host link: more bytes never make a step
    faster, and offloading nothing costs nothing."""
    pid, sku, precision, setup, seq, _factor = job
    assert isinstance(pid, str) and isinstance(setup, Setup) and isinstance(seq, int)
    assert isinstance(precision, str)
    arch = PRESETS[pid].arch
    c = count(arch)
    hw = hardware_from_spec(sku)  # type: ignore[arg-type]
    lo, hi = sorted((a, b))
    none = predict(arch, c, seq, precision, setup, hw)
    few = predict(
        arch, c, seq, precision, Setup(**{**setup.__dict__, "activation_offload_bytes": lo}), hw
    )
    many = predict(
        arch, c, seq, precision, Setup(**{**setup.__dict__, "activation_offload_bytes": hi}), hw
    )
    assert many.tokens_per_s_per_gpu <= few.tokens_per_s_per_gpu * (1 + 1e-9)
    assert few.tokens_per_s_per_gpu <= none.tokens_per_s_per_gpu * (1 + 1e-9)


def test_requested_activation_offload_is_priced_on_the_host_link() -> None:
    """Offloading every saved activation of a no-recompute run cannot hide behind compute
    on PCIe: the answer is slower than without offload, not faster."""
    req = {**KIMI_FP4_B300, "nodes": 9, "recompute": "none", "offload_optimizer": False}
    o = size({**req, "activation_offload": True})["options"][0]
    assert o["fits"]
    plain_full = size({**req, "recompute": "full"})["options"][0]
    assert o["predicted_tokens_per_s_per_gpu"] < plain_full["predicted_tokens_per_s_per_gpu"]


REQ = {"model": {"preset": "llama-3.1-8b"}, "tokens": 1e11, "seq_len": 4096}


def test_fp4_runs_only_where_the_catalog_lists_an_fp4_peak() -> None:
    res = size({**REQ, "precision": "fp4"})
    by_sku = {o["sku"]: o for o in res["options"]}
    for s in all_specs():
        o = by_sku[s.id]
        if s.fp4_dense_tflops:
            assert o["training_days"] is not None
            assert o["peak_tflops_per_gpu"] == s.fp4_dense_tflops
        else:
            assert o["fits"] is False and o["training_days"] is None
            assert any("FP4" in n for n in o["notes"])
    assert res["recommendation"] is not None


@pytest.mark.parametrize("sku", [s.id for s in all_specs() if not s.fp4_dense_tflops])
def test_fp4_on_a_sku_without_fp4_is_a_clear_error(sku: str) -> None:
    with pytest.raises(SizingError) as e:
        size({**REQ, "precision": "fp4", "sku": sku})
    errs = e.value.as_dict()["errors"] if hasattr(e.value, "as_dict") else None
    text = str(errs if errs is not None else e.value)
    assert "precision" in text and "FP4" in text


def test_effective_mfu_is_the_models_prediction_and_a_request_mfu_overrides_it() -> None:
    req = {**REQ, "sku": "hgx-h100"}
    o = size(req)["options"][0]
    assert o["mfu_model"] == "throughput"
    assert 0.05 < o["effective_mfu"] < 0.75
    assert o["predicted_tokens_per_s_per_gpu"] > 0
    # hours follow from the prediction: 6·N_active·T / (GPUs · peak · MFU)
    flops = 6 * count(PRESETS["llama-3.1-8b"].arch).active * 1e11
    days = flops / (o["gpus"] * o["peak_tflops_per_gpu"] * 1e12 * o["effective_mfu"]) / 86400
    assert o["training_days"] == pytest.approx(days, rel=0.01)
    pinned = size({**req, "mfu": 0.4})["options"][0]
    assert pinned["mfu_model"] == "request" and pinned["mfu"] == 0.4
    assert pinned["effective_mfu"] == pytest.approx(0.4 * pinned["layout_efficiency"], abs=1e-4)


def test_moe_is_predicted_slower_per_active_flop_than_dense() -> None:
    """The MoE gap the flat MFU missed: small expert GEMMs, all-to-all, routing imbalance."""
    dense = size({**REQ, "sku": "hgx-h100"})["options"][0]["effective_mfu"]
    moe = size({**REQ, "model": {"preset": "deepseek-v3"}, "sku": "hgx-h100"})["options"][0]
    assert moe["effective_mfu"] < 0.75 * dense


def test_public_throughput_set_stays_calibrated() -> None:
    """docs/sizing-accuracy.md reports the figures; the bounds leave slack for small changes."""
    res = evaluate()
    assert res["n_scored"] >= 200
    assert res["pooled_median_abs_error_pct"] <= 15.0
    assert abs(res["deepseek_v3_error_pct"]) <= 25.0
    for fw in ("megatron", "fsdp2"):
        assert res["per_framework"][fw]["median_abs_error_pct"] <= 15.0, fw
        assert res["per_framework"][fw]["inside_pct"] >= 80.0, fw
    for group, v in res["per_group"].items():
        if v["n"] < 3 or group in KNOWN_MISSES:
            continue  # one or two runs are reported, not held to a median
        assert v["median_abs_error_pct"] <= 25.0, group
    for group in KNOWN_MISSES:  # a known miss that got well is taken off the list
        assert res["per_group"][group]["median_abs_error_pct"] > 25.0, group
    groups = set(res["per_group"])
    assert {"moe_megatron_h100", "moe_blackwell_fp8", "moe_model_reports"} <= groups
    assert {"mlperf_v50_llama31_405b", "mlperf_v51_llama31_8b"} <= groups


# Source groups the model misses by more than 25 % (median), said in
# docs/sizing-accuracy-time.md. Empty since the fsdp2 profile prices eager DTensor code
# (profiles.py eager_parallel_eff, from four torchtitan threads): torchtitan's group was
# 54 % off on its eager TP rows before it.
KNOWN_MISSES: set[str] = set()


KIMI_FP4_B300 = {
    "model": {"preset": "kimi-k2"},
    "tokens": 1e12,
    "precision": "fp4",
    "sku": "hgx-b300",
    "framework": "megatron",  # a tuned MoE stack, as Kimi K2's own
}


@pytest.mark.xfail(
    strict=True,
    reason="8.9 % since the MoE dispatch's host sync is priced (MOE_SYNC_HOST_S, fitted on the "
    "public Megatron-Core MoE rows, which it brings from 12-23 % to 4-17 % median error): "
    "about 60 MoE layers x 1.75 ms per micro-batch cost Kimi K2 in FP4 1.5 points; a strict "
    "xfail, so an answer back inside the band takes it off",
)
def test_kimi_k2_fp4_on_b300_effective_mfu_is_within_the_issues_band() -> None:
    """Issue 16's band for a 1T MoE in NVFP4 on B300 (the answer's terms are decomposed in
    docs/sizing-accuracy-time.md, 'Kimi K2 in FP4'), at the run's compute-optimal batch."""
    o = size(KIMI_FP4_B300)["options"][0]
    assert 0.10 <= o["effective_mfu"] <= 0.30


def test_kimi_k2_fp4_on_b300_stays_a_plausible_moe_answer() -> None:
    """Outside issue 16's band by the dispatch sync alone: not less than 8 % nor more than
    30 % of the FP4 peak on active parameters."""
    o = size(KIMI_FP4_B300)["options"][0]
    assert 0.08 <= o["effective_mfu"] <= 0.30


def test_default_batch_follows_deepseek_llms_batch_law() -> None:
    """B_opt = 0.292 * C^0.3271 tokens (arXiv 2401.02954), rounded to a power of two: the
    law's own 7B (2T tokens, published batch 9.4 M) and 67B (18.9 M) runs land on the
    nearest powers of two, and a bigger run never gets a smaller batch."""
    assert default_batch_tokens(6 * 6.9e9 * 2e12) == 2**23  # law 9.2 M
    assert default_batch_tokens(6 * 67e9 * 2e12) == 2**24  # law 19.3 M
    flops = [10.0**e for e in range(15, 27)]
    got = [default_batch_tokens(f) for f in flops]
    assert got == sorted(got)
    assert all(b & (b - 1) == 0 and b >= 4096 for b in got)
    assert default_batch_tokens(float("inf")) == DEFAULT_GLOBAL_BATCH_TOKENS


def test_a_stated_batch_replaces_the_default_one() -> None:
    """The request's own batch sets the micro-batch count; the default only fills a gap,
    and the answer says which batch it assumed."""
    stated = parse({**REQ, "global_batch_size": 64})
    assert stated.job.batch_tokens == 0
    unstated = parse(REQ)
    assert unstated.job.batch_tokens == default_batch_tokens(6 * unstated.job.counts.active * 1e11)
    codes = [a["code"] for a in size(REQ)["assumption_codes"]]
    assert "assumption.batch" in codes
    assert "assumption.batch" not in [
        a["code"] for a in size({**REQ, "global_batch_size": 64})["assumption_codes"]
    ]


def test_kimi_k2_fp4_on_b300_without_offload_is_a_plausible_moe_answer() -> None:
    """Without optimizer offload: a sure fit with expert parallel, MFU well under dense."""
    o = size({**KIMI_FP4_B300, "offload_optimizer": False})["options"][0]
    assert o["fits"] and not o["layout"]["offload_optimizer"]
    assert o["layout"]["ep"] > 1  # the model prefers expert parallel for 384 experts
    assert 0.05 <= o["effective_mfu"] <= 0.30


@pytest.mark.parametrize("pid", sorted(p for p in PRESETS if PRESETS[p].arch.moe is not None))
@pytest.mark.parametrize("offload", [False, True])
def test_no_step_term_of_a_moe_is_negative(pid: str, offload: bool) -> None:
    """Llama 4 Maverick interleaves MoE with dense layers (every second block): the model
    had counted all 48 blocks as MoE, so the routed experts outweighed the whole model and
    the dense share of the states went negative, a negative optimizer step included (70 %
    MFU on a 400B MoE). Every term of every MoE preset is a time, never a credit."""
    arch = PRESETS[pid].arch
    c = count(arch)
    hw = hardware_from_spec(spec("hgx-b200"))
    for pp, sharding in ((1, "zero3"), (4, "zero1")):
        setup = Setup(
            world=32,
            pp=pp,
            ep=8,
            sharding=sharding,
            shard_group=32 // pp,
            offload_optimizer=offload,
        )
        t = predict(arch, c, 4096, "bf16", setup, hw)
        assert all(v >= 0 for v in t.breakdown.values()), (pid, pp, t.breakdown)
        assert t.step_seconds > 0


def test_maverick_prices_its_24_moe_blocks_not_48() -> None:
    """Only Maverick's MoE blocks carry routed-expert GEMMs: spreading the same routed
    parameters over twice the blocks would double their FLOPs, and Maverick's effective MFU
    stays below what its dense sibling runs at on the same node."""
    arch = PRESETS["llama-4-maverick"].arch
    assert arch.moe is not None and arch.moe.moe_layers_in(0, arch.num_layers) == 24
    hw = hardware_from_spec(spec("hgx-b200"))
    g = gemm_split(arch, count(arch), 4096, "bf16", Setup(world=8, ep=8), hw)
    every = replace(arch, moe=replace(arch.moe, moe_every=1))  # all 48 blocks MoE
    g48 = gemm_split(every, count(every), 4096, "bf16", Setup(world=8, ep=8), hw)
    assert g48["routed_experts"] == pytest.approx(2 * g["routed_experts"])
    o = size({"model": {"preset": "llama-4-maverick"}, "tokens": 1e12, "sku": "hgx-b200"})
    dense = size({"model": {"preset": "llama-3.1-70b"}, "tokens": 1e12, "sku": "hgx-b200"})
    assert o["options"][0]["effective_mfu"] < dense["options"][0]["effective_mfu"]


def test_a_stated_batch_smaller_than_the_ranks_is_said_to_round_up() -> None:
    """A global batch of 1 on a data-parallel layout cannot be split; the answer says the
    batch it was given and that a layout runs at least one micro-batch per rank (it priced
    the 16-rank step silently)."""
    got = [a for a in size({**REQ, "global_batch_size": 1})["assumption_codes"]]
    stated = [a for a in got if a["code"] == "assumption.global_batch"]
    assert stated and stated[0]["params"] == {"gbs": 1}
    assert "assumption.global_batch" not in [a["code"] for a in size(REQ)["assumption_codes"]]


def test_sliding_window_layers_cost_only_their_window_of_attention() -> None:
    """gpt-oss attends to 128 keys on every other layer: at 32k tokens its attention term is
    about half that of the same shapes with full attention everywhere, and at a sequence no
    longer than the window nothing changes."""
    arch = PRESETS["gpt-oss-120b"].arch
    full = replace(arch, sliding_window=0, local_layer_fraction=0.0)
    hw = hardware_from_spec(spec("hgx-h100"))
    setup = Setup(world=8, ep=8, micro_batch_size=1, num_microbatches=8)

    def attention(a: object, seq: int) -> float:
        return predict(a, count(a), seq, "bf16", setup, hw).breakdown["attention"]  # type: ignore[arg-type]

    long_local, long_full = attention(arch, 32768), attention(full, 32768)
    assert 0.45 < long_local / long_full < 0.55
    assert attention(arch, 128) == pytest.approx(attention(full, 128))
    assert (
        predict(arch, count(arch), 32768, "bf16", setup, hw).tokens_per_s_per_gpu
        > predict(full, count(full), 32768, "bf16", setup, hw).tokens_per_s_per_gpu
    )


@pytest.mark.parametrize(("tp", "cp", "ep"), [(2, 1, 1), (1, 2, 1), (1, 1, 8)])
def test_eager_dtensor_code_is_priced_only_where_the_stack_runs_it(
    tp: int, cp: int, ep: int
) -> None:
    """torchtitan's eager runs with TP, CP or EP (DTensor modules without torch.compile)
    sustain about 0.75 of the modelled rate (four threads, profiles.py); compiled, with no
    parallel dimension, or on a stack whose parallel code is not DTensor, nothing changes."""
    arch = PRESETS["qwen3-30b-a3b"].arch
    c = count(arch)
    hw = hardware_from_spec(spec("hgx-h100"))
    setup = Setup(world=8, tp=tp, cp=cp, ep=ep, sharding="zero3", num_microbatches=1)

    def run(framework: str, compiled: bool, s: Setup = setup) -> float:
        t = predict(arch, c, 8192, "bf16", s, hw, profile=profile(framework), compiled=compiled)
        assert sum(t.breakdown.values()) == pytest.approx(t.step_seconds, rel=1e-9)
        return t.breakdown["eager_parallel_code"]

    eager = predict(arch, c, 8192, "bf16", setup, hw, profile=profile("fsdp2"))
    extra = run("fsdp2", compiled=False)
    assert extra > 0
    computed = sum(eager.breakdown[k] for k in ("gemm", "attention", "memory_bound"))
    assert extra == pytest.approx(computed * (1 / profile("fsdp2").eager_parallel_eff - 1))
    assert run("fsdp2", compiled=True) == 0.0
    assert run("megatron", compiled=False) == 0.0
    assert run("deepspeed", compiled=False) == 0.0
    assert run("fsdp2", compiled=False, s=replace(setup, tp=1, cp=1, ep=1)) == 0.0


def test_op_level_sac_replays_the_grouped_experts_and_not_attention() -> None:
    """torchtitan's op-level SAC saves attention and every other aten.mm output; the routed
    experts' grouped GEMM is not on its list, so their forward runs again in the backward.
    Megatron's selective recompute replays the core attention instead."""
    hw = hardware_from_spec(spec("hgx-h100"))
    setup = Setup(world=8, sharding="zero3", num_microbatches=1, recompute="selective")

    def parts(pid: str, op_sac: bool) -> dict[str, float]:
        arch = PRESETS[pid].arch
        t = predict(arch, count(arch), 8192, "bf16", setup, hw, op_sac=op_sac)
        return t.breakdown

    for pid in ("qwen3-30b-a3b", "llama-3.1-8b"):
        op, attn = parts(pid, True), parts(pid, False)
        assert op["gemm"] > attn["gemm"]  # the other matmuls' forward again
        assert op["attention"] < attn["attention"]  # attention's output is kept
    moe_op, moe_attn = parts("qwen3-30b-a3b", True), parts("qwen3-30b-a3b", False)
    dense_op, dense_attn = parts("llama-3.1-8b", True), parts("llama-3.1-8b", False)
    # every routed expert replays: a larger share of the GEMMs than a dense block's half
    assert moe_op["gemm"] / moe_attn["gemm"] > dense_op["gemm"] / dense_attn["gemm"]
