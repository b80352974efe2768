"""Megatron-LM's own parser over the grid's exported Megatron scripts.

For each script: its environment is set, ``WORLD_SIZE`` is the layout's, and ``sys.argv`` is
``pretrain_gpt.py`` plus the script's flags; ``megatron.training.arguments.parse_args()``
then ``validate_args(args)`` run unchanged (megatron-core 0.19.0).

Stand-ins, for the GPU queries only (there is no GPU here), answering the SKU's GPU:
``get_device_arch_version`` (compute-capability major; validate_args asks for it with TP or
CP > 1, FP8/FP4 and Megatron-FSDP) and ``torch.cuda.get_device_capability`` (asked with
``--moe-grouped-gemm``): Hopper 9.0, Blackwell 10.0, MI355X gfx950 9.5 (ROCm's answer).

Transformer Engine (a CUDA library) is not installed, so validate_args reads its version as
0.0.0: a script that validate_args refuses only because it needs a Transformer Engine version
(FP4: ``--fp4-format`` needs TE >= 2.7) is counted as not checked here, never as passed.

Python 3.11: megatron-core 0.19 declares Python >= 3.12 and is installed with
``--ignore-requires-python`` (see install_megatron.sh). Its code compiles on 3.11; the one 3.12
name the import of the parser reaches is ``typing.override`` (``megatron.training.models``),
a decorator that only marks a method; on 3.11 it is taken from ``typing_extensions``, which
is the same decorator's backport.

    tools/launch/.venv-megatron/bin/python tools/launch/check_megatron.py GRID_DIR
"""

from __future__ import annotations

import json
import os
import sys
import time
import typing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from check import megatron_argv  # noqa: E402

if sys.version_info < (3, 12) and not hasattr(typing, "override"):
    import typing_extensions

    typing.override = typing_extensions.override  # type: ignore[attr-defined]


def gpu_capability(plan: dict[str, object]) -> tuple[int, int]:
    """The SKU's GPU compute capability: Blackwell 10.0, Hopper 9.0, MI355X (gfx950) 9.5."""
    if str(plan["vendor"]).lower() != "nvidia":
        return (9, 5)
    return (10, 0) if plan["blackwell"] else (9, 0)


def refusal(
    margs: Any, torch: Any, env: dict[str, str], argv: list[str], plan: dict[str, object]
) -> str | None:
    """Run ``parse_args()`` + ``validate_args()`` on one script's flags: None, or the refusal."""
    cap = gpu_capability(plan)
    # the two GPU queries' stand-ins (see the module docstring)
    margs.get_device_arch_version = lambda: cap[0]
    torch.cuda.get_device_capability = lambda device=None: cap
    saved_env, saved_argv = dict(os.environ), sys.argv
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    os.environ.update(env)
    os.environ["WORLD_SIZE"] = str(plan["world"])
    os.environ["RANK"] = "0"
    sys.argv = ["pretrain_gpt.py", *argv]
    try:
        margs.validate_args(margs.parse_args())
        return None
    except (Exception, SystemExit) as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def main(grid: str) -> int:
    import megatron.training.arguments as margs
    import torch

    start = time.monotonic()
    root = Path(grid)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    passed = failed = unchecked = 0
    first: tuple[dict[str, str], list[str], dict[str, object]] | None = None
    for e in manifest:
        if e.get("framework") != "megatron" or "folder" not in e:
            continue
        env, argv = megatron_argv(root / e["folder"])
        first = first or (env, argv, e["plan"])
        why = refusal(margs, torch, env, argv, e["plan"])
        if why is None:
            passed += 1
        else:
            if "requires Transformer Engine" in why:
                unchecked += 1
                print("NOT CHECKED (no Transformer Engine here)", e["folder"], why)
            else:
                failed += 1
                print("FAIL", e["folder"], why)
    # the check proves it is live: one script with a tensor-parallel size that cannot divide
    # the world must be refused by the parser
    if first is not None:
        env, argv, plan = first
        bad = list(argv)
        i = bad.index("--tensor-model-parallel-size")
        bad[i + 1] = str(2 * int(str(plan["world"])))
        why = refusal(margs, torch, env, bad, plan)
        print("planted fault (TP = 2 x world):", "refused:" if why else "NOT refused", why or "")
        if why is None:
            failed += 1
    took = time.monotonic() - start
    print(
        f"megatron (own parser): {passed} passed, {failed} failed, "
        f"{unchecked} not checked (need Transformer Engine), {took:.1f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
