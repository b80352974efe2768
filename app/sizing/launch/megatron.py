"""Megatron-LM (Megatron-Core 0.19): a launch script with the flags, one ``torchrun`` per node.

Megatron has no model registry: every architecture, preset or custom, is given by its
dimensions as flags, so any dense or MoE transformer the engine knows can be written. The
script runs ``pretrain_gpt.py`` from a Megatron-LM checkout; data and tokenizer flags are
the customer's (``--mock-data`` until then).
"""

from __future__ import annotations

import shlex

from app.sizing.launch.errors import N_, LaunchError
from app.sizing.launch.files import LaunchFile, comment, launch_hosts
from app.sizing.launch.plan import RDZV_PORT, Plan
from app.sizing.stacks import MEGATRON_CORE

NAME = "Megatron-LM"
VERSION = f"core_r{MEGATRON_CORE}"
SCRIPT = "launch_megatron.sh"


def check(p: Plan) -> None:
    if p.method != "full":
        raise LaunchError(
            "megatron_no_lora",
            N_(
                "This layout trains LoRA adapters (%(method)s); Megatron-LM's pretraining "
                "script trains every weight. DeepSpeed and accelerate run LoRA through PEFT."
            ),
            {"method": p.method},
            ("deepspeed", "accelerate"),
        )
    if p.optimizer != "adamw":
        raise LaunchError(
            "megatron_optimizer",
            N_(
                "This layout was sized with an 8-bit AdamW; Megatron-LM's optimizers keep "
                "32-bit state."
            ),
            None,
            ("deepspeed", "accelerate"),
        )
    if p.precision == "fp4" and not p.blackwell:
        raise LaunchError(
            "megatron_fp4_blackwell_only",
            N_(
                "This layout trains in FP4 on %(name)s; Megatron-LM's FP4 recipes run on "
                "NVIDIA Blackwell GPUs (Transformer Engine)."
            ),
            {"name": p.sku_name},
        )
    if p.offload_params:
        raise LaunchError(
            "megatron_no_param_offload",
            N_(
                "This layout keeps the parameters in CPU memory; Megatron-LM offloads the "
                "optimizer only."
            ),
            None,
            ("torchtitan", "deepspeed", "accelerate"),
        )
    if p.sharding == "zero3" and p.dp_replicate > 1:
        raise LaunchError(
            "megatron_no_hybrid_fsdp",
            N_(
                "This layout shards the model over %(shard)s GPUs and keeps %(copies)s copies; "
                "the exporter writes Megatron-FSDP over all data-parallel ranks only."
            ),
            {"shard": p.dp_shard, "copies": p.dp_replicate},
            ("torchtitan", "deepspeed"),
        )
    if p.pp > 1 and p.pp_schedule == "gpipe":
        raise LaunchError(
            "megatron_no_gpipe",
            N_(
                "This layout uses a GPipe pipeline; Megatron-LM runs 1F1B and interleaved "
                "schedules only."
            ),
            None,
            ("torchtitan",),
        )
    if p.stages > 1 and p.arch.num_layers % p.stages and p.virtual_stages > 1:
        raise LaunchError(
            "megatron_uneven_interleaved",
            N_(
                "%(layers)s layers do not split evenly over %(stages)s interleaved stages; "
                "Megatron-LM needs an even split there."
            ),
            {"layers": p.arch.num_layers, "stages": p.stages},
            ("torchtitan",),
        )


def model_flags(p: Plan) -> list[str]:
    a = p.arch
    f = [
        f"--num-layers {a.num_layers}",
        f"--hidden-size {a.hidden_size}",
        f"--ffn-hidden-size {a.intermediate_size}",
        f"--num-attention-heads {a.num_attention_heads}",
        f"--kv-channels {a.head_dim}",
        f"--seq-length {p.seq_len}",
        f"--max-position-embeddings {p.seq_len}",
        "--position-embedding-type rope",
        "--normalization RMSNorm",
        "--disable-bias-linear",
    ]
    if a.gated_mlp:
        f.append("--swiglu")
    if a.num_kv_heads != a.num_attention_heads and a.mla is None:
        f += ["--group-query-attention", f"--num-query-groups {a.num_kv_heads}"]
    if a.qkv_bias:
        f.append("--add-qkv-bias")
    if a.qk_norm:
        f.append("--qk-layernorm")
    if not a.tie_embeddings:
        f.append("--untie-embeddings-and-output-weights")
    if a.mla is not None:
        m = a.mla
        f += [
            "--multi-latent-attention",
            f"--kv-lora-rank {m.kv_lora_rank}",
            f"--qk-head-dim {m.qk_nope_head_dim}",
            f"--qk-pos-emb-head-dim {m.qk_rope_head_dim}",
            f"--v-head-dim {m.v_head_dim}",
        ]
        if m.q_lora_rank:
            f.append(f"--q-lora-rank {m.q_lora_rank}")
    if a.moe is not None:
        moe = a.moe
        f += [
            f"--num-experts {moe.num_experts}",
            f"--moe-router-topk {moe.experts_per_token}",
            f"--moe-ffn-hidden-size {moe.expert_intermediate_size}",
            "--moe-grouped-gemm",
            "--moe-token-dispatcher-type alltoall",
        ]
        if moe.shared_experts:
            size = moe.shared_experts * moe.expert_intermediate_size
            f.append(f"--moe-shared-expert-intermediate-size {size}")
        if moe.dense_layers or moe.moe_every != 1:
            pattern = [1 if moe.is_moe_layer(i) else 0 for i in range(a.num_layers)]
            f.append("--moe-layer-freq " + shlex.quote(str(pattern).replace(" ", "")))
    f += [
        "--tokenizer-type NullTokenizer",
        f"--vocab-size {a.vocab_size}",
    ]
    return f


