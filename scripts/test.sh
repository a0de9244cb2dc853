#!/usr/bin/env bash
# Set up and run fwdasv's tests on a fresh machine: a venv in .venv with fwdasv
# and its test and vLLM-contract extras (vllm==0.33.0, about 10 GB, a minute or two the
# first time, through uv), Debian's chromium for the browser test, then ruff, mypy and
# pytest. Extra arguments go to pytest (e.g. scripts/test.sh -k cases). The end-to-end
# must-shows marked `long` (minutes of real asv each: a busy box, a script repository,
# every command) are left out, to keep CI inside 20 minutes (a new clone's .ci/run took
# 934-1141 s on a 2-core box); `scripts/test.sh --long` runs them too (`pytest -m long` alone:
# 18 minutes there).
set -euo pipefail
cd "$(dirname "$0")/.."
long="not long and "
if [ "${1:-}" = "--long" ]; then
  long=""
  shift
fi
python=${PYTHON:-python3}
# A first install needs room: .venv ends near 10 GB (vllm==0.33.0 pulls the CUDA torch and
# its libraries) and the installer unpacks each download. Say so before it runs out of
# disk half-way (OSError 28) rather than after. FWDASV_INSTALL_GB sets the need.
if ! compgen -G ".venv/lib/python3*/site-packages/vllm-0.33.0.dist-info" > /dev/null; then
  need_gb=${FWDASV_INSTALL_GB:-12}
  for dir in . "${TMPDIR:-/tmp}"; do
    free_gb=$(df -Pk "$dir" | awk 'NR == 2 {printf "%d", $4 / 1048576}')
    if [ "$free_gb" -lt "$need_gb" ]; then
      echo "[test.sh] $free_gb GB free on $(df -P "$dir" | awk 'NR == 2 {print $6}') (for $dir);" \
        "the first install needs about $need_gb GB (vllm==0.33.0 and its CUDA torch in .venv)."
      echo "[test.sh] free some space there (or point TMPDIR elsewhere) and run it again."
      exit 1
    fi
  done
fi
if [ ! -x .venv/bin/python ]; then
  echo "[test.sh] creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
# The vllm extra pins torch (vllm 0.33.0: the CUDA 2.14.0 wheel): this environment is
# the vLLM contract's, apart from the demo's (.venv-demo, scripts/demo.sh).
# uv installs it: a first install on a quiet 2-core VM took pip 196 s, uv 71 s (parallel
# downloads and byte-compiling; docs/measurements.md, section 41). --compile-bytecode as
# pip does: without it, where PYTHONDONTWRITEBYTECODE is set (as on that VM) every
# process compiles torch and vllm anew (import torch 3.3 s against 1.8 s). uv itself
# comes from pip. Its cache lies inside .venv (same filesystem: hard links, not a second
# 10 GB copy), so a second run of this script installs nothing again.
echo "[test.sh] installing fwdasv[test,vllm] into .venv with uv (vllm==0.33.0 and its torch:"
echo "[test.sh]   about 10 GB the first time, a minute or more)"
set +e
.venv/bin/python -m pip install --disable-pip-version-check --no-cache-dir -q 'uv>=0.5,<1' 2>&1 \
  | grep -v "^WARNING: Location"
install_status=${PIPESTATUS[0]}
if [ "$install_status" = 0 ]; then
  UV_CACHE_DIR=.venv/.uv-cache .venv/bin/python -m uv pip install --compile-bytecode \
    --python .venv/bin/python -e '.[test,vllm]' 2>&1 | grep --line-buffered -v -E '^ [-+~] '
  install_status=${PIPESTATUS[0]}
fi
set -e
[ "$install_status" = 0 ] || { echo "[test.sh] the install failed (status $install_status)"; exit 1; }
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  # Root (or sudo) and apt only when they are missing.
  echo "[test.sh] installing Debian's chromium and chromium-driver (browser test; needs apt and root)"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
else
  echo "[test.sh] chromium and chromedriver found: nothing to install (no root needed)"
fi
# The tests whose verdicts rest on CPU timings (marker `measure`, set by
# tests/conftest.py: real asv histories, confirmations, profiles) run in front, one at
# a time; the rest run beside them at the lowest CPU priority (nice 19), on what the
# timing leaves idle: a timing taken while another test competes for the CPU is noise,
# and one pytest after the other would take twice the time. The rest start first, beside
# ruff and mypy (one CPU, about 70 s from a cold cache), which time nothing; the timing
# tests start after mypy. The rest's output follows the timing tests'. The exit status
# is the first failure's (ruff, mypy, the timing tests, the rest); with no arguments
# both parts must run tests (pytest's 5, "no tests collected", fails); with arguments
# (e.g. -k cases) one part may select none.
# With no arguments, a long module that times nothing runs after the timing tests in their
# lane (`after`), not in the rest's: the rest ran 1111 s to the timing lane's 936 s in a
# new clone's CI, so the two end nearer together (docs/measurements.md, section 47).
after=(tests/bench/test_verdict_quality.py)
ignored=()
if [ $# -eq 0 ]; then
  for path in "${after[@]}"; do ignored+=("--ignore=$path"); done
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/fwdasv-tests.XXXXXX")
echo "[test.sh] pytest: the tests that time nothing start now at nice 19, beside ruff, mypy"
echo "[test.sh]   and then the timing tests (their log: $base/rest.log)"
nice -n 19 .venv/bin/python -m pytest -p no:cacheprovider --durations=25 --basetemp "$base/rest" \
  -m "${long}not measure" "${ignored[@]}" "$@" > "$base/rest.log" 2>&1 &
rest_pid=$!
lint=0
echo "[test.sh] ruff"
.venv/bin/python -m ruff check fwdasv tests benchmarks scripts bench || lint=$?
.venv/bin/python -m ruff format --check fwdasv tests benchmarks scripts bench || lint=$?
# mypy: the whole package at pyproject's settings, core/ and analysis/ also --strict.
echo "[test.sh] mypy"
.venv/bin/python -m mypy || lint=$?
.venv/bin/python -m mypy --strict --follow-imports=silent fwdasv/core fwdasv/analysis || lint=$?
echo "[test.sh] pytest: the timing tests"
timing=0
.venv/bin/python -m pytest --durations=25 --basetemp "$base/timing" -m "${long}measure" "$@" \
  || timing=$?
if [ $# -eq 0 ]; then
  echo "[test.sh] pytest: ${after[*]} (times nothing; after the timing tests, beside the rest)"
  after_status=0
  .venv/bin/python -m pytest -p no:cacheprovider --basetemp "$base/after" \
    -m "${long}not measure" "${after[@]}" || after_status=$?
  if [ "$timing" = 0 ]; then timing=$after_status; fi
fi
rest=0
wait "$rest_pid" || rest=$?
echo "[test.sh] the other tests (beside the timing tests, nice 19):"
cat "$base/rest.log"
if [ $# -gt 0 ]; then
  # A selection may leave one part empty, not both.
  if [ "$timing" = 5 ] && [ "$rest" != 5 ]; then timing=0; fi
  if [ "$rest" = 5 ] && [ "$timing" = 0 ]; then rest=0; fi
fi
status=$lint
if [ "$status" = 0 ]; then status=$timing; fi
if [ "$status" = 0 ]; then status=$rest; fi
echo "[test.sh] exit status $status (ruff and mypy $lint, timing tests $timing, the others $rest)"
# The tests' files (real asv projects and environments, about 400 MB) stay only for a failure.
if [ "$status" = 0 ]; then rm -rf "$base"; else echo "[test.sh] the tests' files kept in $base"; fi
exit "$status"
