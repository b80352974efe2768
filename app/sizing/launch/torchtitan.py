"""torchtitan 0.3.0: a Python job module (``Trainer.Config``) and the ``torchrun`` lines.

From 0.3.0 a torchtitan job is a Python function returning ``Trainer.Config``, launched as
``-m torchtitan.train --module M --config F`` (TOML job files were removed). The module
written here starts from the family's own registry configuration, puts the preset's flavor
in, and sets the layout, the batch and the recompute mode; everything else (optimizer,
data, checkpoints) stays the registry's, which the customer edits for their run.
"""

from __future__ import annotations

from app.sizing.launch.errors import N_, LaunchError, offload_optimizer_only
from app.sizing.launch.files import LaunchFile, comment, launch_hosts
from app.sizing.launch.plan import RDZV_PORT, Plan
from app.sizing.stacks import PYTORCH, TORCHTITAN

NAME = "torchtitan"
VERSION = TORCHTITAN
JOB_FILE = "launch_job.py"

# preset id -> (model family module, registry config function to start from, flavor)
MODELS: dict[str, tuple[str, str, str]] = {
    "llama-3.2-1b": ("llama3", "llama3_8b", "1B"),
    "llama-3.2-3b": ("llama3", "llama3_8b", "3B"),
    "llama-3.1-8b": ("llama3", "llama3_8b", "8B"),
    "llama-3.1-70b": ("llama3", "llama3_70b", "70B"),
    "llama-3.1-405b": ("llama3", "llama3_70b", "405B"),  # 405B registry config: float8 on
    "qwen3-8b": ("qwen3", "qwen3_14b", "8B"),
    "qwen3-32b": ("qwen3", "qwen3_32b", "32B"),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b", "30B-A3B"),
    "qwen3-235b-a22b": ("qwen3", "qwen3_30b_a3b", "235B-A22B"),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b", "671B"),
    "gpt-oss-20b": ("gpt_oss", "gpt_oss_20b", "20b"),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b", "120b"),
}
SCHEDULES = {"1f1b": "1F1B", "interleaved": "Interleaved1F1B", "gpipe": "GPipe"}
OTHERS = ("megatron", "deepspeed", "accelerate")


def check(p: Plan) -> tuple[str, str, str]:
    """The model entry, or why torchtitan cannot run this plan as sized."""
    if p.preset is None or p.preset not in MODELS:
        what = p.preset or "a custom architecture"
        raise LaunchError(
            "torchtitan_no_model",
            N_(
                "torchtitan %(version)s defines its models in Python and has none for "
                "%(model)s; Megatron-LM takes the dimensions as flags, DeepSpeed and accelerate "
                "train a Hugging Face model."
            ),
            {"version": VERSION, "model": what},
            OTHERS,
        )
    if p.method != "full":
        raise LaunchError(
            "torchtitan_no_lora",
            N_(
                "This layout trains LoRA adapters (%(method)s); torchtitan's job configuration "
                "here covers full training. DeepSpeed and accelerate run LoRA through PEFT."
            ),
            {"method": p.method},
            ("deepspeed", "accelerate"),
        )
    if p.offload_optimizer and not p.offload_params:
        raise offload_optimizer_only(
            "torchtitan_offload_optimizer_only", "torchtitan", ("megatron", "deepspeed")
        )
    if p.optimizer != "adamw":
        raise LaunchError(
            "torchtitan_optimizer",
            N_(
                "This layout was sized with an 8-bit AdamW; torchtitan's configuration has the "
                "standard AdamW only."
            ),
            None,
            ("deepspeed", "accelerate"),
        )
    if p.precision == "fp4" and not p.blackwell:
        raise LaunchError(
            "torchtitan_fp4_blackwell_only",
            N_(
                "This layout trains in FP4 on %(name)s; torchtitan's FP4 training is NVFP4, "
                "which needs NVIDIA Blackwell GPUs."
            ),
            {"name": p.sku_name},
        )
    return MODELS[p.preset]


