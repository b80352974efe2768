#!/usr/bin/env bash
# Megatron-LM's own parser over the grid's Megatron scripts only (make check-launch-megatron;
# make check-launch runs the same check in its full tools environment). Builds a small
# Python 3.11 environment, tools/launch/.venv-megatron: CPU-only torch and triton (pinned in
# constraints.txt), megatron-core 0.19.0 installed with --ignore-requires-python (why: see
# install_megatron.sh and docs/launch-configs.md).
set -euo pipefail
GRID="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY311="${PY:-python3.11}"
VENV="$HERE/.venv-megatron"
if [ ! -f "$VENV/.installed" ]; then
  test -x "$VENV/bin/python" || "$PY311" -m venv "$VENV"
  # only a CPU build: PyPI's default Linux torch pulls GBs of NVIDIA packages
  "$VENV/bin/python" -m pip install -q -c "$HERE/constraints.txt" \
    'torch==2.13.0+cpu' triton numpy packaging typing_extensions
  bash "$HERE/install_megatron.sh" "$VENV/bin/python"
  touch "$VENV/.installed"
fi
"$VENV/bin/python" "$HERE/check_megatron.py" "$GRID"
