"""Architecture description and exact parameter counting.

Counts follow the reference implementations (Llama / Qwen / Mistral / Mixtral / Gemma 2 /
DeepSeek-V3): bias-free linear layers unless ``qkv_bias``; RMSNorm weights of size
``hidden_size`` (``norms_per_layer`` per block, plus one final norm); gated (SwiGLU/GeGLU)
MLP with three matrices; untied output head unless ``tie_embeddings``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def pick(src: object, names: tuple[str, ...]) -> dict[str, Any]:
    """``src``'s values of these fields, by name (a JSON shape or a type with the same
    field names)."""
    return {n: getattr(src, n) for n in names}


@dataclass(frozen=True)
class MoE:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_experts: int = 0
    dense_layers: int = 0  # leading dense (non-MoE) layers, DeepSeek style
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias / gpt-oss router bias
    moe_every: int = 1  # Llama 4 interleave_moe_layer_step: layer i is MoE if (i+1) % k == 0
    expert_bias: bool = False  # gpt-oss: biases on the experts' up/gate and down projections

    def is_moe_layer(self, index: int) -> bool:
        return index >= self.dense_layers and (index + 1) % self.moe_every == 0

    def moe_layers_in(self, start: int, stop: int) -> int:
        """How many of blocks ``start..stop-1`` are MoE blocks."""
        if self.moe_every == 1:
            return max(0, (stop - start) - max(0, min(stop, self.dense_layers) - start))
        return sum(1 for i in range(start, stop) if self.is_moe_layer(i))


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention."""

    q_lora_rank: int  # 0 = plain query projection
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Architecture:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    tie_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    gated_mlp: bool = True
    moe: MoE | None = None
    mla: MLA | None = None
    o_bias: bool = False  # bias on the attention output projection (gpt-oss)
    attention_sinks: bool = False  # one learned sink logit per head and layer (gpt-oss)
    # local attention: ``sliding_window`` tokens (sliding window or chunked attention) on
    # ``local_layer_fraction`` of the layers (gpt-oss: 128 on every other layer; Llama 4:
    # 8192-token chunks on 3 of 4 layers). Changes attention FLOPs and, without
    # FlashAttention, the stored score matrices; not the parameter count.
    sliding_window: int = 0
    local_layer_fraction: float = 0.0

    def mean_kv_len(self, seq_len: int) -> float:
        """Average number of keys a query attends to over all layers (causal)."""
        full = seq_len / 2.0
        if not self.sliding_window or not self.local_layer_fraction:
            return full
        local = min(float(self.sliding_window), full)
        f = self.local_layer_fraction
        return f * local + (1.0 - f) * full


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int
    embedding: int  # input embedding
    head: int  # output projection (0 when tied)
    final_norm: int
    dense_layer: int  # one dense transformer block
    moe_layer: int  # one MoE block (0 without MoE)
    moe_layer_experts: int  # routed-expert part of one MoE block
    largest_unit: int  # largest FSDP wrap unit (a block, or the embedding/head)

    def layer(self, index: int, arch: Architecture) -> int:
        if arch.moe is None or not arch.moe.is_moe_layer(index):
            return self.dense_layer
        return self.moe_layer

    def layers_range(self, start: int, stop: int, arch: Architecture) -> tuple[int, int]:
        """(all params, routed-expert params) of blocks ``start..stop-1``."""
        if arch.moe is None:
            return (stop - start) * self.dense_layer, 0
        moe = arch.moe.moe_layers_in(start, stop)
        dense = (stop - start) - moe
        return (
            dense * self.dense_layer + moe * self.moe_layer,
            moe * self.moe_layer_experts,
        )


def attention_params(a: Architecture) -> int:
    h = a.hidden_size
    if a.mla is not None:
        m = a.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        heads = a.num_attention_heads
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk
        else:
            q = h * heads * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = heads * m.v_head_dim * h
        return q + kv + o
    qd = a.num_attention_heads * a.head_dim
    kvd = a.num_kv_heads * a.head_dim
    p = h * qd + 2 * h * kvd + qd * h
    if a.qkv_bias:
        p += qd + 2 * kvd
    if a.qk_norm:
        p += 2 * a.head_dim
    if a.o_bias:
        p += h
    if a.attention_sinks:
        p += a.num_attention_heads
    return p


def mlp_params(hidden: int, inter: int, gated: bool) -> int:
    return (3 if gated else 2) * hidden * inter


def count(a: Architecture) -> ParamCounts:
    h = a.hidden_size
    attn = attention_params(a)
    norms = a.norms_per_layer * h
    dense_layer = attn + norms + mlp_params(h, a.intermediate_size, a.gated_mlp)
    embedding = a.vocab_size * h
    head = 0 if a.tie_embeddings else a.vocab_size * h
    final_norm = h
    if a.moe is None:
        moe_layer = moe_experts = 0
        n_dense, n_moe = a.num_layers, 0
        active_layers = dense_layer * a.num_layers
    else:
        m = a.moe
        expert = mlp_params(h, m.expert_intermediate_size, a.gated_mlp)
        if m.expert_bias:
            expert += (2 if a.gated_mlp else 1) * m.expert_intermediate_size + h
        router = m.num_experts * h + (m.num_experts if m.router_bias else 0)
        shared = m.shared_experts * expert
        moe_experts = m.num_experts * expert
        moe_layer = attn + norms + router + shared + moe_experts
        n_moe = m.moe_layers_in(0, a.num_layers)
        n_dense = a.num_layers - n_moe
        active_moe = moe_layer - (m.num_experts - m.experts_per_token) * expert
        active_layers = n_dense * dense_layer + n_moe * active_moe
    total = embedding + head + final_norm + n_dense * dense_layer + n_moe * moe_layer
    active = embedding + head + final_norm + active_layers
    largest = max(dense_layer if n_dense else 0, moe_layer, embedding, head)
    return ParamCounts(
        total=total,
        active=active,
        embedding=embedding,
        head=head,
        final_norm=final_norm,
        dense_layer=dense_layer,
        moe_layer=moe_layer,
        moe_layer_experts=moe_experts,
        largest_unit=largest,
    )


def derive_architecture(params: float) -> Architecture:
    """A plausible Llama-3-style dense architecture with about ``params`` parameters.

    Hidden size follows the usual depth/width ratios (h ≈ 128·L·0.8); the layer count is then
    solved for, so the derived model lands within a few per cent of the requested size.
    """
    vocab = 128256
    best: Architecture | None = None
    best_err = math.inf
    for h in range(1024, 32768 + 1, 512):
        heads = max(8, h // 128)
        kv = 8 if heads >= 8 else heads
        ffn = int(math.ceil(h * 3.5 / 256) * 256)
        per_layer = 2 * h * h + 2 * h * (kv * 128) + 3 * h * ffn + 2 * h
        fixed = 2 * vocab * h + h
        layers = round((params - fixed) / per_layer)
        if layers < 2:
            continue
        # keep the aspect ratio in the range real models use (h/L ≈ 50..200)
        ratio = h / layers
        if not 40 <= ratio <= 220:
            continue
        # (vocabulary, hidden, FFN, layers, heads, KV heads, head width)
        arch = Architecture(vocab, h, ffn, layers, heads, kv, 128)
        err = abs(count(arch).total - params) / params + abs(math.log(ratio / 110)) * 0.02
        if err < best_err:
            best, best_err = arch, err
    if best is None:  # tiny models: shrink the vocabulary side
        h = 512
        layers = max(2, round(params / (12 * h * h)))
        best = Architecture(32000, h, 1536, layers, 8, 8, 64)
    return best
