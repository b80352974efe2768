"""Per-GPU memory: model states, activations, framework overhead.

All figures are bytes on the most-loaded GPU (the first or last pipeline stage, whichever
is larger). See docs/sizing.md for the formulas and where each constant comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    # per-request memo of memory() results (layouts repeat across node counts)
    cache: dict[tuple[object, ...], Memory] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

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
        }


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

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.gradients
            + self.master_weights
            + self.optimizer_states
            + self.activations
            + self.overhead
        )

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


def layer_activation_bytes_per_token(
    a: Architecture,
    *,
    moe_layer: bool,
    tp: int,
    kv_len: int,
    flash: bool,
    recompute: str,
) -> float:
    """Bytes stored per token for one transformer block's backward (16-bit activations).

    Korthikanti et al. 2022's breakdown redone for pre-norm, dropout-free, gated-MLP, GQA
    blocks: norm inputs/outputs (sequence-parallel, split by TP), Q/K/V, attention output,
    the two gated-MLP branches and the activation output (split by TP). Without
    FlashAttention the a·s² score and softmax tensors (4 bytes per score) are stored.
    """
    h = a.hidden_size
    if recompute == "full":
        return 2.0 * h / tp  # only the block input (sequence parallel when tp > 1)
    q, k, v, o, latent = _attn_dims(a)
    sp_part = 2.0 * h * (a.norms_per_layer * 2) + 2.0 * latent
    tp_part = 2.0 * (q + k + v) + 2.0 * o + 4.0 * a.num_attention_heads
    if not flash and recompute == "none":
        tp_part += 4.0 * a.num_attention_heads * kv_len
    act_store = recompute == "none"
    gathered = 0.0
    width_per_branch = 3 if a.gated_mlp else 2  # up(+gate) outputs and act output
    if moe_layer and a.moe is not None:
        m = a.moe
        routed = m.experts_per_token
        f = m.expert_intermediate_size
        branches = (width_per_branch - (0 if act_store else 1)) * 2.0 * f
        # routed copies of the token vectors: the dispatcher gathers the whole sequence
        # across TP ranks, so these are not split by TP
        gathered = routed * 2.0 * h
        tp_part += routed * branches + m.shared_experts * branches
        tp_part += 4.0 * m.num_experts  # router logits (fp32)
    else:
        f = a.intermediate_size
        tp_part += (width_per_branch - (0 if act_store else 1)) * 2.0 * f
    return sp_part / tp + tp_part / tp + gathered


def activation_bytes(job: Job, lay: Layout, *, first_stage: bool) -> tuple[int, int]:
    """(activation bytes, logits bytes) for the first or last pipeline stage."""
    a = job.arch
    s_local = job.seq_len / lay.cp
    tokens = lay.micro_batch_size * s_local
    stage_layers = math.ceil(a.num_layers / lay.pp)
    if first_stage:
        start, stop = 0, stage_layers
        in_flight = lay.pp  # 1F1B: the first stage holds pp micro-batches
    else:
        start, stop = a.num_layers - stage_layers, a.num_layers
        in_flight = 1
    n_dense = stop - start
    n_moe = 0
    if a.moe is not None:
        n_dense = max(0, min(stop, a.moe.dense_layers) - start)
        n_moe = (stop - start) - n_dense
    per_tok = 0.0
    worst_full_layer = 0.0
    for is_moe, n in ((False, n_dense), (True, n_moe)):
        if n == 0:
            continue
        per_tok += n * layer_activation_bytes_per_token(
            a,
            moe_layer=is_moe,
            tp=lay.tp,
            kv_len=int(s_local),
            flash=job.flash_attention,
            recompute=lay.recompute,
        )
        if lay.recompute == "full":
            worst_full_layer = max(
                worst_full_layer,
                layer_activation_bytes_per_token(
                    a,
                    moe_layer=is_moe,
                    tp=lay.tp,
                    kv_len=int(s_local),
                    flash=job.flash_attention,
                    recompute="selective",
                )
                - 2.0 * a.hidden_size / lay.tp,
            )
    # full recompute: while one layer is recomputed for its backward, its activations
    # (the selective set; attention scores stay transient) replace its stored input
    act = per_tok * tokens * in_flight + max(0.0, worst_full_layer) * tokens
    logits = 0.0
    if first_stage:
        act += 2.0 * a.hidden_size * tokens * in_flight / lay.tp  # embedding output
    if not first_stage or lay.pp == 1:
        logits = CE_BYTES_PER_LOGIT * tokens * a.vocab_size / lay.tp
        act += 2.0 * a.hidden_size * tokens / lay.tp  # final norm output
    return int(act + logits), int(logits)


# --- model states ---------------------------------------------------------------------------


def _stage_params(job: Job, lay: Layout, *, first_stage: bool) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters of a stage *per GPU before ZeRO sharding*."""
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


