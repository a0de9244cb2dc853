#!/usr/bin/env bash
# Set up and run fwdasv's tests on a fresh machine: a venv in .venv with fwdasv
# and its test and vLLM-contract extras (vllm==0.33.0, ~9 GB, a few minutes the
# first time), Debian's chromium for the browser test, then ruff and pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k cases).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[test.sh] creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
echo "[test.sh] installing fwdasv[test,vllm] into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,vllm]'
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "[test.sh] installing Debian's chromium and chromium-driver (browser test)"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
echo "[test.sh] ruff"
.venv/bin/python -m ruff check fwdasv tests benchmarks scripts benchmarks_speed
.venv/bin/python -m ruff format --check fwdasv tests benchmarks scripts benchmarks_speed
echo "[test.sh] pytest"
exec .venv/bin/python -m pytest "$@"
