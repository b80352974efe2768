"""Megatron-LM's own parser over the grid's exported Megatron scripts.

For each script: its environment is set, ``WORLD_SIZE`` is the layout's, and ``sys.argv`` is
``pretrain_gpt.py`` plus the script's flags; ``megatron.training.arguments.parse_args()``
then ``validate_args(args)`` run unchanged. One stand-in: ``get_device_arch_version`` (the
GPU's compute-capability major, which validate_args asks for when TP or CP > 1 or with
Megatron-FSDP) answers 9 for Hopper SKUs and 10 for Blackwell ones; there is no GPU here.

    PYTHON>=3.12 tools/launch/check_megatron.py GRID_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from check import megatron_argv  # noqa: E402


def main(grid: str) -> int:
    import megatron.training.arguments as margs

    root = Path(grid)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    passed = failed = 0
    for e in manifest:
        if e.get("framework") != "megatron" or "folder" not in e:
            continue
        env, argv = megatron_argv(root / e["folder"])
        arch = 10 if e["plan"]["blackwell"] else 9
        margs.get_device_arch_version = lambda arch=arch: arch  # the GPU query's stand-in
        saved_env, saved_argv = dict(os.environ), sys.argv
        os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
        os.environ.update(env)
        os.environ["WORLD_SIZE"] = str(e["plan"]["world"])
        os.environ["RANK"] = "0"
        sys.argv = ["pretrain_gpt.py", *argv]
        try:
            args = margs.parse_args()
            margs.validate_args(args)
            passed += 1
        except (Exception, SystemExit) as exc:
            failed += 1
            print("FAIL", e["folder"], f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.argv = saved_argv
    print(f"megatron: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
