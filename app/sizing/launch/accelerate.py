"""Hugging Face accelerate 1.15: the FSDP2 (or DDP) YAML and the ``accelerate launch`` line.

ZeRO-3 is FSDP2 resharding after forward, ZeRO-2 FSDP2 keeping the parameters gathered until
backward, plain data parallel is DDP; a sharded state kept in copies (HSDP) is accelerate's
parallelism config (``dp_replicate_size`` × ``dp_shard_size``). ZeRO-1 has no FSDP2 form,
and FSDP2's offload moves parameters, gradients and optimizer state together: both refused.
"""

from __future__ import annotations

from app.sizing.launch import hf
from app.sizing.launch.errors import N_, LaunchError, offload_optimizer_only
from app.sizing.launch.files import LaunchFile, comment, launch_hosts
from app.sizing.launch.plan import RDZV_PORT, Plan
from app.sizing.stacks import ACCELERATE

NAME = "accelerate"
VERSION = ACCELERATE
CONFIG = "accelerate_config.yaml"


def check(p: Plan) -> None:
    hf.refuse_model_parallel(p, NAME, "accelerate_model_parallel")
    if p.sharding == "zero1":
        raise LaunchError(
            "accelerate_no_zero1",
            N_("This layout shards the optimizer state only (ZeRO-1); FSDP2 has no such mode."),
            None,
            ("deepspeed", "megatron"),
        )
    if p.offload_optimizer and not p.offload_params:
        raise offload_optimizer_only(
            "accelerate_offload_optimizer_only", "FSDP2", ("deepspeed", "megatron")
        )


def _yaml(p: Plan, main_ip: str) -> list[str]:
    fsdp = p.sharding in ("zero2", "zero3")
    out = [
        "compute_environment: LOCAL_MACHINE",
        "debug: false",
        f"distributed_type: {'FSDP' if fsdp else 'MULTI_GPU'}",
        "downcast_bf16: 'no'",
    ]
    if fsdp:
        out += [
            "fsdp_config:",
            "  fsdp_version: 2",
            # the model's own _no_split_modules (its decoder layer class) are wrapped
            "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP",
            f"  fsdp_reshard_after_forward: {'true' if p.sharding == 'zero3' else 'false'}",
            f"  fsdp_offload_params: {'true' if p.offload_params else 'false'}",
            "  fsdp_state_dict_type: SHARDED_STATE_DICT",
            "  fsdp_cpu_ram_efficient_loading: true",
            f"  fsdp_activation_checkpointing: {'true' if p.recompute == 'full' else 'false'}",
        ]
        if p.dp_replicate > 1:
            out += [
                "parallelism_config:",
                f"  parallelism_config_dp_replicate_size: {p.dp_replicate}",
                f"  parallelism_config_dp_shard_size: {p.dp_shard}",
                "  parallelism_config_tp_size: 1",
                "  parallelism_config_cp_size: 1",
            ]
    out += [
        "machine_rank: 0",
        f"main_process_ip: {main_ip}",
        f"main_process_port: {RDZV_PORT}",
        "main_training_function: main",
        "mixed_precision: bf16",
        f"num_machines: {p.nodes}",
        f"num_processes: {p.world}",
        "rdzv_backend: static",
        "same_network: true",
        "tpu_env: []",
        "tpu_use_cluster: false",
        "tpu_use_sudo: false",
        "use_cpu: false",
    ]
    return out


def render(p: Plan, hosts: list[str] | None = None) -> list[LaunchFile]:
    check(p)
    names = launch_hosts(p, hosts)
    header = p.header(NAME, VERSION) + hf.model_lines(p)
    if p.recompute == "selective":
        header.append(
            "Selective recompute: only attention's inner products are recomputed, which "
            "FlashAttention already does; no activation checkpointing is switched on."
        )
    if p.sharding == "ddp" and p.recompute == "full":
        header.append("Full recompute: call model.gradient_checkpointing_enable() in main().")
    header.append(
        f"Per-device batch {p.micro_batch_size}, gradient accumulation {p.microbatches}: "
        f"{p.global_batch_size} sequences per optimizer step (set them in your script)."
    )
    main_ip = names[0] if p.nodes > 1 else "127.0.0.1"
    config = "\n".join([comment(header, "#"), *_yaml(p, main_ip)]) + "\n"
    launch = [
        "#!/usr/bin/env bash",
        comment(p.header(NAME, VERSION), "#"),
        f"# Run on every node with MACHINE_RANK=0 on {names[0]} and 1, 2, ... on the others.",
        "set -euo pipefail",
        'MACHINE_RANK="${MACHINE_RANK:-0}"',
        f'accelerate launch --config_file {CONFIG} --machine_rank "$MACHINE_RANK" '
        f"train.py --model_name_or_path {hf.model_arg(p)} --max_seq_length {p.seq_len} "
        f"--per_device_train_batch_size {p.micro_batch_size} "
        f"--gradient_accumulation_steps {p.microbatches}",
    ]
    return [
        LaunchFile(CONFIG, config),
        LaunchFile("launch_accelerate.sh", "\n".join(launch) + "\n"),
    ]
