#!/usr/bin/env bash
# Run fwdasv's demo on a fresh machine: a venv in .venv with fwdasv (and torch),
# then `fwdasv demo`: a model repository's history measured by asv, the
# regression flagged and bisected, the site published. Extra arguments go to
# `fwdasv demo` (e.g. scripts/demo.sh --dir /tmp/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[demo.sh] creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
# pip's own progress (what it downloads, e.g. torch the first time, and builds)
# stays visible: a first install takes minutes.
echo "[demo.sh] installing fwdasv and its dependencies (torch, asv) into .venv"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar on -e .
exec .venv/bin/fwdasv demo "$@"
