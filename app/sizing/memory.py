"""Per-GPU memory: model states, activations, framework overhead.

All figures are bytes on the most-loaded GPU (the first or last pipeline stage, whichever
is larger). See docs/sizing.md for the formulas and where each constant comes from.

Framework-aware: a ``Framework`` profile says where the training states live and what the
stack keeps for the backward pass (Megatron-LM, FSDP2/torchtitan, DeepSpeed, HF Trainer /
torchtune). Every constant is global and has a stated physical meaning; none is fitted to
one measured run.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, overload

from app.sizing.params import Architecture, MoE, ParamCounts

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
    context_bytes: int
    nccl_bytes_per_group: int
    fragmentation: float
    default_recompute: str
    doc: str
    # the router's probabilities multiply the routed experts' activation output (not the
    # un-permuted result): Megatron-LM's TEGroupedMLP; see layer_activation_bytes_per_token
    moe_probs_in_act: bool = False
    # the model code repeats the K/V heads to every query head before attention (GQA
    # without a native kernel path): the repeated copies are what attention saves
    repeat_kv: bool = False
    # the gated MLP's activation is one fused kernel (Megatron-LM's SwiGLU: saves its input
    # only); eager PyTorch code (act(x·W1) * x·W3) keeps the activation output as well
    fused_gated_act: bool = True


FRAMEWORKS: dict[str, Framework] = {
    "megatron": Framework(
        "megatron",
        states="megatron",
        shard_over_cp=True,
        selective="attention",
        loss_bytes_per_logit=CE_BYTES_PER_LOGIT,
        tp_gathered_inputs=False,
        context_bytes=CUDA_CONTEXT_BYTES,
        nccl_bytes_per_group=NCCL_BYTES_PER_GROUP,
        fragmentation=FRAGMENTATION,
        default_recompute="selective",
        doc="BF16 weights and FP32 main-grad buffer on every DP rank; the distributed "
        "optimizer shards FP32 master + Adam over DP x CP; selective recompute = core "
        "attention; fused vocab-parallel cross-entropy; SP re-gathers inputs in backward",
        moe_probs_in_act=True,
    ),
    "fsdp2": Framework(
        "fsdp2",
        states="fsdp2",
        shard_over_cp=True,
        selective="op",
        loss_bytes_per_logit=FP32_LOSS_PEAK_BYTES_PER_LOGIT,
        tp_gathered_inputs=True,
        context_bytes=CUDA_CONTEXT_BYTES,
        nccl_bytes_per_group=NCCL_BYTES_PER_GROUP,
        fragmentation=0.10,
        default_recompute="selective",
        doc="torchtitan-style: FP32 sharded parameters are the master copy (BF16 only while "
        "gathered), FP32 reduce-scatter grads, Adam sharded over DP x CP; selective = "
        "op-level SAC (every other matmul output and attention outputs kept); loss on an "
        "FP32 upcast of the logits (fused by torch.compile); with PP the stage stays "
        "unsharded between forward and backward; K/V heads repeated before attention and "
        "an eager SwiGLU (torchtitan's Llama code)",
        repeat_kv=True,
        fused_gated_act=False,
    ),
    "deepspeed": Framework(
        "deepspeed",
        states="zero",
        shard_over_cp=False,
        selective="attention",
        loss_bytes_per_logit=12.0,
        tp_gathered_inputs=False,
        context_bytes=CUDA_CONTEXT_BYTES,
        nccl_bytes_per_group=NCCL_BYTES_PER_GROUP,
        fragmentation=0.20,
        default_recompute="full",
        doc="ZeRO stages as configured; reduce/all-gather buckets (ZeRO-1/2) or up to 1e9 "
        "live gathered parameters (ZeRO-3); HF-style FP32 loss; full checkpointing",
    ),
    "hf": Framework(
        "hf",
        states="zero",
        shard_over_cp=False,
        selective="op",
        loss_bytes_per_logit=12.0,
        tp_gathered_inputs=True,
        context_bytes=CUDA_CONTEXT_BYTES,
        nccl_bytes_per_group=NCCL_BYTES_PER_GROUP,
        fragmentation=0.20,
        default_recompute="full",
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
    cache: dict[tuple[object, ...], Any] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

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


# --- activations ----------------------------------------------------------------------------


def _attn_dims(a: Architecture) -> tuple[int, int, int, int, int]:
    """(q, k, v, o widths, extra replicated latent width) per token."""
    if a.mla is not None:
        m = a.mla
        qk = a.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        v = a.num_attention_heads * m.v_head_dim
        latent = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim
        return qk, qk, v, v, latent
    q = a.num_attention_heads * a.head_dim
    kv = a.num_kv_heads * a.head_dim
    return q, kv, kv, q, 0


def _sac_op_bytes_per_token(a: Architecture, moe: MoE | None, tp: int) -> float:
    """Op-level SAC: block input, attention output + FP32 log-sum-exp, every other matmul."""
    h = a.hidden_size
    q, _k, v, o, latent = _attn_dims(a)
    sp_part = 2.0 * h + 2.0 * latent
    tp_part = 2.0 * o + 4.0 * a.num_attention_heads + 2.0 * (q + v)
    gathered = 0.0
    if moe is not None:
        f = moe.expert_intermediate_size
        gathered = moe.experts_per_token * 2.0 * h  # dispatched token copies
        tp_part += (moe.experts_per_token + moe.shared_experts) * 2.0 * (f + h)
        tp_part += 4.0 * moe.num_experts
    else:
        tp_part += 2.0 * (a.intermediate_size + h)
    return sp_part / tp + tp_part / tp + gathered


def layer_activation_bytes_per_token(
    a: Architecture,
    *,
    moe_layer: bool,
    tp: int,
    kv_len: int,
    flash: bool,
    recompute: str,
    selective: str = "attention",
    compiled: bool = False,
    tp_gathered: bool = False,
    moe_probs_in_act: bool = False,
    repeat_kv: bool = False,
    fused_gated_act: bool = True,
) -> float:
    """Bytes stored per token for one transformer block's backward (16-bit activations).

    Korthikanti et al. 2022's breakdown redone for pre-norm, dropout-free, gated-MLP, GQA
    blocks: norm inputs/outputs (sequence-parallel, split by TP), Q/K/V, attention output,
    the two gated-MLP branches and the activation output (split by TP). Without
    FlashAttention the a·s² score and softmax tensors (4 bytes per score) are stored.

    ``selective="op"`` is op-level selective checkpointing (torchtitan's policy): only the
    block input, the attention output with its FP32 log-sum-exp and every other matmul
    output (wq, wv, w1, w2) are kept. ``compiled``: torch.compile's partitioner recomputes
    pointwise ops, so norm outputs and the gated product are not stored. ``tp_gathered``:
    with DTensor sequence parallelism the all-gathered inputs of the column-parallel
    matmuls are saved whole on every TP rank. ``moe_probs_in_act``: the routing
    probabilities multiply the routed experts' activation output (Megatron-LM), which
    keeps one more expert-width tensor per routed copy when the experts are not gated.
    ``repeat_kv``: K and V are repeated to every query head before attention, which saves
    the repeated copies. ``fused_gated_act`` off: an eager gated MLP keeps the activation
    output beside both branches and their product (four expert-width tensors, not three).
    """
    h = a.hidden_size
    if recompute == "full":
        return 2.0 * h / tp  # only the block input (sequence parallel when tp > 1)
    q, k, v, o, latent = _attn_dims(a)
    moe = a.moe if (moe_layer and a.moe is not None) else None
    if recompute == "selective" and selective == "op":
        # a policy never keeps more than running without recomputation
        return min(
            _sac_op_bytes_per_token(a, moe, tp),
            layer_activation_bytes_per_token(
                a,
                moe_layer=moe_layer,
                tp=tp,
                kv_len=kv_len,
                flash=flash,
                recompute="none",
                compiled=compiled,
                tp_gathered=tp_gathered,
                moe_probs_in_act=moe_probs_in_act,
                repeat_kv=repeat_kv,
                fused_gated_act=fused_gated_act,
            ),
        )
    norm_tensors = 1 if compiled else 2
    sp_part = 2.0 * h * (a.norms_per_layer * norm_tensors) + 2.0 * latent
    if repeat_kv and a.mla is None:
        k, v = max(k, q), max(v, q)
    tp_part = 2.0 * (q + k + v) + 2.0 * o + 4.0 * a.num_attention_heads
    if not flash and recompute == "none":
        tp_part += 4.0 * a.num_attention_heads * kv_len
    act_store = recompute == "none" and not compiled
    gathered = 0.0
    if tp_gathered and tp > 1:
        gathered += 2 * 2.0 * h * (tp - 1) / tp  # attention and MLP inputs, whole sequence
    # up (+ gate) outputs and the activation output; eager gated code also keeps the product
    width_per_branch = (3 if fused_gated_act else 4) if a.gated_mlp else 2
    if moe is not None:
        routed = moe.experts_per_token
        f = moe.expert_intermediate_size
        branches = (width_per_branch - (0 if act_store else 1)) * 2.0 * f
        # routed copies of the token vectors: the dispatcher gathers the whole sequence
        # across TP ranks, so these are not split by TP
        gathered += routed * 2.0 * h
        tp_part += routed * branches + moe.shared_experts * branches
        if moe_probs_in_act and act_store and not a.gated_mlp:
            # Megatron-LM TEGroupedMLP (core_r0.14.0 moe/experts.py lines 902-904):
            # act(fc1) * permuted_probs; a non-gated activation never takes the fused
            # weighted kernel (experts.py line 872 accepts SwiGLU only, and arguments.py
            # line 888 turns GeLU fusion off without biases), so autograd keeps fc1's
            # output (for the activation), the activation output (for the probs' gradient,
            # the router's probs require grad, even RandomSTE's forced balancing) and the
            # weighted product (fc2's input): one expert-width tensor more than a dense
            # MLP. The fused SwiGLU kernel saves only its input and the probs.
            tp_part += routed * 2.0 * f
        tp_part += 4.0 * moe.num_experts  # router logits (fp32)
    else:
        f = a.intermediate_size
        tp_part += (width_per_branch - (0 if act_store else 1)) * 2.0 * f
    return sp_part / tp + tp_part / tp + gathered


def loss_bytes_per_logit(job: Job) -> float:
    if job.chunked_loss:
        return CHUNKED_CE_BYTES_PER_LOGIT
    b = job.fw.loss_bytes_per_logit
    return min(b, CE_BYTES_PER_LOGIT) if job.compile else b


def _last_in_flight(lay: Layout) -> float:
    if lay.pp == 1:
        return 1.0
    m = lay.num_microbatches if lay.num_microbatches > 0 else None
    if lay.pp_schedule == "gpipe":
        return float(m if m is not None else lay.pp)
    if lay.pp_schedule == "interleaved":
        v = max(1, lay.virtual_stages)
        x = ((v - 1) * lay.pp + 1) / v
        return min(x, float(m)) if m is not None else x
    return 1.0


def activation_bytes(job: Job, lay: Layout, *, first_stage: bool) -> tuple[int, int]:
    """(activation bytes, logits bytes) for the first or last pipeline stage."""
    # activations do not depend on how states are sharded: memoise across shard groups
    key = (
        "act",
        first_stage,
        lay.tp,
        lay.pp,
        lay.cp,
        lay.micro_batch_size,
        lay.recompute,
        lay.pp_schedule,
        lay.virtual_stages,
        lay.num_microbatches,
    )
    hit = job.cache.get(key)
    if hit is None:
        hit = _activation_bytes(job, lay, first_stage=first_stage)
        if len(job.cache) < 20000:
            job.cache[key] = hit
    return hit  # type: ignore[return-value]


def offloaded_activation_bytes(job: Job, lay: Layout) -> float:
    """Bytes of one micro-batch's saved activations that activation offload sends to host
    memory during the forward and brings back for the backward (each way), on the first
    pipeline stage; 0 without offload. The time model prices this traffic on the host link
    (throughput.Setup.activation_offload_bytes)."""
    if not job.activation_offload:
        return 0.0
    a = job.arch
    s_local = job.seq_len / lay.cp
    stage_layers = math.ceil(a.num_layers / lay.pp)
    n_moe = a.moe.moe_layers_in(0, stage_layers) if a.moe is not None else 0
    per_tok = 0.0
    for is_moe, n in ((False, stage_layers - n_moe), (True, n_moe)):
        if n:
            per_tok += n * layer_activation_bytes_per_token(
                a,
                moe_layer=is_moe,
                tp=lay.tp,
                kv_len=int(s_local),
                flash=job.flash_attention,
                recompute=lay.recompute,
                selective=job.fw.selective,
                compiled=job.compile,
                tp_gathered=job.fw.tp_gathered_inputs,
                moe_probs_in_act=job.fw.moe_probs_in_act,
                repeat_kv=job.fw.repeat_kv,
                fused_gated_act=job.fw.fused_gated_act,
            )
    resident = min(1.0, OFFLOAD_RESIDENT_BLOCKS / stage_layers)
    return per_tok * lay.micro_batch_size * s_local * (1.0 - resident)


def _activation_bytes(job: Job, lay: Layout, *, first_stage: bool) -> tuple[int, int]:
    a = job.arch
    fw = job.fw
    s_local = job.seq_len / lay.cp
    tokens = lay.micro_batch_size * s_local
    stage_layers = math.ceil(a.num_layers / lay.pp)
    if first_stage:
        start, stop = 0, stage_layers
        in_flight = lay.in_flight
    else:
        start, stop = a.num_layers - stage_layers, a.num_layers
        in_flight = _last_in_flight(lay)
    n_moe = a.moe.moe_layers_in(start, stop) if a.moe is not None else 0
    n_dense = (stop - start) - n_moe

    def per_token(is_moe: bool, recompute: str, flash: bool) -> float:
        return layer_activation_bytes_per_token(
            a,
            moe_layer=is_moe,
            tp=lay.tp,
            kv_len=int(s_local),
            flash=flash,
            recompute=recompute,
            selective=fw.selective,
            compiled=job.compile,
            tp_gathered=fw.tp_gathered_inputs,
            moe_probs_in_act=fw.moe_probs_in_act,
            repeat_kv=fw.repeat_kv,
            fused_gated_act=fw.fused_gated_act,
        )

    per_tok = 0.0
    transient = 0.0  # one block recomputed for its backward: its dropped tensors reappear
    for is_moe, n in ((False, n_dense), (True, n_moe)):
        if n == 0:
            continue
        stored = per_token(is_moe, lay.recompute, job.flash_attention)
        per_tok += n * stored
        if lay.recompute != "none":
            transient = max(transient, per_token(is_moe, "none", True) - stored)
    resident = 1.0
    if job.activation_offload and stop > start:
        resident = min(1.0, OFFLOAD_RESIDENT_BLOCKS / (stop - start))
    act = per_tok * resident * tokens * in_flight + transient * tokens
    if lay.cp > 1:
        # ring attention: K/V blocks of one layer in send and receive buffers
        _q, k, v, _o, _l = _attn_dims(a)
        act += 2 * 2.0 * (k + v) * tokens / lay.tp
    logits = 0.0
    if first_stage:
        act += 2.0 * a.hidden_size * tokens * in_flight / lay.tp  # embedding output
    if not first_stage or lay.pp == 1:
        logits = loss_bytes_per_logit(job) * tokens * a.vocab_size / lay.tp
        act += 2.0 * a.hidden_size * tokens / lay.tp  # final norm output
    return int(act + logits), int(logits)


# --- model states ---------------------------------------------------------------------------


def _stage_params(job: Job, lay: Layout, *, first_stage: bool) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters of a stage *per GPU before ZeRO sharding*."""
    key = ("stage_params", first_stage, lay.pp, lay.tp, lay.ep)  # memoised per job
    hit = job.cache.get(key)
    if hit is None:
        hit = _stage_params_uncached(job, lay, first_stage=first_stage)
        if len(job.cache) < 20000:
            job.cache[key] = hit
    return hit  # type: ignore[no-any-return]


def _stage_params_uncached(job: Job, lay: Layout, *, first_stage: bool) -> tuple[float, float]:
    a, c = job.arch, job.counts
    k = math.ceil(a.num_layers / lay.pp)
    if first_stage:
        layers, experts = c.layers_range(0, k, a)
        extra = c.embedding
        if lay.pp == 1:
            extra += c.head + c.final_norm
    else:
        layers, experts = c.layers_range(a.num_layers - k, a.num_layers, a)
        head = c.head if c.head else c.embedding  # tied head needs its own copy with PP
        extra = head + c.final_norm
    nonexpert = (layers - experts + extra) / lay.tp
    expert = experts / (lay.tp * lay.ep)
    return nonexpert, expert


def low_precision_copy_bytes(precision: str) -> float:
    """Persistent low-precision GEMM copy of each weight (Transformer Engine style)."""
    if precision == "fp8":
        return FP8_WEIGHT_COPY_BYTES
    if precision == "fp4":
        return FP4_WEIGHT_COPY_BYTES
    return 0.0


def _gathered_bytes(job: Job) -> float:
    """Bytes per parameter of an all-gathered (unsharded) weight."""
    if job.fw.states == "fsdp2":  # float8 / fp4 all-gather of the GEMM weights
        return {"fp8": 1.0, "fp4": FP4_WEIGHT_COPY_BYTES / 2}.get(job.precision, 2.0)
    return 2.0


def _state_bytes(job: Job) -> tuple[float, float, float, float]:
    """Bytes per *trainable* parameter: weights, gradients, master, optimizer."""
    w = 2.0
    if job.fw.states != "fsdp2":
        w += low_precision_copy_bytes(job.precision)
    g = 4.0 if job.grad_dtype == "fp32" else 2.0
    master = 4.0 if job.master_weights else 0.0
    if job.optimizer == "adamw8bit":
        opt = 2.0
    else:
        opt = 8.0 if job.master_weights else 4.0
    return w, g, master, opt


def resolve_layout(job: Job, lay: Layout) -> Layout:
    """``lay`` with the job's pipeline schedule and micro-batch count when it sets none."""
    if lay.pp == 1 or (
        lay.pp_schedule != "1f1b" or lay.virtual_stages != 1 or lay.num_microbatches
    ):
        return lay
    m = job.num_microbatches
    if not m and job.global_batch_size:
        m = max(1, math.ceil(job.global_batch_size / (lay.micro_batch_size * max(1, lay.dp))))
    if not m and job.pp_schedule == "1f1b":
        return lay  # the replacement would equal ``lay`` field for field (no copy to make)
    return replace(
        lay,
        pp_schedule=job.pp_schedule,
        virtual_stages=job.virtual_stages if job.pp_schedule == "interleaved" else 1,
        num_microbatches=m,
    )


SHARED_JOBS = 8  # jobs whose memory memo outlives one request (LRU; ≤ 20,000 entries each)
_SHARED: OrderedDict[Job, dict[tuple[object, ...], Any]] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def with_shared_memo(job: Job) -> Job:
    """``job`` with the memory memo of an equal job sized recently.

    Memory does not depend on the token budget, so requests that differ only in tokens (the
    live page while a customer types) reuse every layout's memory from the last one. The
    memo holds pure results keyed on the layout, so sharing it changes no answer. The
    default batch (``batch_tokens``, set from the token budget) does not change memory
    either: jobs that differ only in it share the memo, and the one entry that depends on
    it (``compute.predicted_mfu``'s) has it in its key.
    """
    shared = replace(job, batch_tokens=0) if job.batch_tokens else job
    with _SHARED_LOCK:
        memo = _SHARED.get(shared)
        if memo is None:
            memo = {}
            _SHARED[shared] = memo
            while len(_SHARED) > SHARED_JOBS:
                _SHARED.popitem(last=False)
        else:
            _SHARED.move_to_end(shared)
    return replace(job, cache=memo)


def memory(job: Job, lay: Layout) -> Memory:
    if lay.pp > 1:
        lay = resolve_layout(job, lay)
    # world size matters only through which parallel dimensions are in use (NCCL groups);
    # the data-parallel size reaches the pipeline only through ``num_microbatches`` (in the
    # key), so requests differing only in node count share entries
    key = (
        lay.sharding,
        lay.shard_group,
        lay.tp,
        lay.pp,
        lay.ep,
        lay.cp,
        lay.dp > 1,
        lay.micro_batch_size,
        lay.recompute,
        lay.offload_optimizer,
        lay.offload_params,
        lay.pp_schedule,
        lay.virtual_stages,
        lay.num_microbatches,
    )
    hit = job.cache.get(key)
    if hit is not None:
        return hit
    m = _memory(job, lay)
    if len(job.cache) < 20000:
        job.cache[key] = m
    return m


def _memory(job: Job, lay: Layout) -> Memory:
    best: Memory | None = None
    stages = (True,) if lay.pp == 1 else (True, False)
    for first in stages:
        m = _memory_stage(job, lay, first_stage=first)
        if best is None or m.total > best.total:
            best = m
    assert best is not None
    return best


# What one stage's memory takes from the layout besides the shard group and the offload
# switches: memoised per job across shard groups, so a figure at another group (the search
# evaluates the same shape kind at many) does only the group's own arithmetic. Every value is
# the one _memory_stage computed inline before (same expressions, same order of operations):
# the parameter split, bytes per state, wrap unit, activations, NCCL groups and the
# framework's figures. A tuple of numbers and booleans (not tracked by the collector).
_StageParts = tuple[
    float, float, float, float, float, float, bool, bool, bool, bool, float, int, int, float
]


def _stage_parts(job: Job, lay: Layout, *, first_stage: bool) -> _StageParts:
    key = (
        "stage",
        first_stage,
        lay.sharding,
        lay.tp,
        lay.pp,
        lay.ep,
        lay.cp,
        lay.dp > 1,
        lay.micro_batch_size,
        lay.recompute,
        lay.pp_schedule,
        lay.virtual_stages,
        lay.num_microbatches,
    )
    hit: _StageParts | None = job.cache.get(key)
    if hit is None:
        fw = job.fw
        nonexp, exp = _stage_params(job, lay, first_stage=first_stage)
        w_b, g_b, m_b, o_b = _state_bytes(job)
        z1 = lay.sharding in ("zero1", "zero2", "zero3")
        z2 = lay.sharding in ("zero2", "zero3")
        z3 = lay.sharding == "zero3"
        fsdp2 = fw.states == "fsdp2" and lay.sharding != "ddp"
        c = job.counts
        unit = c.largest_unit / lay.tp
        if job.arch.moe is not None and c.largest_unit == c.moe_layer:
            unit = (c.moe_layer - c.moe_layer_experts) / lay.tp + c.moe_layer_experts / (
                lay.tp * lay.ep
            )
        act, _logits = activation_bytes(job, lay, first_stage=first_stage)
        # parallel dimensions in use (one NCCL communicator kind each)
        groups = (lay.dp > 1) + (lay.tp > 1) + (lay.pp > 1) + (lay.ep > 1) + (lay.cp > 1)
        nccl = fw.nccl_bytes_per_group * groups
        hit = (
            nonexp,
            exp,
            w_b,
            g_b,
            m_b,
            o_b,
            z1,
            z2,
            z3,
            fsdp2,
            unit,
            act,
            nccl,
            job.lora_params / (lay.tp * lay.pp),
        )
        if len(job.cache) < 20000:
            job.cache[key] = hit
    return hit


def _memory_stage(job: Job, lay: Layout, *, first_stage: bool) -> Memory:
    fw = job.fw
    nonexp, exp, w_b, g_b, m_b, o_b, z1, z2, z3, fsdp2, unit, act, nccl, lora_tp_pp = _stage_parts(
        job, lay, first_stage=first_stage
    )
    d = max(1, lay.shard_group) if lay.sharding != "ddp" else 1
    d_e = max(1, d // lay.ep)

    # parameters per GPU, whole or sharded (bytes per parameter × one of these: what a
    # ``sharded(bytes, shard)`` helper returned, without a closure per call)
    whole = nonexp + exp
    shard = nonexp / d + exp / d_e

    cpu = 0.0
    if job.method == "full":
        if fsdp2 and job.master_weights:
            # the FP32 sharded parameter is the master copy; BF16 exists only gathered
            weights = 0.0 if z3 else w_b * whole
            grads = g_b * shard
        else:
            weights = w_b * (shard if z3 else whole)
            grads = g_b * (shard if (z2 or fsdp2) else whole)
        master = m_b * (shard if z1 else whole)
        optim = o_b * (shard if z1 else whole)
        if job.optimizer_in_backward:
            # each parameter's gradient is consumed by its optimizer step during backward:
            # at most one wrap unit of gradients is live
            grads = min(grads, g_b * unit / (d if (z2 or fsdp2) else 1))
    else:
        # the frozen base: NF4 (QLoRA), FP8 under an FP8 recipe (its transposed copy for the
        # data gradient is made one layer at a time), else BF16; adapters stay BF16 with an
        # FP32 master and optimizer
        base_b = (
            QLORA_BYTES_PER_PARAM
            if job.method == "qlora"
            else (1.0 if job.precision == "fp8" else 2.0)
        )
        weights = base_b * (shard if z3 else whole)
        trainable = lora_tp_pp / (d if z1 else 1)
        weights += 2.0 * trainable
        grads = g_b * trainable
        master = 4.0 * trainable
        optim = o_b * trainable
    if lay.offload_optimizer:
        # ZeRO-Offload: gradients are reduced to the host, where the optimizer steps
        cpu += master + optim + grads
        master = optim = grads = 0.0
    if lay.offload_params and z3:
        cpu += weights
        weights = 0.0
    gather = 0.0
    if z3 and (d > 1 or fsdp2):
        # FSDP2 casts to the gather dtype even on one rank: the BF16 copies exist at d = 1
        base_b = QLORA_BYTES_PER_PARAM if job.method == "qlora" else _gathered_bytes(job)
        gather = unit * (2 * base_b + (g_b if job.method == "full" else 0.0))
        if fsdp2 and lay.pp > 1:
            # with PP, FSDP2 keeps the stage unsharded from forward to backward
            # (reshard_after_forward off) so the micro-batches reuse the gathered weights,
            # and the pipeline defers the gradient reduce-scatter to the last micro-batch:
            # the unsharded gradients accumulate in the reduce dtype (FSDPParam's
            # unsharded_accumulated_grad)
            gather += base_b * (nonexp + exp)
            if job.method == "full":
                gather += g_b * (nonexp + exp)
        if fw.id == "deepspeed":
            gather += 2.0 * min(DS_MAX_LIVE_PARAMS, nonexp + exp) * 0.05  # prefetch bucket
    elif fw.id == "deepspeed" and z1 and d > 1:
        gather = 2.0 * DS_BUCKET_ELEMENTS  # one BF16 reduce bucket
    frag = fw.fragmentation * (act + gather)
    overhead = fw.context_bytes + nccl + gather + frag
    w_i, g_i, m_i, o_i, a_i, ov_i = (
        int(weights),
        int(grads),
        int(master),
        int(optim),
        int(act),
        int(overhead),
    )
    return new_memory(
        weights=w_i,
        gradients=g_i,
        master_weights=m_i,
        optimizer_states=o_i,
        activations=a_i,
        overhead=ov_i,
        context=fw.context_bytes,
        nccl=nccl,
        gather_buffers=int(gather),
        fragmentation=int(frag),
        cpu_offload_per_gpu=int(cpu * CPU_OFFLOAD_FACTOR),
        # Memory.total, set where the parts are at hand (the property's own sum, in its
        # order): every figure's total is read
        total=w_i + g_i + m_i + o_i + a_i + ov_i,
    )


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
