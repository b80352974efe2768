"""Throughput profiles: what each training stack sustains, overlaps and can run.

The hardware model in :mod:`app.sizing.throughput` prices a step from the GPU's facts and
the layout; a :class:`StackProfile` says what the customer's stack does on top of it. Every
field has a physical meaning and a source (docs/sizing-accuracy-time.md lists them with the
share of public cases each framework's range holds). The reference constants of the
hardware model were fitted on runs of tuned stacks (Megatron-Core rows, MosaicML's FSDP
rows, the Llama 3 and DeepSeek reports); the profiles only change what differs between
stacks, and none is fitted to one case.

* ``megatron`` (Megatron-Core + Transformer Engine): fused kernels (RMSNorm, SwiGLU, rotary,
  bias-dropout-add, cross-entropy), TP/SP communication overlap, grouped GEMM for experts,
  1F1B overlap of the EP all-to-all, DualPipe-style schedules, CP and EP.
  Sources: Megatron-LM README (DP/TP/PP communication overlap, r0.8.0 table); MLPerf
  Training v5.0 and v5.1 results (mlcommons/training_results_v5.0 and v5.1: NVIDIA's and
  AMD's Llama 3.1 8B / 405B and Llama 2 70B LoRA submissions, FP8 and NVFP4 — the FP8 and
  FP4 GEMM shares of this profile);
  Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization``; yanring/Megatron-MoE-ModelZoo
  best practices (EP overlap, DeepEP).
* ``fsdp2`` (torchtitan-style): eager PyTorch modules (an unfused RMSNorm, SwiGLU and
  rotary read and write the activations about twice as often as fused kernels; with
  ``compile`` Inductor fuses them back), FSDP2 gathers with prefetch, TP without overlap
  unless compiled (async TP needs ``torch.compile``), grouped GEMM for experts, CP and EP,
  no all-to-all overlap schedule. Sources: the PyTorch FSDP2 and async-TP design notes
  (pytorch/pytorch ``torch.distributed.fsdp.fully_shard`` docs, torch.distributed
  ``_SymmetricMemory`` async TP RFC #114332), our own H200 runs (FSDP2, eager, 2026) and
  MosaicML's FSDP rows (bench/data, docs/sizing-accuracy-time.md).
* ``deepspeed`` (ZeRO): no public measured row with its layout in our set; starts from
  ``fsdp2`` eager (both run eager PyTorch modules with sharded states), offers ZeRO stages,
  its pipeline engine and DeepSpeed-MoE expert parallelism, no tensor or context
  parallelism in the search (AutoTP and Ulysses are not priced), and carries a wider range.
* ``hf`` (HF Trainer / accelerate): starts from ``fsdp2`` eager; DDP, ZeRO or FSDP only
  (no TP, PP, CP or EP layouts in the Trainer), experts run one GEMM per expert (the
  modelling code loops over experts: more kernel launches per MoE layer), widest range.

Ranges: ``range_slow`` and ``range_fast`` multiply the likely tokens/s: the fast end is a
tuned run of the stack, the slow end a first-week run (untuned batch, default buckets).
One pair per framework, set so that at least 80 % of that framework's public cases fall
inside and fast/slow stays at most 1.6 (bench/throughput_accuracy.py reports the share).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# No range wider than fast/slow = 1.6 (the promise the answer makes).
MAX_RANGE_RATIO = 1.6


@dataclass(frozen=True)
class StackProfile:
    """What one training stack sustains and overlaps, and which layouts it can run."""

    id: str
    nearest: str | None  # the profile this one starts from (thin public data), or None
    # memory-bound passes (norms, activations, rotary, residuals) relative to fused kernels,
    # eager and with torch.compile
    elem_scale: float
    elem_scale_compiled: float
    # share of TP/SP and CP collective time on the critical path, eager and compiled
    tp_exposed: float
    tp_exposed_compiled: float
    # share of the EP all-to-all on the critical path without a DualPipe schedule
    a2a_exposed: float
    # share of the step's compute behind which DP/FSDP/ZeRO traffic can hide
    dp_overlap: float
    # experts as one grouped GEMM per layer (False: one GEMM launch per local expert)
    grouped_gemm: bool
    # parallel dimensions the stack can run (a layout needing another is never offered)
    tp: bool
    pp: bool
    cp: bool
    ep: bool
    dualpipe: bool
    range_slow: float
    range_fast: float
    # EP must be a multiple of TP x CP: torchtitan runs experts without tensor parallelism
    # (expert_tensor_parallel_degree = 1, its default) by folding the TP and CP ranks into the
    # EP group, and its ParallelDims refuses an EP degree that does not hold them whole
    ep_holds_tp_cp: bool = False
    # sustained share of the FP8 / FP4 dense peak in large GEMMs with this stack's recipes
    # and kernels; None: the hardware model's E_GEMM (app/sizing/throughput.py)
    fp8_gemm: float | None = None
    fp4_gemm: float | None = None
    # ZeRO-2/3 gradients reduce-scattered after every micro-batch's backward, not once per
    # step: torchtitan's train loop runs each gradient-accumulation micro-batch's backward
    # with gradient sync on (no set_requires_gradient_sync(False)), and DeepSpeed ZeRO-2/3
    # reduces each micro-step into its shard (no_sync is refused there). False: one reduction
    # per step from an unsharded gradient buffer (Megatron's main_grad, accelerate's no_sync)
    grads_every_microbatch: bool = False
    # share of the modelled compute rate that eager code sustains when a tensor, context or
    # expert parallel dimension is on (DTensor-sharded modules without torch.compile: each
    # op goes through DTensor's sharding propagation and redistributions that a compiled
    # graph folds away); 1.0 for stacks whose parallel code is not DTensor
    eager_parallel_eff: float = 1.0

    def runs(self, tp: int, pp: int, ep: int, cp: int) -> bool:
        """Whether this stack can run a layout with these degrees."""
        return (
            (tp <= 1 or self.tp)
            and (pp <= 1 or self.pp)
            and (ep <= 1 or self.ep)
            and (cp <= 1 or self.cp)
            and (ep <= 1 or not self.ep_holds_tp_cp or ep % (tp * cp) == 0)
        )

    def eager_parallel_rate(self, compiled: bool, tp: int, cp: int, ep: int) -> float:
        """Share of the modelled compute rate this stack sustains on the layout: below 1
        only for eager code with a tensor, context or expert parallel dimension."""
        return 1.0 if compiled or max(tp, cp, ep) <= 1 else self.eager_parallel_eff

    def elem(self, compiled: bool) -> float:
        return self.elem_scale_compiled if compiled else self.elem_scale

    def tp_exp(self, compiled: bool) -> float:
        return self.tp_exposed_compiled if compiled else self.tp_exposed


# The hardware model's own constants (app/sizing/throughput.py), fitted on tuned stacks.
REF_TP_EXPOSED = 0.647
REF_A2A_EXPOSED = 0.884
REF_DP_OVERLAP = 0.8

# Eager PyTorch's memory-bound passes over fused kernels: RMSNorm (x², mean, rsqrt, scale:
# ~4 passes instead of 1), SwiGLU (silu, multiply: 3 instead of 1), rotary (about 6
# instead of 2). Weighted over the per-layer elementwise bytes, about twice as many.
EAGER_ELEM_SCALE = 2.0

REFERENCE = StackProfile(
    id="reference",
    nearest=None,
    elem_scale=1.0,
    elem_scale_compiled=1.0,
    tp_exposed=REF_TP_EXPOSED,
    tp_exposed_compiled=REF_TP_EXPOSED,
    a2a_exposed=REF_A2A_EXPOSED,
    dp_overlap=REF_DP_OVERLAP,
    grouped_gemm=True,
    tp=True,
    pp=True,
    cp=True,
    ep=True,
    dualpipe=True,
    range_slow=1.0,
    range_fast=1.0,
)

FSDP2 = replace(
    REFERENCE,
    id="fsdp2",
    elem_scale=EAGER_ELEM_SCALE,
    # eager TP: every all-gather / reduce-scatter waits for its GEMM
    tp_exposed=1.0,
    a2a_exposed=1.0,
    dualpipe=False,
    ep_holds_tp_cp=True,
    grads_every_microbatch=True,
    # torchtitan threads, eager runs with TP, CP or EP, measured over predicted before this
    # term, median per thread: PR 1690 (Qwen3-32B, TP 8) 0.65, issue 1789 (DeepSeek-V3
    # 16B, EP 8) 0.70, PR 1884 (Llama 3 8B, CP 2) 0.80, PR 481 (Llama 3.1 405B, TP 8)
    # 0.83: the median of the four threads. Compiled runs of the same stack (PR 1690's
    # FSDP row, issue 1185's Llama 3 70B TP 8 rows) are within -8 to +18 % without it.
    # Issue 1207 (Llama 3 8B, TP 2, 0.63 if eager) does not say whether it compiled
    eager_parallel_eff=0.75,
    range_slow=0.74,
    range_fast=1.18,
)

PROFILES: dict[str, StackProfile] = {
    # the hardware model's reference stack (fused kernels, TP/SP and EP overlap, DualPipe),
    # with its own time range and low-precision GEMM shares
    "megatron": replace(
        REFERENCE,
        id="megatron",
        range_slow=0.74,
        range_fast=1.14,
        # Transformer Engine 2.x FP8 (tensorwise current scaling on Hopper, MXFP8 on
        # Blackwell) and NVFP4 GEMMs, as shares of a Hopper-class peak (other families scale
        # by PEAK_SHARE in app/sizing/gpus.py), fitted with PEAK_SHARE on MLPerf
        # Training v5.0/v5.1 (NeMo/Megatron-Core, NVIDIA and AMD) and the other megatron
        # FP8/FP4 rows of bench/data; the hardware model's E_GEMM FP8 share rests on 2023
        # FP8 rows (TE 1.x), FP4's on a judgment.
        fp8_gemm=0.56,
        fp4_gemm=0.39,
    ),
    "fsdp2": FSDP2,
    # No public throughput case of their own: each starts from fsdp2 (``nearest``), less what
    # the stack cannot do, with the widest range (fast/slow = 1.6).
    "deepspeed": replace(
        FSDP2,
        id="deepspeed",
        nearest="fsdp2",
        tp_exposed_compiled=1.0,
        tp=False,
        cp=False,
        eager_parallel_eff=1.0,  # DeepSpeed-MoE's expert parallelism is not DTensor code
        range_slow=0.73,
        range_fast=1.168,
    ),
    "hf": replace(
        FSDP2,
        id="hf",
        nearest="fsdp2",
        tp_exposed_compiled=1.0,
        grouped_gemm=False,
        grads_every_microbatch=False,
        tp=False,
        pp=False,
        cp=False,
        ep=False,
        range_slow=0.73,
        range_fast=1.168,
    ),
}

# Kernel launches per local expert per MoE layer and micro-batch when experts are not one
# grouped GEMM: three GEMMs forward, six backward (data and weight gradients), the gather
# and scatter of the expert's tokens.
LAUNCHES_PER_EXPERT = 11


def profile(framework: str | None) -> StackProfile:
    """The framework's profile (the hardware model's reference for None)."""
    return REFERENCE if framework is None else PROFILES[framework]


def tokens_range(likely: float, p: StackProfile) -> tuple[float, float]:
    """(slow, fast) tokens/s per GPU around ``likely`` for stack ``p``; always contains it."""
    return likely * min(1.0, p.range_slow), likely * max(1.0, p.range_fast)
