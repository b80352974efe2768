"""The sizing engine's job, layout and memory types, and the memory model's constants.

``Job`` (what is trained, how), ``Layout`` (how it is spread), ``Framework`` (where a
stack keeps its states and what it saves for the backward pass) and ``Memory`` (the
per-GPU figures). ``app.sizing.memory`` computes the figures; ``app.sizing.activations``
the activation part. Every constant is global and has a stated physical meaning (see
docs/sizing.md); none is fitted to one measured run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, overload

from app.sizing.memo import Memo
from app.sizing.params import Architecture, ParamCounts

GIB = 1024**3

# --- framework overhead constants (documented in docs/sizing.md) -------------------------
CUDA_CONTEXT_BYTES = int(1.0 * GIB)  # CUDA context, kernels, cuBLAS/cuDNN workspaces
NCCL_BYTES_PER_GROUP = int(0.5 * GIB)  # NCCL channel buffers per communicator kind in use
FRAGMENTATION = 0.15  # caching-allocator slack on the dynamic (activation/buffer) part
SAFETY_MARGIN = 0.05  # of the usable (driver-reported) memory kept free for fit decisions
QLORA_BYTES_PER_PARAM = 0.516  # NF4 4 bits + double-quantised block constants
FP8_WEIGHT_COPY_BYTES = 1.0  # Transformer Engine keeps an FP8 copy of the GEMM weights
CE_BYTES_PER_LOGIT = 6  # bf16 logits + fp32 softmax/cross-entropy buffer (fused loss)
CPU_OFFLOAD_FACTOR = 1.25  # pinned staging buffers on the host side of offload
CPU_USABLE_FRACTION = 0.9  # of node RAM, the rest is the OS, data loaders, page cache
# NVFP4 (and MXFP4) GEMM operands: 4-bit values + one 8-bit scale per 16 (32) values, kept
# row-wise and column-wise (the backward pass multiplies by the transpose)
FP4_WEIGHT_COPY_BYTES = 2 * (0.5 + 1.0 / 16)
# DeepSpeed ZeRO-1/2 defaults: reduce_bucket_size = allgather_bucket_size = 5e8 elements
DS_BUCKET_ELEMENTS = 5e8
# DeepSpeed ZeRO-3 default stage3_max_live_parameters: 1e9 gathered parameters may be live
DS_MAX_LIVE_PARAMS = 1e9
# activation offload keeps this many blocks' saved tensors on the GPU (one being computed,
# one in transfer)
OFFLOAD_RESIDENT_BLOCKS = 2
CHUNKED_CE_BYTES_PER_LOGIT = 2.0
# an FP32 cross-entropy's backward: the saved log-softmax output, the gradient arriving from
# the loss and the gradient it produces are three FP32 vocabulary-wide tensors at once
# (measured on an H200: tools/gpu_memory, docs/sizing-accuracy.md)
FP32_LOSS_PEAK_BYTES_PER_LOGIT = (
    12.0  # chunked loss: BF16 logits kept, FP32 work one chunk at a time
)

# --- memory range (see memory_range) -------------------------------------------------------
# how a published configuration maps onto the model (unstated buffers, versions): a share of
# the whole figure, wider upwards (under-prediction is the costly side)
MODEL_SPREAD_LOW = 0.12
MODEL_SPREAD_HIGH = 0.18
ACT_SPREAD = 0.20  # which tensors autograd / the compiler actually keeps, kernel choice
OVERHEAD_SPREAD = 0.30  # context, NCCL and allocator slack vary by driver and versions
MAX_RANGE_RATIO = 1.6  # no range wider than high/low = 1.6


@dataclass(frozen=True)
class Framework:
    """Where a training stack keeps states and what it saves for the backward pass."""

    id: str
    states: str  # megatron | fsdp2 | zero: how weights/grads/master copies are laid out
    shard_over_cp: bool  # optimizer/params shard over data-parallel x context-parallel ranks
    selective: str  # what recompute="selective" means: "attention" (Megatron) | "op" (SAC)
    loss_bytes_per_logit: float  # unchunked loss as the stack computes it
    tp_gathered_inputs: bool  # DTensor SP: all-gathered GEMM inputs are saved (not re-gathered)
    default_recompute: str
    doc: str
    fragmentation: float = FRAGMENTATION
    context_bytes: int = CUDA_CONTEXT_BYTES
    nccl_bytes_per_group: int = NCCL_BYTES_PER_GROUP
    # the router's probabilities multiply the routed experts' activation output (not the
    # un-permuted result): Megatron-LM's TEGroupedMLP; see layer_activation_bytes_per_token
    moe_probs_in_act: bool = False
    # the model code repeats the K/V heads to every query head before attention (GQA
    # without a native kernel path): the repeated copies are what attention saves
    repeat_kv: bool = False
    # the gated MLP's activation is one fused kernel (Megatron-LM's SwiGLU: saves its input
    # only); eager PyTorch code (act(x·W1) * x·W3) keeps the activation output as well
    fused_gated_act: bool = True

    @property
    def op_sac(self) -> bool:
        """Selective recompute is op-level SAC (torchtitan's policy), not Megatron's."""
        return self.selective == "op"


_MEGATRON = Framework(
    "megatron",
    states="megatron",
    shard_over_cp=True,
    selective="attention",
    loss_bytes_per_logit=CE_BYTES_PER_LOGIT,
    tp_gathered_inputs=False,
    default_recompute="selective",
    doc="BF16 weights and FP32 main-grad buffer on every DP rank; the distributed "
    "optimizer shards FP32 master + Adam over DP x CP; selective recompute = core "
    "attention; fused vocab-parallel cross-entropy; SP re-gathers inputs in backward",
    moe_probs_in_act=True,
)
_FSDP2 = Framework(
    "fsdp2",
    states="fsdp2",
    shard_over_cp=True,
    selective="op",
    loss_bytes_per_logit=FP32_LOSS_PEAK_BYTES_PER_LOGIT,
    tp_gathered_inputs=True,
    default_recompute="selective",
    doc="torchtitan-style: FP32 sharded parameters are the master copy (BF16 only while "
    "gathered), FP32 reduce-scatter grads, Adam sharded over DP x CP; selective = "
    "op-level SAC (every other matmul output and attention outputs kept); loss on an "
    "FP32 upcast of the logits (fused by torch.compile); with PP the stage stays "
    "unsharded between forward and backward; K/V heads repeated before attention and "
    "an eager SwiGLU (torchtitan's Llama code)",
    fragmentation=0.10,
    repeat_kv=True,
    fused_gated_act=False,
)
# DeepSpeed: ZeRO's own layout of the states, HF-style FP32 loss, full checkpointing
_DEEPSPEED = Framework(
    "deepspeed",
    states="zero",
    shard_over_cp=False,
    selective="attention",
    loss_bytes_per_logit=12.0,
    tp_gathered_inputs=False,
    default_recompute="full",
    doc="ZeRO stages as configured; reduce/all-gather buckets (ZeRO-1/2) or up to 1e9 "
    "live gathered parameters (ZeRO-3); HF-style FP32 loss; full checkpointing",
    fragmentation=0.20,
)
FRAMEWORKS: dict[str, Framework] = {
    "megatron": _MEGATRON,
    "fsdp2": _FSDP2,
    "deepspeed": _DEEPSPEED,
    # HF Trainer keeps its states as DeepSpeed does (DDP, or FSDP as ZeRO-3) and runs the
    # model's own eager code: op-level selective recompute, K/V heads repeated, eager SwiGLU
    "hf": replace(
        _DEEPSPEED,
        id="hf",
        selective="op",
        tp_gathered_inputs=True,
        doc="HF Trainer / torchtune: DDP or FSDP, logits upcast to FP32 for the loss "
        "(chunked in torchtune when asked), gradient checkpointing per block; K/V heads "
        "repeated before attention and an eager SwiGLU",
        repeat_kv=True,
        fused_gated_act=False,
    ),
}
PP_SCHEDULES = ("1f1b", "interleaved", "gpipe")


@dataclass(frozen=True)
class Job:
    arch: Architecture
    counts: ParamCounts
    method: str  # full | lora | qlora
    seq_len: int
    precision: str  # bf16 | fp8
    optimizer: str  # adamw | adamw8bit
    grad_dtype: str  # bf16 | fp32
    master_weights: bool
    flash_attention: bool
    lora_rank: int
    framework: str = "fsdp2"
    compile: bool = False
    optimizer_in_backward: bool = False  # each gradient is applied and freed in backward
    activation_offload: bool = False  # saved activations go to host memory
    chunked_loss: bool = False  # loss computed over vocabulary/sequence chunks
    # the training recipe's pipeline schedule (applied to layouts that do not set their own)
    pp_schedule: str = "1f1b"
    virtual_stages: int = 1
    num_microbatches: int = 0  # 0: enough to fill the pipeline
    global_batch_size: int = 0  # sequences per step; sets the micro-batch count per layout
    # tokens per optimizer step when neither of the two above is given (throughput only;
    # 0: throughput.DEFAULT_GLOBAL_BATCH_TOKENS). Set from the run's FLOPs by the request.
    batch_tokens: int = 0
    # per-request memo of memory() results (layouts repeat across node counts)
    cache: Memo = field(default_factory=Memo, compare=False, hash=False, repr=False)

    @property
    def fw(self) -> Framework:
        return FRAMEWORKS[self.framework]

    @property
    def lora_params(self) -> int:
        if self.method == "full":
            return 0
        a = self.arch
        h = a.hidden_size
        q = a.num_attention_heads * a.head_dim
        kv = a.num_kv_heads * a.head_dim
        attn = (h + q) + 2 * (h + kv) + (q + h)
        mlp = 3 * (h + a.intermediate_size)
        return self.lora_rank * (attn + mlp) * a.num_layers


@dataclass(frozen=True)
class Layout:
    sharding: str  # ddp | zero1 | zero2 | zero3
    shard_group: int
    tp: int
    pp: int
    ep: int
    cp: int
    micro_batch_size: int
    recompute: str  # none | selective | full
    offload_optimizer: bool
    offload_params: bool
    world: int
    pp_schedule: str = "1f1b"  # 1f1b | interleaved | gpipe
    virtual_stages: int = 1  # model chunks per pipeline rank (interleaved)
    num_microbatches: int = 0  # micro-batches per step per pipeline; 0 = enough to fill it

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp * self.cp)

    def as_dict(self) -> dict[str, object]:
        return {
            "sharding": self.sharding,
            "shard_group": self.shard_group,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "cp": self.cp,
            "dp": self.dp,
            "sequence_parallel": self.tp > 1,
            "micro_batch_size": self.micro_batch_size,
            "recompute": self.recompute,
            "offload_optimizer": self.offload_optimizer,
            "offload_params": self.offload_params,
            "pp_schedule": self.pp_schedule,
            "virtual_stages": self.virtual_stages,
            "num_microbatches": self.num_microbatches,
        }

    @property
    def in_flight(self) -> float:
        """Micro-batches of a full stage's activations the first pipeline stage holds.

        1F1B: ``min(pp, m)``. Interleaved with ``v`` chunks per rank: Megatron-LM's
        ``pp·(1 + (pp−1)/(pp·v))`` = ``pp + (pp−1)/v`` (also what PyTorch's
        Interleaved1F1B warm-up implies), at most ``m``. GPipe: all ``m``.
        """
        pp = self.pp
        if pp == 1:
            return 1.0
        m = self.num_microbatches if self.num_microbatches > 0 else None
        if self.pp_schedule == "gpipe":
            return float(m if m is not None else pp)
        if self.pp_schedule == "interleaved":
            x = pp + (pp - 1) / max(1, self.virtual_stages)
        else:
            x = float(pp)
        return min(x, float(m)) if m is not None else x


_T = TypeVar("_T")


class _once(Generic[_T]):  # noqa: N801 - used as a decorator, like cached_property
    """``functools.cached_property`` without its lock (Python 3.11 takes an RLock on every
    first read; 3.12 dropped it): the value is computed on the first read and stored in the
    instance dictionary, which later reads find first (a non-data descriptor). Two threads
    reading a figure's value at once may both compute it: the same pure value."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _once[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _T | _once[_T]:
        if instance is None:
            return self
        val = instance.__dict__[self.attrname] = self.func(instance)
        return val


@dataclass(frozen=True)
class Memory:
    weights: int
    gradients: int
    master_weights: int
    optimizer_states: int
    activations: int
    overhead: int
    context: int
    nccl: int
    gather_buffers: int
    fragmentation: int
    cpu_offload_per_gpu: int  # host RAM this GPU's offloaded states need

    # computed once per figure (read-only, not a field: equality and hashing are the
    # fields'): the search asks each figure's total and range again and again
    @_once
    def total(self) -> int:
        return (
            self.weights
            + self.gradients
            + self.master_weights
            + self.optimizer_states
            + self.activations
            + self.overhead
        )

    @_once
    def range_high(self) -> int:
        """``memory_range(self)[1]`` (an int: a cached tuple would be one more object for the
        garbage collector to track in every figure the search keeps)."""
        return memory_range(self)[1]

    @property
    def states(self) -> int:
        return self.weights + self.gradients + self.master_weights + self.optimizer_states

    @property
    def reserved(self) -> int:
        """What torch.cuda.max_memory_reserved would see (allocator slack, no context/NCCL)."""
        return self.total - self.context - self.nccl

    @property
    def allocated(self) -> int:
        """What torch.cuda.max_memory_allocated would see (no context/NCCL/slack)."""
        return self.total - self.context - self.nccl - self.fragmentation

    def as_dict(self) -> dict[str, int]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "master_weights": self.master_weights,
            "optimizer_states": self.optimizer_states,
            "activations": self.activations,
            "overhead": self.overhead,
            "total": self.total,
        }

    def overhead_breakdown(self) -> dict[str, int]:
        return {
            "cuda_context": self.context,
            "nccl_buffers": self.nccl,
            "fsdp_gather_buffers": self.gather_buffers,
            "allocator_fragmentation": self.fragmentation,
        }