def _state_bytes(job: Job) -> tuple[float, float, float, float]:
    """Bytes per *trainable* parameter: weights, gradients, master, optimizer."""
    w = 2.0 + (FP8_WEIGHT_COPY_BYTES if job.precision == "fp8" else 0.0)
    g = 4.0 if job.grad_dtype == "fp32" else 2.0
    master = 4.0 if job.master_weights else 0.0
    if job.optimizer == "adamw8bit":
        opt = 2.0
    else:
        opt = 8.0 if job.master_weights else 4.0
    return w, g, master, opt


def memory(job: Job, lay: Layout) -> Memory:
    # world size matters only through which parallel dimensions are in use (NCCL groups)
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


def _memory_stage(job: Job, lay: Layout, *, first_stage: bool) -> Memory:
    nonexp, exp = _stage_params(job, lay, first_stage=first_stage)
    d = max(1, lay.shard_group) if lay.sharding != "ddp" else 1
    d_e = max(1, d // lay.ep)
    w_b, g_b, m_b, o_b = _state_bytes(job)

    def sharded(bytes_per_param: float, shard: bool) -> float:
        if not shard:
            return bytes_per_param * (nonexp + exp)
        return bytes_per_param * (nonexp / d + exp / d_e)

    z1 = lay.sharding in ("zero1", "zero2", "zero3")
    z2 = lay.sharding in ("zero2", "zero3")
    z3 = lay.sharding == "zero3"
    cpu = 0.0
    if job.method == "full":
        weights = sharded(w_b, z3)
        grads = sharded(g_b, z2)
        master = sharded(m_b, z1)
        optim = sharded(o_b, z1)
    else:
        base_b = QLORA_BYTES_PER_PARAM if job.method == "qlora" else 2.0
        weights = sharded(base_b, z3)
        trainable = job.lora_params / (lay.tp * lay.pp) / (d if z1 else 1)
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
    act, _logits = activation_bytes(job, lay, first_stage=first_stage)
    gather = 0.0
    if z3 and d > 1:
        c = job.counts
        unit = c.largest_unit / lay.tp
        if job.arch.moe is not None and c.largest_unit == c.moe_layer:
            unit = (c.moe_layer - c.moe_layer_experts) / lay.tp + c.moe_layer_experts / (
                lay.tp * lay.ep
            )
        base_b = QLORA_BYTES_PER_PARAM if job.method == "qlora" else w_b
        gather = unit * (2 * base_b + (g_b if job.method == "full" else 0.0))
    groups = sum(1 for x in (lay.dp, lay.tp, lay.pp, lay.ep, lay.cp) if x > 1)
    nccl = NCCL_BYTES_PER_GROUP * groups
    frag = FRAGMENTATION * (act + gather)
    overhead = CUDA_CONTEXT_BYTES + nccl + gather + frag
    return Memory(
        weights=int(weights),
        gradients=int(grads),
        master_weights=int(master),
        optimizer_states=int(optim),
        activations=int(act),
        overhead=int(overhead),
        context=CUDA_CONTEXT_BYTES,
        nccl=nccl,
        gather_buffers=int(gather),
        fragmentation=int(frag),
        cpu_offload_per_gpu=int(cpu * CPU_OFFLOAD_FACTOR),
    )
