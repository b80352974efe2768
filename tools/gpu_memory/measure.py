"""Measure real per-GPU training memory (and step time) of Llama-style models under FSDP2.

Runs on one CUDA GPU (or, for a smoke test, on the CPU with ``--cpu``). Every configuration
trains a Llama-architecture decoder written here (RMSNorm, RoPE, grouped-query attention
through ``scaled_dot_product_attention``, SwiGLU MLP, untied or tied embeddings) wrapped the
way torchtitan-style stacks wrap it:

* activation checkpointing per block: ``none``, ``full`` (the whole block recomputed) or
  ``selective`` (op-level selective checkpointing: attention outputs and every other matmul
  output saved, the rest recomputed);
* optionally ``torch.compile`` per block;
* FSDP2 ``fully_shard`` per block and at the root, parameters kept in FP32 (the master copy),
  gathered in BF16, gradients reduced in FP32; fused AdamW (two FP32 states).

One process, one rank (world size 1: the shard group is the whole model). For each
configuration it runs one warm-up step (the optimizer creates its states), then measures
``--steps`` steps: the allocator's peak allocated and peak reserved bytes over forward,
backward and optimizer step, the memory the device reports in use (context, NCCL and
allocator together), and the mean step time. One JSON object per configuration is appended
to ``--out`` as soon as it is measured, so a run cut short keeps what it finished.

Usage (H200): ``python3 tools/gpu_memory/measure.py --out results.jsonl``
Smoke test here: ``python tools/gpu_memory/measure.py --cpu --only smoke --out /tmp/s.jsonl``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from functools import partial

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

GIB = 1024**3


@dataclass(frozen=True)
class Arch:
    vocab: int
    hidden: int
    ffn: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    rope_theta: float = 500000.0
    # routed experts (0: a dense SwiGLU MLP of width ``ffn``): how many, how many each token
    # goes to, and each expert's SwiGLU width
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0


ARCHS = {
    # shapes from the models' published config.json files (Meta Llama 3.1 / 3.2)
    "llama-3.2-1b": Arch(128256, 2048, 8192, 16, 32, 8, 64, True),
    "llama-3.2-3b": Arch(128256, 3072, 8192, 28, 24, 8, 128, True),
    # Llama 3.1 8B's layer shapes with 16 of its 32 layers (the full model's FP32 states
    # alone, 16 bytes x 8.03e9, leave too little of one 141 GB GPU to measure activations)
    "llama-3.1-8b-16l": Arch(128256, 4096, 14336, 16, 32, 8, 128, False),
    # wider layers on one GPU: Llama 3.1 70B's shapes with 4 of 80 layers, and Llama 3.1
    # 405B's with 1 of 126 layers (embedding tied to the output to leave room)
    "llama-3.1-70b-4l": Arch(128256, 8192, 28672, 4, 64, 8, 128, False),
    "llama-3.1-405b-1l": Arch(128256, 16384, 53248, 1, 128, 8, 128, True),
    # MoE layers from the published config.json files, fewer of them: Qwen3-30B-A3B (128
    # experts of 768, 8 per token; q/k norms left out) and Mixtral 8x7B (8 of 14336, 2 per
    # token)
    "qwen3-30b-a3b-4l": Arch(151936, 2048, 6144, 4, 32, 4, 128, False, 1e6, 128, 8, 768),
    "mixtral-8x7b-2l": Arch(32000, 4096, 14336, 2, 32, 8, 128, False, 1e6, 8, 2, 14336),
    "smoke": Arch(512, 64, 128, 2, 4, 2, 16, False),
    "smoke-moe": Arch(512, 64, 128, 2, 4, 2, 16, False, 500000.0, 8, 2, 32),
}


@dataclass(frozen=True)
class Config:
    id: str
    model: str
    seq: int
    mbs: int
    ac: str  # none | selective | full
    compile: bool = False
    # torchao float8 training recipe for the blocks' linear layers ("tensorwise" or
    # "rowwise"); "" trains every GEMM in BF16. The output projection stays in BF16, as
    # torchtitan-style float8 converters leave it.
    float8: str = ""


CONFIGS = [
    Config("l8b16-s8k-b1-sel", "llama-3.1-8b-16l", 8192, 1, "selective"),
    Config("l8b16-s8k-b1-none", "llama-3.1-8b-16l", 8192, 1, "none"),
    Config("l8b16-s8k-b1-full", "llama-3.1-8b-16l", 8192, 1, "full"),
    Config("l3b-s8k-b2-sel", "llama-3.2-3b", 8192, 2, "selective"),
    Config("l3b-s8k-b2-none", "llama-3.2-3b", 8192, 2, "none"),
    Config("l3b-s8k-b2-full", "llama-3.2-3b", 8192, 2, "full"),
    Config("l1b-s8k-b4-sel", "llama-3.2-1b", 8192, 4, "selective"),
    Config("l1b-s8k-b4-none", "llama-3.2-1b", 8192, 4, "none"),
    Config("l8b16-s4k-b4-sel", "llama-3.1-8b-16l", 4096, 4, "selective"),
    Config("l3b-s32k-b1-full", "llama-3.2-3b", 32768, 1, "full"),
    Config("l3b-s32k-b1-sel", "llama-3.2-3b", 32768, 1, "selective"),
    Config("l8b16-s16k-b1-full", "llama-3.1-8b-16l", 16384, 1, "full"),
    Config("l1b-s16k-b2-full", "llama-3.2-1b", 16384, 2, "full"),
    Config("l8b16-s8k-b1-sel-compile", "llama-3.1-8b-16l", 8192, 1, "selective", True),
    Config("l3b-s8k-b2-none-compile", "llama-3.2-3b", 8192, 2, "none", True),
    Config("l8b16-s8k-b2-sel", "llama-3.1-8b-16l", 8192, 2, "selective"),
    Config("l8b16-s32k-b1-full", "llama-3.1-8b-16l", 32768, 1, "full"),
    Config("l3b-s16k-b1-none", "llama-3.2-3b", 16384, 1, "none"),
    Config("l1b-s32k-b1-none", "llama-3.2-1b", 32768, 1, "none"),
    Config("l8b16-s8k-b1-none-compile", "llama-3.1-8b-16l", 8192, 1, "none", True),
    Config("l8b16-s8k-b1-full-compile", "llama-3.1-8b-16l", 8192, 1, "full", True),
    Config("l1b-s8k-b4-sel-compile", "llama-3.2-1b", 8192, 4, "selective", True),
    Config("l70b4-s8k-b1-sel", "llama-3.1-70b-4l", 8192, 1, "selective"),
    Config("l70b4-s8k-b1-none", "llama-3.1-70b-4l", 8192, 1, "none"),
    Config("l70b4-s8k-b1-full", "llama-3.1-70b-4l", 8192, 1, "full"),
    Config("l70b4-s16k-b1-sel", "llama-3.1-70b-4l", 16384, 1, "selective"),
    Config("l70b4-s8k-b2-sel-compile", "llama-3.1-70b-4l", 8192, 2, "selective", True),
    Config("l405b1-s8k-b1-sel", "llama-3.1-405b-1l", 8192, 1, "selective"),
    Config("l405b1-s8k-b1-none", "llama-3.1-405b-1l", 8192, 1, "none"),
    Config("l405b1-s8k-b1-full", "llama-3.1-405b-1l", 8192, 1, "full"),
    Config("l405b1-s16k-b1-sel", "llama-3.1-405b-1l", 16384, 1, "selective"),
    Config("l405b1-s8k-b2-none-compile", "llama-3.1-405b-1l", 8192, 2, "none", True),
    # float8 (torchao) beside BF16 under torch.compile, in the same run: one BF16 row of each
    # shape is measured again so that every float8 speed-up is a ratio within one machine
    Config("l8b16-s8k-b1-none-compile-r2", "llama-3.1-8b-16l", 8192, 1, "none", True),
    Config(
        "l8b16-s8k-b1-none-compile-fp8tw", "llama-3.1-8b-16l", 8192, 1, "none", True, "tensorwise"
    ),
    Config("l8b16-s8k-b1-none-compile-fp8rw", "llama-3.1-8b-16l", 8192, 1, "none", True, "rowwise"),
    Config(
        "l8b16-s8k-b1-full-compile-fp8tw", "llama-3.1-8b-16l", 8192, 1, "full", True, "tensorwise"
    ),
    Config(
        "l8b16-s8k-b1-sel-compile-fp8tw",
        "llama-3.1-8b-16l",
        8192,
        1,
        "selective",
        True,
        "tensorwise",
    ),
    Config("l8b16-s4k-b2-none-compile", "llama-3.1-8b-16l", 4096, 2, "none", True),
    Config(
        "l8b16-s4k-b2-none-compile-fp8tw", "llama-3.1-8b-16l", 4096, 2, "none", True, "tensorwise"
    ),
    Config("l70b4-s8k-b1-none-compile", "llama-3.1-70b-4l", 8192, 1, "none", True),
    Config(
        "l70b4-s8k-b1-none-compile-fp8tw", "llama-3.1-70b-4l", 8192, 1, "none", True, "tensorwise"
    ),
    Config("l70b4-s8k-b1-none-compile-fp8rw", "llama-3.1-70b-4l", 8192, 1, "none", True, "rowwise"),
    Config(
        "l70b4-s8k-b1-full-compile-fp8tw", "llama-3.1-70b-4l", 8192, 1, "full", True, "tensorwise"
    ),
    Config("l405b1-s8k-b1-none-compile", "llama-3.1-405b-1l", 8192, 1, "none", True),
    Config(
        "l405b1-s8k-b1-none-compile-fp8tw", "llama-3.1-405b-1l", 8192, 1, "none", True, "tensorwise"
    ),
    Config("l3b-s8k-b2-none-compile-r2", "llama-3.2-3b", 8192, 2, "none", True),
    Config("l3b-s8k-b2-none-compile-fp8tw", "llama-3.2-3b", 8192, 2, "none", True, "tensorwise"),
    Config("l1b-s8k-b4-none-compile", "llama-3.2-1b", 8192, 4, "none", True),
    Config("l1b-s8k-b4-none-compile-fp8tw", "llama-3.2-1b", 8192, 4, "none", True, "tensorwise"),
    Config("l8b16-s32k-b1-full-compile", "llama-3.1-8b-16l", 32768, 1, "full", True),
    Config(
        "l8b16-s32k-b1-full-compile-fp8tw", "llama-3.1-8b-16l", 32768, 1, "full", True, "tensorwise"
    ),
    # routed experts on one GPU (EP 1): one grouped GEMM per projection for all experts
    Config("q30a3-4l-s8k-b1-none", "qwen3-30b-a3b-4l", 8192, 1, "none"),
    Config("q30a3-4l-s8k-b1-full", "qwen3-30b-a3b-4l", 8192, 1, "full"),
    Config("q30a3-4l-s4k-b1-none", "qwen3-30b-a3b-4l", 4096, 1, "none"),
    Config("q30a3-4l-s8k-b2-none", "qwen3-30b-a3b-4l", 8192, 2, "none"),
    Config("q30a3-4l-s8k-b1-none-compile", "qwen3-30b-a3b-4l", 8192, 1, "none", True),
    Config("mix-2l-s8k-b1-none", "mixtral-8x7b-2l", 8192, 1, "none"),
    Config("mix-2l-s8k-b1-full", "mixtral-8x7b-2l", 8192, 1, "full"),
    Config("smoke", "smoke", 128, 2, "selective"),
    Config("smoke-sel-compile", "smoke", 128, 2, "selective", True),
    Config("smoke-full-compile", "smoke", 128, 2, "full", True),
    Config("smoke-fp8", "smoke", 128, 2, "none", False, "tensorwise"),
    Config("smoke-fp8-sel-compile", "smoke", 128, 2, "selective", True, "rowwise"),
    Config("smoke-moe", "smoke-moe", 128, 2, "none"),
    Config("smoke-moe-full-compile", "smoke-moe", 128, 2, "full", True),
]


def rope_table(a: Arch, seq: int, device: torch.device) -> torch.Tensor:
    inv = 1.0 / (
        a.rope_theta ** (torch.arange(0, a.head_dim, 2, device=device).float() / a.head_dim)
    )
    ang = torch.outer(torch.arange(seq, device=device).float(), inv)
    return torch.polar(torch.ones_like(ang), ang)  # complex64 (seq, head_dim/2)


def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(xc * table[None, :, None, :]).flatten(3)
    return out.type_as(x)


class Experts(nn.Module):
    """Routed experts without expert parallelism (torchtitan-style, EP 1): softmax router,
    top-k renormalised, tokens sorted by expert, and each SwiGLU projection of every expert
    as one grouped GEMM over the sorted tokens; the outputs weighted and added back."""

    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        self.router = nn.Linear(a.hidden, a.experts, bias=False)
        # (experts, out, in), as nn.Linear keeps its weight
        self.w1 = nn.Parameter(torch.empty(a.experts, a.expert_ffn, a.hidden))
        self.w3 = nn.Parameter(torch.empty(a.experts, a.expert_ffn, a.hidden))
        self.w2 = nn.Parameter(torch.empty(a.experts, a.hidden, a.expert_ffn))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a = self.a
        x = h.reshape(-1, a.hidden)
        probs = self.router(x).float().softmax(dim=-1)
        weight, expert = probs.topk(a.top_k, dim=-1)
        weight = (weight / weight.sum(dim=-1, keepdim=True)).to(x.dtype)
        order = expert.flatten().argsort(stable=True)
        offs = torch.bincount(expert.flatten(), minlength=a.experts).cumsum(0).to(torch.int32)
        token = order // a.top_k
        xs = x[token]
        mm = GROUPED_MM
        up = F.silu(mm(xs, self.w1.transpose(-2, -1), offs=offs)) * mm(
            xs, self.w3.transpose(-2, -1), offs=offs
        )
        out = mm(up, self.w2.transpose(-2, -1), offs=offs) * weight.flatten()[order, None]
        return torch.zeros_like(x).index_add(0, token, out).view_as(h)


# PyTorch's grouped GEMM: the public name where this release has one
GROUPED_MM = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


class Block(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
        self.attention_norm = nn.RMSNorm(a.hidden, eps=1e-5)
        self.wq = nn.Linear(a.hidden, q, bias=False)
        self.wk = nn.Linear(a.hidden, kv, bias=False)
        self.wv = nn.Linear(a.hidden, kv, bias=False)
        self.wo = nn.Linear(q, a.hidden, bias=False)
        self.ffn_norm = nn.RMSNorm(a.hidden, eps=1e-5)
        if a.experts:
            self.experts = Experts(a)
        else:
            self.w1 = nn.Linear(a.hidden, a.ffn, bias=False)
            self.w3 = nn.Linear(a.hidden, a.ffn, bias=False)
            self.w2 = nn.Linear(a.ffn, a.hidden, bias=False)

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        a = self.a
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, s, a.heads, a.head_dim)
        k = self.wk(h).view(b, s, a.kv_heads, a.head_dim)
        v = self.wv(h).view(b, s, a.kv_heads, a.head_dim)
        q, k = rotate(q, table), rotate(k, table)
        rep = a.heads // a.kv_heads
        # keys and values repeated to every query head before attention
        k = (
            k[:, :, :, None, :]
            .expand(b, s, a.kv_heads, rep, a.head_dim)
            .reshape(b, s, a.heads, a.head_dim)
        )
        v = (
            v[:, :, :, None, :]
            .expand(b, s, a.kv_heads, rep, a.head_dim)
            .reshape(b, s, a.heads, a.head_dim)
        )
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
        h = self.ffn_norm(x)
        if self.a.experts:
            return x + self.experts(h)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Checkpointed(nn.Module):
    """A block whose forward is recomputed in backward, wholly or op by op."""

    def __init__(self, block: nn.Module, selective: bool) -> None:
        super().__init__()
        self.block = block
        self.selective = selective

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        if self.selective:
            return checkpoint(
                self.block,
                x,
                table,
                use_reentrant=False,
                context_fn=selective_contexts,
                preserve_rng_state=False,
            )
        return checkpoint(self.block, x, table, use_reentrant=False, preserve_rng_state=False)


# the matmuls the selective policy counts: BF16 ``mm`` and float8's scaled matmul
MATMULS = {torch.ops.aten.mm.default} | (
    {torch.ops.aten._scaled_mm.default} if hasattr(torch.ops.aten, "_scaled_mm") else set()
)


def _save_ops() -> set[object]:
    aten = torch.ops.aten
    ops: set[object] = {aten.mm.default, aten.max.default, *MATMULS}
    for name in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    ):
        if hasattr(aten, name):
            ops.add(getattr(aten, name).default)
    if hasattr(torch.ops, "_c10d_functional"):
        ops.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)
    return ops


SAVE = _save_ops()


def _policy(
    meta: dict[str, int], ctx: object, func: object, *args: object, **kwargs: object
) -> CheckpointPolicy:
    mode = "recompute" if getattr(ctx, "is_recompute", False) else "forward"
    if func in MATMULS:
        meta[mode] += 1
        # every other matmul output is recomputed rather than kept
        if meta[mode] % 2 == 0:
            return CheckpointPolicy.PREFER_RECOMPUTE
    return CheckpointPolicy.MUST_SAVE if func in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


def selective_contexts() -> object:
    return create_selective_checkpoint_contexts(partial(_policy, defaultdict(int)))


class Model(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        self.tok_embeddings = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = nn.RMSNorm(a.hidden, eps=1e-5)
        self.output = nn.Linear(a.hidden, a.vocab, bias=False)
        if a.tied:
            self.output.weight = self.tok_embeddings.weight
        self.table: torch.Tensor | None = None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        assert self.table is not None
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.table)
        return self.output(self.norm(x))


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in m.parameters()}.values())


def build(cfg: Config, device: torch.device) -> tuple[Model, torch.optim.Optimizer, int]:
    a = ARCHS[cfg.model]
    with torch.device("meta"):
        model = Model(a)
    n_params = count_params(model)
    if cfg.float8:
        # imported here: torchao is carried to the GPU machine only for the float8 runs
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        f8 = Float8LinearConfig.from_recipe_name(cfg.float8)
        if device.type == "cpu":  # the smoke test: no float8 matmul on a CPU, emulate it
            f8 = replace(f8, emulate=True)
        convert_to_float8_training(model.layers, config=f8)
    for i, blk in enumerate(model.layers):
        if cfg.ac != "none":
            blk = Checkpointed(blk, selective=cfg.ac == "selective")
        if cfg.compile:
            blk = torch.compile(blk, fullgraph=False)
        model.layers[i] = blk
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.layers:
        fully_shard(blk, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device=device)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    model.table = rope_table(a, cfg.seq, device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=3e-4, weight_decay=0.1, fused=device.type == "cuda"
    )
    return model, opt, n_params


def loss_of(model: Model, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on an FP32 upcast of the logits; the BF16 logits are not kept for the
    backward pass (torchtitan-style train loops drop them before ``loss.backward()``)."""
    logits = model(tokens[:, :-1]).flatten(0, 1).float()
    return F.cross_entropy(logits, tokens[:, 1:].flatten(0, 1))