def render(p: Plan, hosts: list[str] | None = None) -> list[LaunchFile]:
    family, base, flavor = check(p)
    head = comment(p.header(NAME, VERSION), "#")
    converters = ""
    imports = [
        f"from torchtitan.models.{family} import model_registry",
        f"from torchtitan.models.{family}.config_registry import {base}",
    ]
    if p.precision == "fp8":
        imports.append("from torchtitan.components.quantization import Float8LinearConverter")
        converters = (
            ", converters=[Float8LinearConverter.Config("
            f"filter_fqns=['lm_head'], model_compile_enabled={p.compile})]"
        )
    elif p.precision == "fp4":
        imports.append("from torchtitan.components.quantization import NVFP4LinearConverter")
        converters = (
            ", converters=[NVFP4LinearConverter.Config("
            f"fqns=['layers'], model_compile_enabled={p.compile})]"
        )
    ac = {
        "none": "None",
        "selective": "SelectiveAC.Config()",
        "full": "FullAC.Config()",
    }[p.recompute]
    if p.recompute != "none":
        imports.append(
            "from torchtitan.distributed.activation_checkpoint import "
            + ("SelectiveAC" if p.recompute == "selective" else "FullAC")
        )
    # FSDP2 reshards after forward (ZeRO-3) unless told "never": ZeRO-1/2 keep the
    # parameters gathered between forward and backward, as the engine sized them
    reshard = "default" if p.sharding in ("zero3", "ddp") else "never"
    if p.pp > 1:
        local = p.micro_batch_size * p.microbatches  # one pipeline step per optimizer step
    else:
        local = p.micro_batch_size  # accumulation: global / (local x DP) steps
    body = [
        "def job():",
        '    """The engine\'s layout and step count on the registry configuration (edit data, lr)."""',
        f"    config = {base}()",
        f'    config.model_spec = model_registry("{flavor}"{converters})',
        f"    config.training.seq_len = {p.seq_len}",
        f"    config.training.local_batch_size = {local}",
        f"    config.training.global_batch_size = {p.global_batch_size}",
        f"    config.training.enable_cpu_offload = {p.offload_params}",
        f"    config.training.steps = {p.train_steps}",
        f"    config.lr_scheduler.warmup_steps = {p.warmup_steps}",
        "    par = config.parallelism",
        f"    par.data_parallel_replicate_degree = {p.dp_replicate}",
        f"    par.data_parallel_shard_degree = {p.dp_shard}",
        f'    par.fsdp_reshard_after_forward = "{reshard}"',
        f"    par.tensor_parallel_degree = {p.tp}",
        f"    par.enable_sequence_parallel = {p.tp > 1}",
        f"    par.context_parallel_degree = {p.cp}",
        f"    par.expert_parallel_degree = {p.ep}",
        f"    par.pipeline_parallel_degree = {p.pp}",
    ]
    if p.pp > 1:
        body += [
            f'    par.pipeline_parallel_schedule = "{SCHEDULES[p.pp_schedule]}"',
            f"    par.pipeline_parallel_microbatch_size = {p.micro_batch_size}",
        ]
        per = p.layers_per_stage
        if len(set(per)) == 1:
            body.append(f"    par.pipeline_parallel_layers_per_stage = {per[0]}")
    if p.pp > 1 or p.ep > 1:
        # CUDA graphs (on by default) refuse pipeline parallel and the all-to-all token
        # dispatcher of expert parallel (torchtitan's own config check)
        body.append("    config.training.disable_cuda_graphs = True")
    body += [
        f"    config.activation_checkpoint = {ac}",
        f"    config.compile.enable = {p.compile}",
        # compiled TP is priced with async TP (profiles.py tp_exposed_compiled): the file
        # turns it on where the engine assumed it (torchtitan refuses it without compile)
        f"    config.compile.enable_async_tensor_parallel = {p.tp > 1 and p.compile}",
        "    return config",
    ]
    job = "\n".join([head, "", *sorted(set(imports)), "", "", *body, ""])
    launch = _launch(p, hosts)
    return [LaunchFile(JOB_FILE, job), LaunchFile("launch.sh", launch)]


def _launch(p: Plan, hosts: list[str] | None) -> str:
    names = launch_hosts(p, hosts)
    run = f"-m torchtitan.train --module {JOB_FILE[:-3]} --config job"
    lines = [
        "#!/usr/bin/env bash",
        comment(p.header(NAME, VERSION), "#"),
        "# Run from the folder that holds launch_job.py, on every node.",
        f"# pip install 'torchtitan=={VERSION}' (and torch >= {PYTORCH})",
        "set -euo pipefail",
    ]
    if p.nodes == 1:
        lines += [
            "",
            "# one node",
            f"torchrun --nproc_per_node={p.gpus_per_node} --rdzv_backend c10d "
            f"--rdzv_endpoint=localhost:0 {run}",
        ]
    else:
        lines += [
            "",
            f"# {p.nodes} nodes: the same line on each; the rendezvous is on the first node",
            f'RDZV_HOST="${{RDZV_HOST:-{names[0]}}}"',
            f"torchrun --nnodes={p.nodes} --nproc_per_node={p.gpus_per_node} "
            f'--rdzv_backend c10d --rdzv_id=job-{p.answer_id} --rdzv_endpoint="$RDZV_HOST:{RDZV_PORT}" '
            f"{run}",
        ]
    return "\n".join(lines) + "\n"
