"""Training throughput per GPU from the hardware's facts and the layout (closed form).

The model prices one optimizer step on the busiest GPU of a (TP × CP × PP × DP, EP) layout:

* **GEMMs** at a fraction of the dense peak of the training precision that grows with the
  smallest GEMM dimension (``E_GEMM · d / (d + GEMM_HALF_DIM)``): hidden/TP for the attention
  projections, the FFN width/TP for dense MLPs, and for routed experts the smaller of the
  expert width and the tokens each expert receives per micro-batch (small expert GEMMs);
  routed-expert work is stretched by the routing imbalance of the busiest rank.
* **Attention** (flash kernels, causal) at ``E_ATTN`` of the BF16 peak — attention stays in
  BF16 under FP8/FP4 recipes — so long contexts cost what they cost.
* **Memory-bound work** (norms, activations, residuals, rotary, router/permute, casts for
  FP8/FP4) as bytes per token over the HBM bandwidth.
* **Host launch floor**: a micro-batch cannot finish faster than the CPU can launch its
  kernels (fine-grained MoE layers launch several times more kernels); each dropless MoE
  layer's dispatch also syncs the host, which then enqueues the rest of the layer while the
  GPU waits (``MOE_SYNC_HOST_S``).
* **Communication** over NVLink inside the node and the per-GPU NIC between nodes: TP/SP
  all-gathers and reduce-scatters, CP ring exchanges and EP all-to-all (each partly hidden
  behind compute), FSDP/ZeRO gathers and gradient reduce-scatters (hidden behind the step's
  compute up to ``DP_OVERLAP``), and the PP bubble from the schedule and micro-batch count.

Every constant is global (no constant per case) and has a physical meaning stated beside it;
``bench/throughput_accuracy.py`` reports the error on the public throughput set per source
group (docs/sizing-accuracy.md). Pure: standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.sizing.gpus import Hardware
from app.sizing.params import Architecture, ParamCounts, attention_params
from app.sizing.profiles import (
    LAUNCHES_PER_EXPERT,
    REF_A2A_EXPOSED,
    REF_DP_OVERLAP,
    REF_TP_EXPOSED,
    REFERENCE,
    StackProfile,
)

# --- global constants (documented in docs/sizing-accuracy.md) -------------------------------
# Sustained fraction of the dense tensor-core peak a large, well-shaped GEMM reaches (cuBLAS /
# CUTLASS at 8k-16k shapes: ~75-80 % BF16, ~70 % FP8 on Hopper; block-scaled FP4 lower).
# BF16 and FP8 are fitted on the public throughput set (docs/sizing-accuracy.md) and land
# below the GEMM-benchmark figures because they also absorb power-capped clocks and the
# kernels the model does not list; FP4 is a judgment (no public measured FP4 training row):
# FP8's share less ~15 % for the 16-element block scaling, checked (not fitted) against
# NVIDIA's NVFP4 training announcement (bench/throughput_accuracy.py FP4_CHECKS).
E_GEMM = {"bf16": 0.636, "fp8": 0.35, "fp4": 0.30}
# GEMM dimension at which efficiency is half its asymptote (tile and wave quantisation).
GEMM_HALF_DIM = 376.0
# Fraction of the BF16 dense peak causal flash attention (fwd + bwd) sustains.
E_ATTN = 0.309
# Memory-bound bytes per token per layer, as multiples of the hidden (and FFN) width in
# BF16: norms, residual adds, rotary, activation functions, dropout-free elementwise work.
ELEM_HIDDEN = 7.15
ELEM_FFN = 3.78
# Extra read/write passes to quantise activations and weights (per byte of BF16 traffic).
QUANT_EXTRA = {"bf16": 0.0, "fp8": 0.2, "fp4": 0.35}
# MoE token permute/unpermute copies (bytes per routed copy of a token, as hidden widths).
PERMUTE_HIDDEN = 9.2
# Kernel launches per layer per micro-batch (fwd + bwd) and the host cost of one launch.
KERNELS_DENSE_LAYER = 60
KERNELS_MOE_LAYER = 220
LAUNCH_S = 4.5e-6
# A dropless MoE layer's token dispatch reads how many tokens go to each expert on the host
# (the all-to-all's split sizes: NCCL all-to-all and DeepEP alike; torchtitan's too), so the
# host cannot run ahead of the GPU past it: after each dispatch the GPU waits while Python
# enqueues the rest of the layer (~100 eager ops at ~15-20 µs each). Host seconds exposed per
# MoE layer per micro-batch forward (a full recompute replays the forward and its sync).
# Fitted once on the public Megatron-Core MoE rows (Megatron-MoE-ModelZoo H100 and Blackwell,
# Pai-Megatron-Patch issues and xtuner's benchmark page on H800: 1.5-3 ms all cut every MoE
# group's median error; 1.75 ms minimises the worst group's), checked on DeepSeek-V2/V3's
# GPU-hours and DeepSeek-V3 MXFP8 on GB200 (docs/sizing-accuracy-time.md).
MOE_SYNC_HOST_S = 1.75e-3
# Achievable fraction of link bandwidth for collectives (NCCL bus bandwidth / wire rate).
NVLINK_EFF = 0.75
NIC_EFF = 0.80
# Share of TP/SP and CP collective time not hidden behind compute (Megatron-style overlap).
TP_EXPOSED = REF_TP_EXPOSED  # 0.647 (the megatron profile's)
# Share of EP all-to-all time not hidden (dispatch/combine are on the critical path unless a
# schedule overlaps them with another micro-batch's compute).
A2A_EXPOSED = REF_A2A_EXPOSED  # 0.884
# DualPipe (DeepSeek-V3): forward and backward chunks of two micro-batches overlap, so the
# all-to-all is hidden except this share, and the bubble is that of pp/2 stages.
DUALPIPE_A2A_EXPOSED = 0.1
# Share of the step's compute behind which bucketed DP/FSDP collectives can run.
DP_OVERLAP = REF_DP_OVERLAP  # 0.8
# Busiest expert rank's extra work over the mean with auxiliary-loss balancing (dropless).
ROUTING_IMBALANCE = 0.1455
# Recompute: full recomputes the forward (GEMMs + attention); selective the attention core.
# Optimizer step: bytes touched per local parameter (fp32 master, two moments, grads, bf16).
OPT_BYTES_PER_PARAM = 18.0
# Host-side optimizer with offload: bytes/s of host memory per GPU, PCIe bytes/s per GPU
# (one direction; also what activation offload gets: its device-to-host copies run beside
# the forward, the host-to-device copies beside the backward, and what they cannot hide
# stalls the step).
HOST_OPT_BPS = 20e9
PCIE_BPS = 25e9
# Global batch (tokens per optimizer step) when neither the request nor the caller gives one.
DEFAULT_GLOBAL_BATCH_TOKENS = 4 * 1024 * 1024
# A job's default batch: the compute-optimal batch of DeepSeek LLM's scaling law (arXiv
# 2401.02954 §3.1, fitted on their own runs from 1e17 to 3e20 FLOPs and used for their 7B
# and 67B models): B_opt = 0.2920 · C^0.3271 tokens for a run of C training FLOPs. Batches
# grow with the run: 8B on 1e10 tokens ≈ 2 M tokens, 70B on 15e12 ≈ 34 M (Llama 3 405B
# used 16 M, DeepSeek-V3 63 M, Kimi K2 67 M).
BATCH_LAW_COEF = 0.2920
BATCH_LAW_EXP = 0.3271


def default_batch_tokens(training_flops: float) -> int:
    """Tokens per optimizer step for a run of ``training_flops`` whose request states no
    batch: DeepSeek LLM's compute-optimal batch, rounded to a power of two as batches are
    chosen in practice (so requests a few percent apart in tokens share one batch, and the
    search's memo). At least one 4k sequence."""
    if training_flops <= 0 or not math.isfinite(training_flops):
        return DEFAULT_GLOBAL_BATCH_TOKENS
    b = BATCH_LAW_COEF * training_flops**BATCH_LAW_EXP
    return int(2 ** max(12, round(math.log2(b))))


@dataclass(frozen=True)
class Setup:
    """The layout and batch of one run."""

    world: int
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    sharding: str = "zero3"  # ddp | zero1 | zero2 | zero3
    shard_group: int | None = None  # None: the whole data-parallel group
    micro_batch_size: int = 1
    recompute: str = "none"  # none | selective | full
    offload_optimizer: bool = False
    offload_params: bool = False
    num_microbatches: int | None = None  # per optimizer step per pipeline (grad accumulation)
    pp_schedule: str = "1f1b"  # 1f1b | interleaved | gpipe | dualpipe
    virtual_stages: int = 1
    # activation offload: bytes of one micro-batch's saved activations sent to host memory
    # and brought back (each way) on the busiest GPU; 0 = no offload
    activation_offload_bytes: float = 0.0
    # LoRA / QLoRA: the base weights are frozen, only small adapters train (no weight-gradient
    # GEMMs, gradient reduction or optimizer step for the base; adapters are under 1 % of it)
    frozen_base: bool = False

    @property
    def dp(self) -> int:
        return max(1, self.world // (self.tp * self.pp * self.cp))


@dataclass(frozen=True)
class Throughput:
    tokens_per_s_per_gpu: float
    step_seconds: float
    tokens_per_step_per_gpu: float
    microbatches: int
    bubble: float
    breakdown: dict[str, float]  # seconds per step on the busiest GPU, by cause

    def mfu(self, flops_per_token: float, peak_tflops: float) -> float:
        return self.tokens_per_s_per_gpu * flops_per_token / (peak_tflops * 1e12)


def gemm_asymptote(precision: str, profile: StackProfile = REFERENCE) -> float:
    """Sustained share of the precision's dense peak in large GEMMs on ``profile``'s stack:
    the stack's own FP8/FP4 figure where its profile states one, else ``E_GEMM``."""
    own = {"fp8": profile.fp8_gemm, "fp4": profile.fp4_gemm}.get(precision)
    return E_GEMM[precision] if own is None else own


def _eff(asymptote: float, dim: float) -> float:
    d = max(1.0, dim)
    return asymptote * d / (d + GEMM_HALF_DIM)


def _bw(group_span: int, hw: Hardware, stride: int = 1) -> float:
    """Bytes/s per GPU for a ring/tree collective over ranks ``stride`` apart spanning
    ``group_span`` consecutive GPUs. Inside the NVLink domain: NVLink (one direction). Across
    domains the ring's network hops are shared by the group's members in each domain, each
    with its own NIC, so the bus bandwidth is the NIC rate times the members per domain
    (capped by NVLink): nccl-tests busbw across nodes ≈ the node's aggregate NIC rate."""
    nvl = hw.nvlink_gbps / 2 * 1e9 * NVLINK_EFF
    if group_span <= hw.nvlink_domain:
        return nvl
    members = max(1, hw.nvlink_domain // max(1, stride))
    return min(nvl, members * hw.nic_gbps / 8 * 1e9 * NIC_EFF)


def _nic(hw: Hardware) -> float:
    """One GPU's own network bandwidth (all-to-all: every GPU sends at once)."""
    return hw.nic_gbps / 8 * 1e9 * NIC_EFF


def attention_width(arch: Architecture) -> float:
    """Width of the score/value matmuls (heads × head dim; MLA: mean of qk and v dims)."""
    if arch.mla is not None:
        m = arch.mla
        return (
            arch.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) / 2
        )
    return float(arch.num_attention_heads * arch.head_dim)


def _gemm_flops(
    arch: Architecture,
    counts: ParamCounts,
    precision: str,
    tp: int,
    cp: int,
    ep: int,
    tok_mb: int,
    profile: StackProfile = REFERENCE,
) -> dict[str, float]:
    """The GEMM term of :func:`predict` by kind of GEMM: FLOPs per token divided by the
    efficiency each GEMM's smallest dimension reaches (one formula, read by both
    :func:`gemm_split` and :func:`_per_token`)."""
    h = arch.hidden_size
    L = arch.num_layers
    moe = arch.moe
    attn_p = attention_params(arch)
    e = gemm_asymptote(precision, profile)
    n_moe = moe.moe_layers_in(0, L) if moe else 0  # Llama 4: every moe_every-th layer
    n_dense = L - n_moe
    dense_mlp = max(0, counts.dense_layer - attn_p - arch.norms_per_layer * h)
    head = counts.head if counts.head else counts.embedding
    out = {
        "attention_projections": 6.0 * L * attn_p / _eff(e, h / tp),
        "output_head": 6.0 * head / _eff(e, h),
        "dense_mlp": 6.0 * n_dense * dense_mlp / _eff(e, arch.intermediate_size / tp),
        "routed_experts": 0.0,
        "shared_experts_and_router": 0.0,
    }
    if moe is not None and n_moe:
        expert = counts.moe_layer_experts / moe.num_experts
        other = counts.moe_layer - counts.moe_layer_experts - attn_p - arch.norms_per_layer * h
        per_expert_tokens = tok_mb / cp * moe.experts_per_token * ep / moe.num_experts
        d_exp = min(moe.expert_intermediate_size, per_expert_tokens)
        out["routed_experts"] = (
            6.0 * n_moe * moe.experts_per_token * expert / _eff(e, d_exp) * (1 + ROUTING_IMBALANCE)
        )
        out["shared_experts_and_router"] = (
            6.0 * n_moe * max(0, other) / _eff(e, moe.expert_intermediate_size)
        )
    return out


def gemm_split(
    arch: Architecture,
    counts: ParamCounts,
    seq_len: int,
    precision: str,
    setup: Setup,
    hw: Hardware,
    profile: StackProfile = REFERENCE,
) -> dict[str, float]:
    """GPU-seconds per token of the GEMM term of :func:`predict`, by kind of GEMM (the same
    formula, kept apart for the step-time decomposition in docs/sizing-accuracy-time.md;
    tests/sizing/test_throughput.py checks that the parts add up to ``predict``'s term)."""
    s = setup
    tok_mb = max(1, s.micro_batch_size) * seq_len
    out = _gemm_flops(
        arch, counts, precision, max(1, s.tp), max(1, s.cp), max(1, s.ep), tok_mb, profile
    )
    passes = 4.0 if s.frozen_base else 6.0  # of 6 FLOPs per weight per token (see _per_token)
    if s.recompute == "full":
        passes += 2.0
    scale = passes / 6.0 / (hw.sustained(precision) * 1e12)
    return {k: v * scale for k, v in out.items()}


def _per_token(
    arch: Architecture,
    counts: ParamCounts,
    seq_len: int,
    precision: str,
    hw: Hardware,
    tp: int,
    cp: int,
    ep: int,
    tok_mb: int,
    recompute: str,
    elem_scale: float = 1.0,
    frozen_base: bool = False,
    profile: StackProfile = REFERENCE,
    op_sac: bool = False,
) -> tuple[float, float, float]:
    """(GEMM, attention, memory-bound) GPU-seconds of compute per token (whole model, as if
    on one GPU) for :func:`predict`: what it depends on of the layout is the TP, CP and EP
    degrees, the micro-batch's tokens and the recompute mode; of the stack, how many
    memory-bound passes its kernels make (``elem_scale``, 1 for fused kernels); of the
    method, whether the base weights are frozen (``frozen_base``: the backward computes the
    activations' gradients, 2 of the 6 FLOPs per weight per token, not the weights').

    ``op_sac``: what ``recompute="selective"`` replays is op-level selective checkpointing
    (torchtitan's policy, app.sizing.jobs.Framework.selective): attention and every other
    ``aten.mm`` output are saved, so the backward replays the forward of the other matmuls
    (wk and wo of the projections, w3 of a gated MLP), of every routed expert when they run
    as one grouped GEMM (not on the save list) and of the pointwise ops, not attention.
    Otherwise selective recompute is Megatron's: the core attention's forward again."""
    h = arch.hidden_size
    L = arch.num_layers
    peak_p = hw.sustained(precision) * 1e12
    peak_bf = hw.sustained("bf16") * 1e12
    moe = arch.moe
    n_moe = moe.moe_layers_in(0, L) if moe else 0
    split = _gemm_flops(arch, counts, precision, tp, cp, ep, tok_mb, profile)
    gemm = sum(split.values())
    # the forward is 2 of a GEMM's 6 FLOPs per weight per token
    replayed = 0.0
    if recompute == "selective" and op_sac:
        mlp_share = 1.0 / 3.0 if arch.gated_mlp else 0.5  # w3 of (w1, w3, w2); w2 of (w1, w2)
        experts_share = 1.0 if profile.grouped_gemm else 0.5  # per-expert linears are mm
        replayed = (
            0.5 * split["attention_projections"]
            + mlp_share * split["dense_mlp"]
            + experts_share * split["routed_experts"]
            + 0.5 * split["shared_experts_and_router"]
        ) / 3.0
    if frozen_base:
        gemm *= 4.0 / 6.0
    ffn_active = float(arch.intermediate_size)
    moe_extra = 0.0
    if moe is not None and n_moe:
        ffn_active = moe.expert_intermediate_size * (moe.experts_per_token + moe.shared_experts)
        moe_extra = PERMUTE_HIDDEN * h * moe.experts_per_token * 2.0
    # causal score + value, forward: each query attends to ``mean_kv_len`` keys on average
    # (seq/2 for full causal attention; local layers of sliding-window or chunked models
    # such as gpt-oss and Llama 4 attend to at most their window)
    attn_fwd = 4.0 * L * attention_width(arch) * arch.mean_kv_len(seq_len)
    attn = 3.5 * attn_fwd  # fwd + bwd (bwd ≈ 2.5 × fwd with the score recompute)
    if recompute == "full":
        gemm *= (8.0 if not frozen_base else 6.0) / (6.0 if not frozen_base else 4.0)
        attn += attn_fwd
    elif recompute == "selective" and not op_sac:
        attn += attn_fwd
    gemm += replayed  # a frozen base still runs its whole forward again
    t_gemm = gemm / peak_p
    t_attn = attn / (peak_bf * E_ATTN)
    layer_bytes = (ELEM_HIDDEN * h + ELEM_FFN * ffn_active) * 2.0 * (1 + QUANT_EXTRA[precision])
    mem_bytes = L * layer_bytes * elem_scale + n_moe * moe_extra
    if recompute == "full" or (recompute == "selective" and op_sac):
        mem_bytes *= 1.33
    t_mem = mem_bytes / (hw.hbm_tbps * 1e12)
    return t_gemm, t_attn, t_mem


def predict(
    arch: Architecture,
    counts: ParamCounts,
    seq_len: int,
    precision: str,
    setup: Setup,
    hw: Hardware,
    *,
    global_batch_tokens: float | None = None,
    per_token_memo: dict[tuple[int, int, int, int, str], tuple[float, float, float]] | None = None,
    profile: StackProfile = REFERENCE,
    compiled: bool = False,
    op_sac: bool = False,
) -> Throughput:
    """Tokens per second per GPU for a full-training run (closed form, no loops).

    ``per_token_memo``: a dict the caller keeps for one (architecture, counts, sequence
    length, precision, hardware), in which the per-token compute terms are kept by the few
    layout fields they read (the search predicts hundreds of layouts of one job).

    ``profile``: the training stack (app/sizing/profiles.py: its memory-bound passes, the
    collectives it overlaps, grouped expert GEMMs); ``compiled``: run under torch.compile;
    ``op_sac``: selective recompute is op-level SAC (see :func:`_per_token`).
    The memo must be one per (job, SKU), the job fixing the stack."""
    s = setup
    tp, pp, cp, ep = max(1, s.tp), max(1, s.pp), max(1, s.cp), max(1, s.ep)
    dp = s.dp
    h = arch.hidden_size
    L = arch.num_layers
    mbs = max(1, s.micro_batch_size)
    tok_mb = mbs * seq_len  # tokens of one micro-batch of one replica
    if s.num_microbatches:
        m = max(1, int(s.num_microbatches))
    else:
        gbt = global_batch_tokens or DEFAULT_GLOBAL_BATCH_TOKENS
        m = max(1, math.ceil(gbt / (dp * tok_mb)))
    v = max(1, s.virtual_stages) if s.pp_schedule == "interleaved" else 1
    bubble = (pp - 1) / (m * v) if pp > 1 else 0.0
    dualpipe = s.pp_schedule == "dualpipe" and profile.dualpipe
    if dualpipe:
        bubble = max(0.0, pp / 2 - 1) / m

    # --- GPU-seconds of compute per token (whole model, as if on one GPU) --------------------
    moe = arch.moe
    n_moe = moe.moe_layers_in(0, L) if moe else 0  # Llama 4: every moe_every-th layer
    n_dense = L - n_moe
    key = (tp, cp, ep, tok_mb, s.recompute)
    per_token = None if per_token_memo is None else per_token_memo.get(key)
    if per_token is None:
        per_token = _per_token(
            arch,
            counts,
            seq_len,
            precision,
            hw,
            tp,
            cp,
            ep,
            tok_mb,
            s.recompute,
            profile.elem(compiled),
            s.frozen_base,
            profile,
            op_sac,
        )
        if per_token_memo is not None:
            per_token_memo[key] = per_token
    t_gemm, t_attn, t_mem = per_token
    t_token = t_gemm + t_attn + t_mem  # GPU-seconds per token

    # --- one optimizer step on the busiest GPU ------------------------------------------------
    tok_gpu_mb = tok_mb / (tp * cp * pp)  # this GPU's share of a micro-batch's work
    compute_mb = t_token * tok_gpu_mb
    # eager DTensor code around TP, CP or EP (profiles.py eager_parallel_eff)
    eager_mb = compute_mb * (1.0 / profile.eager_parallel_rate(compiled, tp, cp, ep) - 1.0)
    compute_mb += eager_mb
    moe_kernels = float(KERNELS_MOE_LAYER)
    if moe is not None and not profile.grouped_gemm:  # one GEMM launch per local expert
        moe_kernels += LAUNCHES_PER_EXPERT * moe.num_experts / ep
    kernels = (n_dense * KERNELS_DENSE_LAYER + n_moe * moe_kernels) / pp
    host_mb = kernels * LAUNCH_S
    sync_mb = 0.0
    if n_moe:  # the dispatch syncs the host each forward (a full recompute replays it)
        sync_mb = n_moe / pp * MOE_SYNC_HOST_S * (2.0 if s.recompute == "full" else 1.0)
    compute_mb = max(compute_mb, host_mb) + sync_mb

    act_bytes = 2.0  # BF16 activations on the wire
    tp_exposed = profile.tp_exp(compiled)
    comm_mb = 0.0
    tokens_local = tok_mb / cp  # tokens this TP group holds per micro-batch
    layers_here = L / pp
    if tp > 1:
        # 4 AG + 4 RS per layer (forward 2 + 2, backward 2 + 2); a full recompute replays
        # the forward's 2 + 2 (Korthikanti et al. 2022, arXiv 2205.05198, section 5)
        n_coll = 12.0 if s.recompute == "full" else 8.0
        vol = n_coll * tokens_local * h * act_bytes * (tp - 1) / tp
        comm_mb += tp_exposed * layers_here * vol / _bw(tp, hw)
    if cp > 1:
        kv = 2.0 * arch.num_kv_heads * arch.head_dim
        # ring: forward KV, backward KV and dKV; a full recompute passes the KV once more
        n_pass = 4.0 if s.recompute == "full" else 3.0
        vol = n_pass * tokens_local / tp * kv * act_bytes * (cp - 1)
        comm_mb += tp_exposed * layers_here * vol / _bw(tp * cp, hw)
    if moe is not None and n_moe and ep > 1:
        a2a_bytes = 1.5 if precision in ("fp8", "fp4") else act_bytes  # FP8 dispatch
        vol = 4.0 * tokens_local / tp * moe.experts_per_token * h * a2a_bytes * (ep - 1) / ep
        span = ep * tp * cp
        if span <= hw.nvlink_domain:
            t = vol / _bw(span, hw)
        else:
            off = 1.0 - hw.nvlink_domain / span
            t = vol * (off / _nic(hw) + (1 - off) / _bw(1, hw))
        exposed = DUALPIPE_A2A_EXPOSED if dualpipe else profile.a2a_exposed
        comm_mb += exposed * (n_moe / pp) * t
    if pp > 1:
        p2p = 2.0 * tokens_local / tp * h * act_bytes
        comm_mb += p2p / _nic(hw) * 0.5
    offload_mb = 0.0
    if s.activation_offload_bytes > 0:
        # copies out beside the forward (~1/3 of the compute), back beside the backward
        xfer = s.activation_offload_bytes / PCIE_BPS
        offload_mb = max(0.0, xfer - compute_mb / 3.0) + max(0.0, xfer - 2.0 * compute_mb / 3.0)
        comm_mb += offload_mb
    pipe = m * (compute_mb + comm_mb) * (1.0 + bubble)
    if s.pp_schedule == "gpipe":
        pipe = m * (compute_mb + comm_mb) + (pp - 1) * (compute_mb + comm_mb)

    # data-parallel / sharded-state traffic per step
    routed_total = counts.moe_layer_experts * n_moe if moe else 0
    p_dense = (counts.total - routed_total) / (tp * pp)
    p_exp = routed_total / (tp * pp * ep)
    grad_b = 4.0 if s.sharding == "ddp" else 2.0
    if s.frozen_base:
        grad_b = 0.0  # frozen base: no gradients to reduce (the adapters' are negligible)
    span_dp = tp * cp * dp
    stride = tp * cp
    # micro-batches that each gather the sharded parameters again (a pipeline schedule runs
    # a step's micro-batches together and reshards after the last), and that each reduce
    # their gradients (app/sizing/profiles.py grads_every_microbatch)
    per_mb = m if pp == 1 else 1
    grad_mb = per_mb if profile.grads_every_microbatch else 1
    dp_t = 0.0
    # Routed experts are sharded over the expert-data-parallel group: the ranks holding the
    # same experts, EP apart (torchtitan's dp_shard_mod_ep mesh dimension, Megatron's
    # expert-data-parallel group). With EP filling the NVLink domain that group has one GPU
    # per node, so its ring crosses nodes on that GPU's own NIC, not the node's NICs together.
    for p_loc, n, st in ((p_dense, dp * cp, stride), (p_exp, max(1, (dp * cp) // ep), stride * ep)):
        if p_loc <= 0 or n <= 1:
            continue
        frac = (n - 1) / n
        bw = _bw(span_dp, hw, st)
        if s.frozen_base and s.sharding != "zero3":
            continue  # replicated frozen weights: nothing to exchange
        if s.sharding == "zero3":
            sg = max(1, min(n, s.shard_group or n))
            rep = max(1, n // sg)
            # gather for forward and backward, reduce-scatter gradients inside the shard
            # group; the gathered parameters are freed after each micro-batch, so gradient
            # accumulation gathers them again for every micro-batch
            moved = 2.0 * 2.0 * per_mb + grad_b * grad_mb  # bytes per parameter per step
            dp_t += (sg - 1) / sg * p_loc * moved / _bw(st * sg, hw, st)
            if rep > 1:  # HSDP: all-reduce the sharded gradients across the replicas
                dp_t += 2.0 * (rep - 1) / rep * p_loc / sg * grad_b * grad_mb / bw
        elif s.sharding == "ddp":
            dp_t += 2.0 * frac * p_loc * grad_b / bw
        elif s.sharding == "zero2":  # reduce-scatter gradients, all-gather updated parameters
            dp_t += frac * p_loc * (grad_b * grad_mb + 2.0) / bw
        else:  # zero1: one reduce-scatter of the accumulated gradients per step
            dp_t += frac * p_loc * (grad_b + 2.0) / bw
    dp_exposed = max(dp_t - profile.dp_overlap * m * compute_mb, 0.1 * dp_t) if dp_t else 0.0

    # The optimizer step is priced for the shard of one NVLink domain (the data-parallel
    # ranks of one node or rack): smaller shards than that are launch-bound in the
    # multi-tensor optimizer, so spreading over more nodes does not shorten it. A layout
    # with fewer data-parallel ranks than that (one GPU, part of a node) has fewer shards.
    p_local = p_dense + p_exp
    if s.sharding in ("zero1", "zero2", "zero3"):
        p_local /= max(1, min(dp * cp, hw.nvlink_domain // (tp * cp * pp)))
    if s.frozen_base:
        opt_t = 0.0  # adapters only: their optimizer step is under 1 % of a full one
    elif s.offload_optimizer:
        # ZeRO-Offload: each GPU's host share updates only its own shard, so this part
        # does shrink with the data-parallel size (the one super-linear effect modelled)
        host = p_dense + p_exp
        if s.sharding in ("zero1", "zero2", "zero3"):
            host /= max(1, dp * cp)
        opt_t = host * OPT_BYTES_PER_PARAM / HOST_OPT_BPS + 2 * host * 2.0 / PCIE_BPS
    else:
        opt_t = p_local * OPT_BYTES_PER_PARAM / (hw.hbm_tbps * 1e12)
    if s.offload_params:
        opt_t += 3 * (p_dense + p_exp) / max(1, dp) * 2.0 / PCIE_BPS
    step = pipe + dp_exposed + opt_t
    tok_step = m * tok_gpu_mb
    return Throughput(
        tokens_per_s_per_gpu=tok_step / step,
        step_seconds=step,
        tokens_per_step_per_gpu=tok_step,
        microbatches=m,
        bubble=bubble,
        breakdown={
            "gemm": m * t_gemm * tok_gpu_mb,
            "attention": m * t_attn * tok_gpu_mb,
            "memory_bound": m * t_mem * tok_gpu_mb,
            "eager_parallel_code": m * eager_mb,
            "host_floor": m * (max(0.0, host_mb - t_token * tok_gpu_mb - eager_mb) + sync_mb),
            "collectives_exposed": m * (comm_mb - offload_mb),
            "activation_offload_exposed": m * offload_mb,
            "pipeline_bubble": pipe - m * (compute_mb + comm_mb),
            "data_parallel_exposed": dp_exposed,
            "optimizer": opt_t,
        },
    )
