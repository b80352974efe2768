"""Activation memory per GPU: what a layer saves for the backward pass, by recompute mode,
framework and parallel layout, the logits / loss buffer, pipeline in-flight micro-batches
and activation offload (docs/sizing.md states the formulas)."""

from __future__ import annotations

import math
from typing import NamedTuple

from app.sizing.jobs import (
    CE_BYTES_PER_LOGIT,
    CHUNKED_CE_BYTES_PER_LOGIT,
    OFFLOAD_RESIDENT_BLOCKS,
    Job,
    Layout,
)
from app.sizing.params import Architecture, MoE
from app.sizing.profiles import profile

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


def _sac_op_bytes_per_token(
    a: Architecture, moe: MoE | None, tp: int, grouped_experts: bool = True
) -> float:
    """Op-level SAC: block input, attention output + FP32 log-sum-exp, every other matmul.

    The policy saves the outputs of the ops on its list (``aten.mm``, attention, the
    reduce-scatter); the routed experts run as one grouped GEMM (``aten._grouped_mm``),
    which is not on it, so their outputs and the dispatched token copies are recomputed
    for the backward like any other op. torchtitan's op list (models/qwen3 and
    deepseek_v3 parallelize.py) names no grouped GEMM, and its graph_trainer experiment
    adds ``_grouped_mm`` to the default save ops only as a "fair baseline" to compare
    against. Measured: torchtitan's Qwen3-30B-A3B on 8 x B200 (FSDP 8, micro-batch 8 x
    8k, op SAC, mlc-ai/pith-train issue 79) peaked at 141.8 GiB, which keeping the
    experts' tensors would put above 400 GiB. Shared experts are plain linears (every
    other one kept, like a dense MLP's); the router's logits are kept.

    ``grouped_experts`` off (HF modelling code loops over the experts, one linear each):
    the experts' matmuls are ``aten.mm`` like a dense MLP's, so every other one is kept
    for each routed copy, with the dispatched token copies."""
    h = a.hidden_size
    q, _k, v, o, latent = _attn_dims(a)
    sp_part = 2.0 * h + 2.0 * latent
    tp_part = 2.0 * o + 4.0 * a.num_attention_heads + 2.0 * (q + v)
    gathered = 0.0
    if moe is not None:
        kept = moe.shared_experts
        if not grouped_experts:
            kept += moe.experts_per_token
            gathered = moe.experts_per_token * 2.0 * h  # dispatched token copies
        tp_part += kept * 2.0 * (moe.expert_intermediate_size + h)
        tp_part += 4.0 * moe.num_experts
    else:
        tp_part += 2.0 * (a.intermediate_size + h)
    return sp_part / tp + tp_part / tp + gathered


class Stack(NamedTuple):
    """What the training stack's code saves for the backward pass (the fields below)."""

    selective: str = "attention"
    compiled: bool = False
    tp_gathered: bool = False
    moe_probs_in_act: bool = False
    repeat_kv: bool = False
    fused_gated_act: bool = True
    grouped_experts: bool = True

    @classmethod
    def of(cls, job: Job) -> Stack:
        fw = job.fw
        return cls(fw.selective, job.compile, fw.tp_gathered_inputs, fw.moe_probs_in_act,
                   fw.repeat_kv, fw.fused_gated_act, profile(fw.id).grouped_gemm)  # fmt: skip


def layer_activation_bytes_per_token(
    a: Architecture,
    stack: Stack,
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
    selective, compiled, tp_gathered, moe_probs_in_act, repeat_kv, fused_gated_act, grouped = stack
    h = a.hidden_size
    if recompute == "full":
        return 2.0 * h / tp  # only the block input (sequence parallel when tp > 1)
    q, k, v, o, latent = _attn_dims(a)
    moe = a.moe if (moe_layer and a.moe is not None) else None
    if recompute == "selective" and selective == "op":
        # a policy never keeps more than running without recomputation
        return min(
            _sac_op_bytes_per_token(a, moe, tp, grouped),
            layer_activation_bytes_per_token(
                a, stack, moe_layer=moe_layer, tp=tp, kv_len=kv_len, flash=flash, recompute="none"
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
        job.cache.put(key, hit)
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
                Stack.of(job),
                moe_layer=is_moe,
                tp=lay.tp,
                kv_len=int(s_local),
                flash=job.flash_attention,
                recompute=lay.recompute,
            )
    resident = min(1.0, OFFLOAD_RESIDENT_BLOCKS / stage_layers)
    return per_tok * lay.micro_batch_size * s_local * (1.0 - resident)


def _activation_bytes(job: Job, lay: Layout, *, first_stage: bool) -> tuple[int, int]:
    a = job.arch
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
    stack, kv_len = Stack.of(job), int(s_local)

    def per_token(is_moe: bool, recompute: str, flash: bool) -> float:
        return layer_activation_bytes_per_token(
            a, stack, moe_layer=is_moe, tp=lay.tp, kv_len=kv_len, flash=flash, recompute=recompute
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
