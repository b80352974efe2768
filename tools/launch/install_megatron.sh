#!/usr/bin/env bash
# Installs megatron-core 0.19.0 (the version the Megatron exporter targets) into the launch-check
# Python given as $1, a Python 3.11.
#
# --ignore-requires-python, on purpose: megatron-core >= 0.17 declares Requires-Python >= 3.12,
# and the only CPU-only torch installable here is 2.13.0+cpu for Python 3.11 (the machine's
# wheelhouse; PyPI's torch for 3.12 is the CUDA build with GBs of NVIDIA packages). PyPI has a
# cp311 wheel of megatron-core 0.19.0; its code compiles on 3.11, and the one 3.12 name its
# argument parser's imports reach (typing.override) is supplied by check_megatron.py.
# --no-deps: its dependencies (torch, numpy, packaging) are already pinned in this environment;
# without it pip, told to ignore Requires-Python, picks a numpy that has no 3.11 wheel and
# fails building it from source.
set -euo pipefail
PY="$1"
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' || {
  echo "install_megatron.sh: needs Python 3.11"; exit 2; }
"$PY" -m pip install -q --no-deps --ignore-requires-python 'megatron-core==0.19.0'
