"""Per-GPU memory: model states, activations, framework overhead.

All figures are bytes on the most-loaded GPU (the first or last pipeline stage, whichever
is larger). See docs/sizing.md for the formulas and where each constant comes from. The
types and constants are in ``app.sizing.jobs``, the activation model in
``app.sizing.activations``; both are re-exported here (callers import them from this
module).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import replace

from app.sizing.activations import (
    activation_bytes,
    layer_activation_bytes_per_token,
    loss_bytes_per_logit,
    offloaded_activation_bytes,
)
from app.sizing.jobs import (
    ACT_SPREAD,
    CE_BYTES_PER_LOGIT,
    CHUNKED_CE_BYTES_PER_LOGIT,
    CPU_OFFLOAD_FACTOR,
    CPU_USABLE_FRACTION,
    CUDA_CONTEXT_BYTES,
    DS_BUCKET_ELEMENTS,
    DS_MAX_LIVE_PARAMS,
    FP4_WEIGHT_COPY_BYTES,
    FP8_WEIGHT_COPY_BYTES,
    FP32_LOSS_PEAK_BYTES_PER_LOGIT,
    FRAGMENTATION,
    FRAMEWORKS,
    GIB,
    MAX_RANGE_RATIO,
    MODEL_SPREAD_HIGH,
    MODEL_SPREAD_LOW,
    NCCL_BYTES_PER_GROUP,
    OFFLOAD_RESIDENT_BLOCKS,
    OVERHEAD_SPREAD,
    PP_SCHEDULES,
    QLORA_BYTES_PER_PARAM,
    SAFETY_MARGIN,
    Framework,
    Job,
    Layout,
    Memory,
    fit_verdict,
    memory_range,
    new_memory,
    range_spread,
    scaled_range,
)
from app.sizing.memo import Memo

__all__ = [
    "fit_verdict",
    "memory_range",
    "range_spread",
    "scaled_range",
    "ACT_SPREAD",
    "CE_BYTES_PER_LOGIT",
    "CHUNKED_CE_BYTES_PER_LOGIT",
    "CPU_OFFLOAD_FACTOR",
    "CPU_USABLE_FRACTION",
    "CUDA_CONTEXT_BYTES",
    "DS_BUCKET_ELEMENTS",
    "DS_MAX_LIVE_PARAMS",
    "FP32_LOSS_PEAK_BYTES_PER_LOGIT",
    "FP4_WEIGHT_COPY_BYTES",
    "FP8_WEIGHT_COPY_BYTES",
    "FRAGMENTATION",
    "FRAMEWORKS",
    "Framework",
    "GIB",
    "Job",
    "Layout",
    "MAX_RANGE_RATIO",
    "MODEL_SPREAD_HIGH",
    "MODEL_SPREAD_LOW",
    "Memory",
    "NCCL_BYTES_PER_GROUP",
    "OFFLOAD_RESIDENT_BLOCKS",
    "OVERHEAD_SPREAD",
    "PP_SCHEDULES",
    "QLORA_BYTES_PER_PARAM",
    "SAFETY_MARGIN",
    "activation_bytes",
    "layer_activation_bytes_per_token",
    "loss_bytes_per_logit",
    "new_memory",
    "offloaded_activation_bytes",
]


# --- model states ---------------------------------------------------------------------------


def _stage_params(job: Job, lay: Layout, *, first_stage: bool) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters of a stage *per GPU before ZeRO sharding*."""
    key = ("stage_params", first_stage, lay.pp, lay.tp, lay.ep)  # memoised per job
    hit = job.cache.get(key)
    if hit is None:
        hit = _stage_params_uncached(job, lay, first_stage=first_stage)
        job.cache.put(key, hit)
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
    expert = experts / _expert_split(lay)
    return nonexpert, expert


def _expert_split(lay: Layout) -> int:
    """How many ways a stage's routed experts are split. With expert parallelism they run
    without tensor parallelism (ETP = 1: Megatron's ``--expert-tensor-parallel-size 1``, which
    the launch file sets, and torchtitan's default ``expert_tensor_parallel_degree = 1``), so
    each GPU holds whole experts, 1/ep of the stage's; without it, TP splits them like any
    MLP."""
    return lay.ep if lay.ep > 1 else lay.tp


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
_SHARED: OrderedDict[Job, Memo] = OrderedDict()
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
            memo = Memo()
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
        lay.offload_optimizer,
        lay.offload_params,
        *_split_key(lay),
    )
    hit = job.cache.get(key)
    if hit is not None:
        return hit
    m = _memory(job, lay)
    job.cache.put(key, m)
    return m


def _split_key(lay: Layout) -> tuple[object, ...]:
    """What a layout's memory depends on besides its sharding, shard group and offload."""
    return (lay.tp, lay.pp, lay.ep, lay.cp, lay.dp > 1, lay.micro_batch_size, lay.recompute,
            lay.pp_schedule, lay.virtual_stages, lay.num_microbatches)  # fmt: skip


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
    key = ("stage", first_stage, lay.sharding, *_split_key(lay))
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
                _expert_split(lay)
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
        job.cache.put(key, hit)
    return hit


def _memory_stage(job: Job, lay: Layout, *, first_stage: bool) -> Memory:
    fw = job.fw
    nonexp, exp, w_b, g_b, m_b, o_b, z1, z2, z3, fsdp2, unit, act, nccl, lora_tp_pp = _stage_parts(
        job, lay, first_stage=first_stage
    )
    d = max(1, lay.shard_group) if lay.sharding != "ddp" else 1
    # the experts' shard group: the ranks of the dense one's TP groups holding the same
    # experts (with EP, ETP = 1: d * tp / ep of them; without, the dense group itself)
    d_e = max(1, d * lay.tp // _expert_split(lay)) if lay.sharding != "ddp" else 1

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
    # Memory's fields in their order; then Memory.total, set where the parts are at hand
    # (the property's own sum, in its order): every figure's total is read
    return new_memory(
        weights=w_i, gradients=g_i, master_weights=m_i, optimizer_states=o_i, activations=a_i,
        overhead=ov_i, context=fw.context_bytes, nccl=nccl, gather_buffers=int(gather),
        fragmentation=int(frag), cpu_offload_per_gpu=int(cpu * CPU_OFFLOAD_FACTOR),
        total=w_i + g_i + m_i + o_i + a_i + ov_i,
    )  # fmt: skip
