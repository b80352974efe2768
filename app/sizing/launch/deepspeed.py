"""DeepSpeed 0.19.8: ``ds_config.json``, the hostfile and the ``deepspeed`` launch line.

ZeRO stages 0-3 with the engine's offload choices. A sharded model state kept in copies
(HSDP) is refused: 0.19.8 removed MiCS, DeepSpeed's form of it. The JSON itself carries no comments, so its header
lives in the launch script beside it.
"""

from __future__ import annotations

import json
from typing import Any

from app.sizing.launch import hf
from app.sizing.launch.errors import N_, LaunchError
from app.sizing.launch.files import LaunchFile, comment, launch_hosts
from app.sizing.launch.plan import RDZV_PORT, Plan
from app.sizing.stacks import DEEPSPEED

NAME = "DeepSpeed"
VERSION = DEEPSPEED
STAGES = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}


def ds_config(p: Plan) -> dict[str, Any]:
    zero: dict[str, Any] = {
        "stage": STAGES[p.sharding],
        "overlap_comm": True,
        "contiguous_gradients": True,
    }
    if p.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if p.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if p.sharding == "zero3":
        zero["stage3_max_live_parameters"] = 1_000_000_000
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    cfg: dict[str, Any] = {
        "train_batch_size": p.global_batch_size,
        "train_micro_batch_size_per_gpu": p.micro_batch_size,
        "gradient_accumulation_steps": p.microbatches,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "zero_optimization": zero,
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
    }
    if p.recompute == "full":
        cfg["activation_checkpointing"] = {
            "partition_activations": False,
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
        }
    return cfg


def check(p: Plan) -> None:
    hf.refuse_model_parallel(p, NAME, "deepspeed_model_parallel")
    if p.sharding == "zero3" and p.dp_replicate > 1:
        raise LaunchError(
            "deepspeed_no_hybrid_shard",
            N_(
                "This layout shards the model over %(shard)s GPUs and keeps %(copies)s copies; "
                "DeepSpeed %(version)s removed MiCS, its form of that, and ZeRO-3 shards over "
                "every rank."
            ),
            {"shard": p.dp_shard, "copies": p.dp_replicate, "version": VERSION},
            ("torchtitan", "accelerate"),
        )


def render(p: Plan, hosts: list[str] | None = None) -> list[LaunchFile]:
    check(p)
    names = launch_hosts(p, hosts)
    config = json.dumps(ds_config(p), indent=2) + "\n"
    hostfile = "".join(f"{h} slots={p.gpus_per_node}\n" for h in names)
    extra = []
    if p.recompute == "full":
        extra.append("--gradient_checkpointing")
    if p.method != "full":
        extra.append(f"--{p.method}  # your script sets up the adapters (PEFT)")
    header = p.header(NAME, VERSION) + hf.model_lines(p)
    if p.recompute == "selective":
        header.append(
            "Selective recompute: only attention's inner products are recomputed, which "
            "FlashAttention already does; the script needs no checkpointing flag."
        )
    launch = [
        "#!/usr/bin/env bash",
        comment(header, "#"),
        "# Files: ds_config.json (batch, ZeRO, offload) and hostfile (one line per node).",
        "# train.py is your training script; it passes ds_config.json to",
        "# deepspeed.initialize (or to the Hugging Face Trainer as --deepspeed).",
        "set -euo pipefail",
        "",
    ]
    args = [
        "deepspeed",
        f"--num_nodes {p.nodes}",
        f"--num_gpus {p.gpus_per_node}",
    ]
    if p.nodes > 1:
        args += ["--hostfile hostfile", f"--master_addr {names[0]}"]
    args += [
        f"--master_port {RDZV_PORT}",
        "train.py",
        "--deepspeed ds_config.json",
        f"--model_name_or_path {hf.model_arg(p)}",
        f"--max_seq_length {p.seq_len}",
        f"--per_device_train_batch_size {p.micro_batch_size}",
        f"--gradient_accumulation_steps {p.microbatches}",
        "--bf16",
    ]
    launch.append(" \\\n  ".join(args + [e for e in extra if "#" not in e]))
    for e in extra:
        if "#" in e:
            launch.append(f"# add {e}")
    return [
        LaunchFile("ds_config.json", config),
        LaunchFile("hostfile", hostfile),
        LaunchFile("launch_deepspeed.sh", "\n".join(launch) + "\n"),
    ]
