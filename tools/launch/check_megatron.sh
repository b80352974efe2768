#!/usr/bin/env bash
# Megatron-LM's own parser over the grid (make check-launch-megatron). megatron-core ships its
# flag parser from 0.17, which needs Python >= 3.12; the parser imports torch. Builds
# tools/launch/.venv312 when a Python 3.12 and a CPU-only torch for it can be installed;
# otherwise says what is missing and exits 2 (the result published in docs/launch-configs.md).
set -euo pipefail
GRID="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY312=""
for c in $(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null) python3.12; do
  if "$c" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then PY312="$c"; break; fi
done
if [ -z "$PY312" ]; then
  echo "check-launch-megatron: no Python 3.12 on this machine; Megatron's parser not run"; exit 2
fi
VENV="$HERE/.venv312"
test -x "$VENV/bin/python" || "$PY312" -m venv "$VENV"
# only a CPU build: PyPI's default Linux torch pulls GBs of NVIDIA packages
if ! "$VENV/bin/python" -m pip install -q 'torch==2.13.0+cpu' 2>/dev/null; then
  echo "check-launch-megatron: no CPU-only torch for Python 3.12 is installable here"
  echo "(the machine's wheelhouse has 2.13.0+cpu for Python 3.11 only); Megatron's parser not run"
  exit 2
fi
"$VENV/bin/python" -m pip install -q 'megatron-core==0.19.2'
"$VENV/bin/python" "$HERE/check_megatron.py" "$GRID"