def step(model: Model, opt: torch.optim.Optimizer, tokens: torch.Tensor) -> None:
    loss_of(model, tokens).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def measure(cfg: Config, device: torch.device, steps: int) -> dict[str, object]:
    a = ARCHS[cfg.model]
    cuda = device.type == "cuda"
    # every configuration compiles afresh: without this, dynamo's per-function recompile
    # limit (8) is reached after a few shapes and later "compile" runs silently run eager
    torch._dynamo.reset()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t_build = time.perf_counter()
    model, opt, n_params = build(cfg, device)
    tokens = torch.randint(0, a.vocab, (cfg.mbs, cfg.seq + 1), device=device)
    t0 = time.perf_counter()
    step(model, opt, tokens)  # warm-up: optimizer states created, kernels compiled
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t_warm = time.perf_counter() - t0
    t1 = time.perf_counter()
    for _ in range(steps):
        step(model, opt, tokens)
    if cuda:
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t1) / steps
    out: dict[str, object] = {
        "id": cfg.id,
        **asdict(cfg),
        "arch": asdict(a),
        "params": n_params,
        "step_s": round(dt, 4),
        "tokens_per_s": round(cfg.mbs * cfg.seq / dt, 1),
        "warmup_s": round(t_warm, 2),
        "build_s": round(t0 - t_build, 2),
    }
    if cuda:
        free, total = torch.cuda.mem_get_info()
        out.update(
            max_allocated_gib=round(torch.cuda.max_memory_allocated() / GIB, 3),
            max_reserved_gib=round(torch.cuda.max_memory_reserved() / GIB, 3),
            device_used_gib=round((total - free) / GIB, 3),
            reserved_now_gib=round(torch.cuda.memory_reserved() / GIB, 3),
            device_total_gib=round(total / GIB, 3),
            inactive_split_peak_gib=round(
                torch.cuda.memory_stats().get("inactive_split_bytes.all.peak", 0) / GIB, 3
            ),
        )
        # what forward alone keeps for backward: allocated after forward minus before
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        loss = loss_of(model, tokens)
        torch.cuda.synchronize()
        out["after_forward_delta_gib"] = round((torch.cuda.memory_allocated() - base) / GIB, 3)
        out["states_allocated_gib"] = round(base / GIB, 3)
        loss.backward()
        opt.zero_grad(set_to_none=True)
        del loss
    del model, opt, tokens
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", help="configuration ids (default: every GPU one)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=480.0, help="start no run after this")
    ap.add_argument("--cpu", action="store_true", help="smoke test on the CPU (gloo)")
    args = ap.parse_args()
    device = torch.device("cpu") if args.cpu else torch.device("cuda", 0)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo" if args.cpu else "nccl", rank=0, world_size=1)
    wanted = args.only or [c.id for c in CONFIGS if not c.id.startswith("smoke")]
    start = time.perf_counter()
    env = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
    }
    for cfg in CONFIGS:
        if cfg.id not in wanted:
            continue
        if time.perf_counter() - start > args.budget_s:
            row: dict[str, object] = {"id": cfg.id, "skipped": "time budget spent"}
        else:
            try:
                row = measure(cfg, device, args.steps)
            except torch.cuda.OutOfMemoryError as e:
                row = {"id": cfg.id, **asdict(cfg), "oom": str(e)[:300]}
            except Exception as e:  # noqa: BLE001 - record and go on to the next run
                row = {"id": cfg.id, **asdict(cfg), "error": f"{type(e).__name__}: {e}"[:600]}
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        row.update(env, elapsed_s=round(time.perf_counter() - start, 1))
        print(json.dumps(row), flush=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
