#!/usr/bin/env bash
# Run fwdasv's demo on a fresh machine: a venv in .venv-demo with fwdasv (and torch),
# then `fwdasv demo`: a model repository's history measured by asv, the
# regression flagged and bisected, the site published. Extra arguments go to
# `fwdasv demo` (e.g. scripts/demo.sh --dir /tmp/demo).
#
# The demo has an environment of its own: scripts/test.sh's .venv gets the vllm
# extra, which pins its own (CUDA) torch, and a torch that changes under the demo's
# results starts new series. On a machine without an NVIDIA GPU the CPU
# torch wheel is installed first (about 200 MB instead of about 3 GB of CUDA
# wheels): from FWDASV_TORCH_INDEX (default https://download.pytorch.org/whl/cpu),
# or, when that index cannot be reached, pip's own configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=.venv-demo
if [ ! -x "$venv/bin/python" ]; then
  echo "[demo.sh] creating $venv with $($python --version)"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
    index=${FWDASV_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
    echo "[demo.sh] no NVIDIA GPU: installing the CPU torch wheel (from $index)"
    "${pip[@]}" --retries 0 --timeout 20 --index-url "$index" torch \
      || { echo "[demo.sh] $index not reachable: torch from pip's configured index"; "${pip[@]}" torch; }
  fi
fi
# pip's own progress (what it downloads, e.g. torch the first time, and builds)
# stays visible: a first install takes minutes.
echo "[demo.sh] installing fwdasv and its dependencies (torch, asv) into $venv"
"${pip[@]}" -e .
echo "[demo.sh] fwdasv is $venv/bin/fwdasv (or: source $venv/bin/activate)"
exec "$venv/bin/fwdasv" demo "$@"