def new_memory(**figures: int) -> Memory:
    """``Memory(**figures)`` in one step: the frozen dataclass's __init__ sets each of its 11
    fields through object.__setattr__, and the search builds one per stage of every layout
    whose memory it evaluates (the instance dictionary is the keywords, in field order at
    the one call site, then ``total``: the cached property's value, which it then never
    computes; tests/sizing/test_search_pruning.py checks it against Memory(...))."""
    m = _new_object(Memory)
    _set_attr(m, "__dict__", figures)
    return m


_new_object = object.__new__
_set_attr = object.__setattr__


# --- range and fit verdict ------------------------------------------------------------------


def range_spread(mem: Memory) -> tuple[float, float]:
    """(down, up) absolute deviations of the range around the likely total, before capping."""
    t = mem.total
    parts = ACT_SPREAD * mem.activations + OVERHEAD_SPREAD * mem.overhead
    return MODEL_SPREAD_LOW * t + parts, MODEL_SPREAD_HIGH * t + parts


def scaled_range(likely: float, down: float, up: float) -> tuple[int, int]:
    """[likely − down, likely + up], narrowed (keeping its shape) to high/low ≤ 1.6."""
    lo, hi = likely - down, likely + up
    if lo <= 0 or hi / lo > MAX_RANGE_RATIO:
        # likely + t·up = R·(likely − t·down)  →  t = (R − 1)·likely / (up + R·down)
        r = MAX_RANGE_RATIO
        t = (r - 1.0) * likely / (up + r * down) if (up + r * down) > 0 else 0.0
        lo, hi = likely - t * down, likely + t * up
    return int(math.floor(lo)), int(math.ceil(hi))


def memory_range(mem: Memory, likely: int | None = None) -> tuple[int, int]:
    """[low, high] bytes around the likely per-GPU figure (``mem.total`` unless given).

    The whole figure carries −12 %/+18 % for how a configuration maps onto the model;
    activations add ±20 % (what autograd and the compiler keep differs by version and
    kernel) and the overhead ±30 %. A figure other than the total (the
    allocator's view) gets the same relative spread. Always low ≤ likely ≤ high and
    high/low ≤ 1.6.
    """
    down, up = range_spread(mem)
    if likely is None or mem.total <= 0:
        return scaled_range(float(mem.total), down, up)
    f = likely / mem.total
    return scaled_range(float(likely), down * f, up * f)


def fit_verdict(mem: Memory, limit: float) -> str:
    """fits (high bound under the limit) | tight (likely fits, high does not) | does_not_fit."""
    if mem.total > limit:
        return "does_not_fit"
    return "fits" if mem.range_high <= limit else "tight"
