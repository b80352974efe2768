"""Validate exported launch configurations with each framework's own parser and checks.

Runs in the tools environment (``make check-launch`` builds it: CPU-only torch, torchtitan,
DeepSpeed, accelerate; never the app's venv) over the folder ``scripts/launch_grid.py``
wrote. Per framework:

* torchtitan: ``ConfigManager().parse_args(["--module", M, "--config", "job"])`` loads the
  exported Python job (its registry config, tyro's parse, the manager's own validation;
  stand-in: the float8/NVFP4 converters' GPU capability query answers the SKU's GPU);
  ``ParallelDims.from_config(config.parallelism, world_size)`` is the degrees' check against
  the world size. The global-batch division torchtitan checks only when the trainer is
  built is checked here on the parsed values.
* DeepSpeed: ``DeepSpeedConfig(ds_config.json, mpu)`` inside a one-process gloo group; the
  ``mpu`` object is DeepSpeed's own interface for telling it the data-parallel size
  (``get_data_parallel_world_size``), answered with the layout's — the only stand-in.
* accelerate: ``load_config_from_file`` (refuses unknown keys), then the launcher's own path
  (``launch_command_parser`` → ``_validate_launch_command`` → ``prepare_multi_gpu_env``),
  whose environment ``FullyShardedDataParallelPlugin()`` and ``ParallelismConfig()`` read
  and check as they do in a launched process.
* Megatron-LM: the flags against our invariants (world size, batch, whole per-stage layer
  counts); Megatron's own parse_args + validate_args run next, in check_megatron.py.

Every configuration is also checked against the invariants with the values read back from
the file. Prints per-framework counts and writes a JSON summary.

    tools/launch/.venv/bin/python tools/launch/check.py GRID_DIR [SUMMARY_JSON]
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any


def _invariants(world: int, tp: int, pp: int, cp: int, dp: int, gbs: int, mbs: int) -> list[str]:
    bad = []
    if tp * pp * cp * dp != world:
        bad.append(f"tp*pp*cp*dp = {tp * pp * cp * dp} != world {world}")
    if gbs % (mbs * dp):
        bad.append(f"global batch {gbs} % (micro {mbs} x dp {dp}) != 0")
    return bad


# --- torchtitan ------------------------------------------------------------------------------


def check_torchtitan(folder: Path, plan: dict[str, Any], n: int) -> list[str]:
    import torchtitan.components.quantization.float8 as tt_float8
    import torchtitan.components.quantization.nvfp4 as tt_nvfp4
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    # The one stand-in: the float8 / NVFP4 converters ask the GPU for its compute capability
    # (float8: SM89+ or gfx942+; NVFP4: SM100+). Answered with the SKU's GPU: Hopper 9.0,
    # Blackwell 10.0, MI355X gfx950 (ROCm 9.5); there is no GPU on this machine.
    nvidia = plan["vendor"].lower() == "nvidia"
    sm = (10, 0) if plan["blackwell"] else (9, 0)

    def cuda_cap(major: int, minor: int) -> bool:
        return nvidia and (major, minor) <= sm

    def rocm_cap(major: int, minor: int) -> bool:
        return not nvidia and (major, minor) <= (9, 5)

    tt_float8.has_cuda_capability = cuda_cap
    tt_float8.has_rocm_capability = rocm_cap
    tt_nvfp4.has_cuda_capability = cuda_cap

    mod = f"launch_job_{n:04d}"
    src = (folder / "launch_job.py").read_text(encoding="utf-8")
    tmp = Path(tempfile.gettempdir()) / "launch_check_modules"
    tmp.mkdir(exist_ok=True)
    (tmp / f"{mod}.py").write_text(src, encoding="utf-8")
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    importlib.invalidate_caches()
    config = ConfigManager().parse_args(["--module", mod, "--config", "job"])
    world = plan["world"]
    par = config.parallelism
    dims = ParallelDims.from_config(par, world)  # raises on degrees that miss the world size
    dp = dims.dp_replicate * dims.dp_shard
    t = config.training
    bad = _invariants(world, dims.tp, dims.pp, dims.cp, dp, t.global_batch_size, t.local_batch_size)
    if dims.pp > 1 and t.local_batch_size % par.pipeline_parallel_microbatch_size:
        bad.append("local batch not divisible by the pipeline micro-batch")
    if t.seq_len != plan["seq_len"]:
        bad.append("seq_len differs from the plan")
    if t.steps != plan["train_steps"]:
        bad.append(f"training.steps {t.steps} differs from the plan's {plan['train_steps']}")
    if config.lr_scheduler.warmup_steps != plan["warmup_steps"]:
        bad.append("lr_scheduler.warmup_steps differs from the plan")
    want = (plan["tp"], plan["pp"], plan["cp"], plan["ep"], plan["dp_shard"], plan["dp_replicate"])
    got = (dims.tp, dims.pp, dims.cp, dims.ep, dims.dp_shard, dims.dp_replicate)
    if want != got:
        bad.append(f"degrees {got} differ from the plan {want}")
    lps = par.pipeline_parallel_layers_per_stage
    if lps is not None and (plan["num_layers"] % lps):
        bad.append("layers per stage not whole")
    return bad


# --- DeepSpeed -------------------------------------------------------------------------------

_DS_READY = False


class _DataParallelSize:
    """DeepSpeed's model-parallel-unit interface, answering the layout's data-parallel size
    (what a launched job's process groups would answer)."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0

    def get_model_parallel_world_size(self) -> int:
        return 1

    def get_model_parallel_rank(self) -> int:
        return 0


def check_deepspeed(folder: Path, plan: dict[str, Any], n: int) -> list[str]:
    global _DS_READY
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig

    if not _DS_READY:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        deepspeed.init_distributed(dist_backend="gloo")
        _DS_READY = True
    cfg = json.loads((folder / "ds_config.json").read_text(encoding="utf-8"))
    ds = DeepSpeedConfig(cfg, mpu=_DataParallelSize(plan["dp"]))
    bad = _invariants(
        plan["world"], 1, 1, 1, plan["dp"], ds.train_batch_size, ds.train_micro_batch_size_per_gpu
    )
    if ds.train_batch_size != plan["global_batch_size"]:
        bad.append("train_batch_size differs from the plan")
    if (
        ds.zero_optimization_stage
        != {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}[plan["sharding"]]
    ):
        bad.append("ZeRO stage differs from the plan")
    hosts = (folder / "hostfile").read_text(encoding="utf-8").split("\n")
    slots = sum(int(line.split("slots=")[1]) for line in hosts if "slots=" in line)
    if slots != plan["world"]:
        bad.append(f"hostfile has {slots} slots, the layout {plan['world']} GPUs")
    return bad


# --- accelerate ------------------------------------------------------------------------------

_ACC_KEYS = ("FSDP_", "ACCELERATE_", "PARALLELISM_CONFIG_")


def check_accelerate(folder: Path, plan: dict[str, Any], n: int) -> list[str]:
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env

    path = folder / "accelerate_config.yaml"
    cfg = load_config_from_file(str(path))
    bad = []
    if cfg.num_processes != plan["world"] or cfg.num_machines != plan["nodes"]:
        bad.append("processes/machines differ from the plan")
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    _validate_launch_command(args)
    env = prepare_multi_gpu_env(args)
    saved = {k: v for k, v in os.environ.items() if k.startswith(_ACC_KEYS)}
    try:
        for k in list(os.environ):
            if k.startswith(_ACC_KEYS):
                del os.environ[k]
        os.environ.update({k: v for k, v in env.items() if k.startswith(_ACC_KEYS)})
        if plan["sharding"] in ("zero2", "zero3"):
            plugin = FullyShardedDataParallelPlugin()
            if plugin.fsdp_version != 2:
                bad.append("not FSDP2")
            if plugin.reshard_after_forward != (plan["sharding"] == "zero3"):
                bad.append("reshard_after_forward differs from the plan")
            if (
                bool(
                    plugin.cpu_offload and plugin.cpu_offload.__class__.__name__ != "OffloadPolicy"
                )
                != plan["offload_params"]
            ):
                bad.append("offload differs from the plan")
            if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true":
                pc = ParallelismConfig()
                if pc.total_size != plan["world"]:
                    bad.append(f"parallelism config covers {pc.total_size} of {plan['world']} GPUs")
                if (pc.dp_replicate_size, pc.dp_shard_size) != (
                    plan["dp_replicate"],
                    plan["dp_shard"],
                ):
                    bad.append("replicate/shard differ from the plan")
            elif plan["dp_replicate"] > 1:
                bad.append("HSDP without a parallelism config")
    finally:
        for k in list(os.environ):
            if k.startswith(_ACC_KEYS):
                del os.environ[k]
        os.environ.update(saved)
    bad += _invariants(
        plan["world"], 1, 1, 1, plan["dp"], plan["global_batch_size"], plan["micro_batch_size"]
    )
    return bad


# --- Megatron-LM (invariants; its own parser: check_megatron.py) -----------------------------


def megatron_argv(folder: Path) -> tuple[dict[str, str], list[str]]:
    """The environment and the argv the script hands ``pretrain_gpt.py``."""
    text = (folder / "launch_megatron.sh").read_text(encoding="utf-8")
    env: dict[str, str] = {}
    argv: list[str] = []
    inside = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("export "):
            k, v = s[len("export ") :].split("=", 1)
            env[k] = v
        elif s == "ARGS=(":
            inside = True
        elif s == ")":
            inside = False
        elif inside:
            argv += shlex.split(s)
    return env, argv


def check_megatron(folder: Path, plan: dict[str, Any], n: int) -> list[str]:
    env, argv = megatron_argv(folder)
    flags: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[argv[i]] = argv[i + 1]
            i += 2
        else:
            flags[argv[i]] = True
            i += 1

    def num(name: str, default: int = 1) -> int:
        v = flags.get(name)
        return int(v) if isinstance(v, str) else default

    tp, pp = num("--tensor-model-parallel-size"), num("--pipeline-model-parallel-size")
    cp = num("--context-parallel-size")
    ep = num("--expert-model-parallel-size")
    world = plan["world"]
    dp = world // (tp * pp * cp)
    bad = _invariants(world, tp, pp, cp, dp, num("--global-batch-size"), num("--micro-batch-size"))
    layers = num("--num-layers")
    v = num("--num-virtual-stages-per-pipeline-rank")
    first = num("--decoder-first-pipeline-num-layers", 0)
    last = num("--decoder-last-pipeline-num-layers", 0)
    if first or last:
        rest, middle = layers - first - last, pp - 2
        if first < 1 or last < 1 or rest < 0 or (middle and rest % middle) or (not middle and rest):
            bad.append(f"uneven split {first}/{last} of {layers} layers over {pp} stages")
    elif layers % (pp * v):
        bad.append(f"{layers} layers not whole over {pp * v} stages")
    if ep > 1 and (dp * cp * tp) % ep:
        bad.append("EP does not divide DP x CP x TP")
    needs_one = (tp > 1 or cp > 1) and not plan["blackwell"] and "--use-megatron-fsdp" not in flags
    if needs_one and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
        bad.append("TP/CP before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1")
    if "--use-megatron-fsdp" in flags and env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        bad.append("Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1")
    if num("--train-iters", 0) != plan["train_steps"]:
        bad.append(f"--train-iters differs from the plan's {plan['train_steps']} steps")
    if num("--lr-warmup-iters", 0) != plan["warmup_steps"]:
        bad.append("--lr-warmup-iters differs from the plan")
    return bad


CHECKS = {
    "torchtitan": check_torchtitan,
    "deepspeed": check_deepspeed,
    "accelerate": check_accelerate,
    "megatron": check_megatron,
}
HOW = {
    "torchtitan": "ConfigManager.parse_args + ParallelDims",
    "deepspeed": "DeepSpeedConfig with the DP world size",
    "accelerate": "load_config_from_file + launcher env + FullyShardedDataParallelPlugin",
    "megatron": "our invariants (its own parser: check_megatron.py, next)",
}


def plant_faults(root: Path, dest: Path) -> list[dict[str, Any]]:
    """A copy of one exported configuration per framework with one planted fault each (a
    doubled TP degree, a batch off by one, a misspelt required key): the checks must refuse
    every one, or they check nothing."""
    import re
    import shutil

    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    planted: list[dict[str, Any]] = []
    for e in manifest:
        fw = e.get("framework")
        if "folder" not in e or fw in {p["framework"] for p in planted}:
            continue
        d = dest / e["folder"]
        shutil.copytree(root / e["folder"], d)
        if fw == "deepspeed":
            cfg = json.loads((d / "ds_config.json").read_text(encoding="utf-8"))
            cfg["train_batch_size"] += 1
            (d / "ds_config.json").write_text(json.dumps(cfg), encoding="utf-8")
        elif fw == "torchtitan":
            job = (d / "launch_job.py").read_text(encoding="utf-8")
            job = re.sub(
                r"par.tensor_parallel_degree = (\d+)",
                lambda m: f"par.tensor_parallel_degree = {int(m.group(1)) * 2}",
                job,
            )
            (d / "launch_job.py").write_text(job, encoding="utf-8")
        elif fw == "accelerate":
            y = (d / "accelerate_config.yaml").read_text(encoding="utf-8")
            (d / "accelerate_config.yaml").write_text(
                y.replace("distributed_type:", "distributed_typo:"), encoding="utf-8"
            )
        elif fw == "megatron":
            sh = (d / "launch_megatron.sh").read_text(encoding="utf-8")
            sh = re.sub(
                r"--global-batch-size (\d+)",
                lambda m: f"--global-batch-size {int(m.group(1)) + 1}",
                sh,
            )
            (d / "launch_megatron.sh").write_text(sh, encoding="utf-8")
        planted.append({**e, "answer": 9000 + len(planted)})
    return planted


def check_one(root: Path, e: dict[str, Any]) -> list[str]:
    try:
        return CHECKS[e["framework"]](
            root / e["folder"], {**e["plan"], "num_layers": e["num_layers"]}, e["answer"]
        )
    except (Exception, SystemExit) as exc:  # the framework refused the file (tyro exits)
        if os.environ.get("LAUNCH_CHECK_TRACE"):
            traceback.print_exc()
        return [f"{type(exc).__name__}: {exc}".splitlines()[0][:300]]


def main(grid: str, summary_path: str | None) -> int:
    root = Path(grid)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    stats: dict[str, dict[str, int]] = {
        fw: {"exported": 0, "passed": 0, "refused": 0} for fw in CHECKS
    }
    failures: list[str] = []
    answers = {e["answer"] for e in manifest}
    for e in manifest:
        fw = e.get("framework")
        if fw is None:
            continue
        s = stats[fw]
        if "refused" in e:
            s["refused"] += 1
            continue
        s["exported"] += 1
        bad = check_one(root, e)
        if bad:
            failures.append(f"{e['folder']}: {'; '.join(bad)}")
        else:
            s["passed"] += 1
    print(f"{len(answers)} engine answers")
    for fw, s in stats.items():
        print(
            f"{fw:11s} exported {s['exported']:4d}  passed {s['passed']:4d}  "
            f"refused with a reason {s['refused']:4d}  ({HOW[fw]})"
        )
    for f in failures[:40]:
        print("FAIL", f)
    with tempfile.TemporaryDirectory() as tmp:
        planted = plant_faults(root, Path(tmp))
        caught = [p["framework"] for p in planted if check_one(Path(tmp), p)]
    print(f"planted faults refused: {len(caught)} of {len(planted)} ({', '.join(caught)})")
    if len(caught) != len(planted):
        failures.append("a planted fault passed the checks")
    total = sum(s["exported"] for s in stats.values())
    passed = sum(s["passed"] for s in stats.values())
    print(f"{passed} passed, {total - passed} failed")
    if summary_path:
        Path(summary_path).write_text(
            json.dumps(
                {
                    "answers": len(answers),
                    "frameworks": stats,
                    "how": HOW,
                    "planted_refused": f"{len(caught)}/{len(planted)}",
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