def parallel_flags(p: Plan) -> list[str]:
    f = [
        f"--tensor-model-parallel-size {p.tp}",
        f"--pipeline-model-parallel-size {p.pp}",
        f"--context-parallel-size {p.cp}",
        f"--expert-model-parallel-size {p.ep}",
        f"--micro-batch-size {p.micro_batch_size}",
        f"--global-batch-size {p.global_batch_size}",
    ]
    if p.tp > 1:
        f.append("--sequence-parallel")
    if p.ep > 1:
        f.append("--expert-tensor-parallel-size 1")
    if p.pp > 1:
        per = p.layers_per_stage
        if p.virtual_stages > 1:
            f.append(f"--num-virtual-stages-per-pipeline-rank {p.virtual_stages}")
        elif len(set(per)) > 1:
            # uneven split: Megatron takes the first and last stages' counts, the rest even
            mid = p.arch.num_layers // p.pp
            ends = p.arch.num_layers - mid * (p.pp - 2)
            f += [
                f"--decoder-first-pipeline-num-layers {ends - ends // 2}",
                f"--decoder-last-pipeline-num-layers {ends // 2}",
            ]
    if p.sharding == "zero1":
        f.append("--use-distributed-optimizer")
    elif p.sharding in ("zero2", "zero3"):
        strategy = "optim_grads" if p.sharding == "zero2" else "optim_grads_params"
        f += [
            "--use-megatron-fsdp",
            f"--data-parallel-sharding-strategy {strategy}",
            "--ckpt-format fsdp_dtensor",
        ]
    if p.offload_optimizer:
        if p.sharding == "ddp":
            f.append("--use-distributed-optimizer")
        # validate_args refuses the CPU offload without the precision-aware optimizer (the
        # hybrid device optimizer runs on its code path); its state dtypes stay at their
        # fp32 defaults, as sized
        f += [
            "--optimizer-cpu-offload",
            "--overlap-cpu-optimizer-d2h-h2d",
            "--use-precision-aware-optimizer",
        ]
    if p.recompute == "full":
        f += ["--recompute-granularity full", "--recompute-method uniform"]
        f.append("--recompute-num-layers 1")
    elif p.recompute == "selective":
        f.append("--recompute-granularity selective")
    f.append("--bf16")
    if p.precision == "fp8":
        f += ["--fp8-format hybrid", "--fp8-recipe tensorwise"]
    elif p.precision == "fp4":
        f += ["--fp4-format e2m1"]
    return f


def env(p: Plan) -> dict[str, str]:
    """Environment Megatron needs. Before Blackwell, TP or CP > 1 requires one CUDA
    connection (validate_args) — unless Megatron-FSDP, which refuses that setting."""
    out: dict[str, str] = {}
    fsdp = p.sharding in ("zero2", "zero3")
    if (p.tp > 1 or p.cp > 1) and not p.blackwell and not fsdp:
        out["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    return out


def argv(p: Plan) -> list[str]:
    """Every flag as separate argv items (what ``pretrain_gpt.py`` receives)."""
    flags = [*model_flags(p), *parallel_flags(p)]
    flags += [
        f"--train-iters {p.train_steps}",
        "--lr 3e-4",
        "--min-lr 3e-5",
        "--lr-decay-style cosine",
        f"--lr-warmup-iters {p.warmup_steps}",
        "--weight-decay 0.1",
        "--clip-grad 1.0",
        "--use-flash-attn" if p.vendor.lower() == "nvidia" else "--attention-backend auto",
        "--mock-data",
    ]
    out: list[str] = []
    for f in flags:
        out += shlex.split(f)
    return out


def render(p: Plan, hosts: list[str] | None = None) -> list[LaunchFile]:
    check(p)
    names = launch_hosts(p, hosts)
    lines = [
        "#!/usr/bin/env bash",
        comment(p.header(NAME, VERSION), "#"),
        "# Run from a Megatron-LM checkout (pretrain_gpt.py) on every node, with",
        "# NODE_RANK=0 on the first node and 1, 2, ... on the others.",
        "# Replace --mock-data and --tokenizer-type with your data and tokenizer.",
        "set -euo pipefail",
        "",
    ]
    for k, v in env(p).items():
        lines.append(f"export {k}={v}")
    if p.pp > 1 and len(set(p.layers_per_stage)) > 1 and p.virtual_stages == 1:
        lines.append(
            f"# {p.arch.num_layers} layers over {p.pp} stages: the first and last stages "
            "take the remainder"
        )
    lines += [
        f'MASTER_ADDR="${{MASTER_ADDR:-{names[0] if p.nodes > 1 else "localhost"}}}"',
        'NODE_RANK="${NODE_RANK:-0}"',
        "",
        "ARGS=(",
    ]
    for f in [*model_flags(p), *parallel_flags(p)]:
        lines.append(f"  {f}")
    rest = argv(p)[len(shlex.split(" ".join([*model_flags(p), *parallel_flags(p)]))) :]
    i = 0
    while i < len(rest):
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            lines.append(f"  {rest[i]} {rest[i + 1]}")
            i += 2
        else:
            lines.append(f"  {rest[i]}")
            i += 1
    lines += [
        ")",
        "",
        f"torchrun --nproc_per_node={p.gpus_per_node} --nnodes={p.nodes} "
        f'--node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" --master_port={RDZV_PORT} '
        'pretrain_gpt.py "${ARGS[@]}"',
    ]
    return [LaunchFile(SCRIPT, "\n".join(lines) + "\n")]
