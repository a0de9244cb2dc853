#!/usr/bin/env bash
# Issue 19 items 4-5 on the H200 host's CPUs (no GPU needed; the host is the quiet box):
# bisect trials on scripts/bisect_trials.py's 16-commit repository (one commit +14.6%,
# identical outputs), 10 trials at once, each pinned to a core of its own ("load about 1"
# per trial; 10 of the host's 16 cores), and the calibration of the step. Setup as
# lease_demo.sh (asv from the carried wheels).
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 600:
#   bash scripts/gpu/lease_busy.sh
#
# Under $OUT: lease_busy.log (everything: the process-level variation at the range's
# ends, a line per trial as it ends, the tally), bisect-trials.json (each finished
# trial's bisect JSON, rewritten as each ends), trial-logs/ (each trial's asv runs and
# medians). Trials run on distinct physical cores, CPU 0's core left free. On 2026-12-03
# two waves of 5 did not finish inside one call (their lines were printed only at the
# end); 10 at once timed an empty CUDA graph (the suite's device was auto: now cpu, host
# timer); and 10 at once on the CPU disturbed one another beyond the +14% step (ends
# -0.4% to +25%: docs/measurements.md section 11). Fewer at a time: PARALLEL=1..3.
# TRIALS_TIMEOUT_S (default 500) stops it inside one lease call, keeping what ended.
set -u
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
RES=${RES:-/tmp/fwdasv-gpu/busy}
export OUT=${OUT:-$RES/out}
py=${PYTHON:-python3}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/lease_busy.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
date -u; nproc; uptime
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__)'
echo "checkout $(git rev-parse --short HEAD 2>/dev/null || echo '?') at $PWD"

step "asv from the carried wheels"
if ! $py -c 'import asv' 2>/dev/null; then
  wheels=$(ls .whl/*.whl .whl-dev/*.whl 2>/dev/null | head -200)
  if [ -z "$wheels" ]; then echo "no asv and no .whl/*.whl: carry .whl"; exit 2; fi
  # shellcheck disable=SC2086
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels || exit 2
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD" /tmp/site > "$site_dir/zz-fwdasv-lease.pth" 2>/dev/null \
  || echo "cannot write into $site_dir: relying on PYTHONPATH"

step "calibration: the slow commit against its parent, interleaved, one thread"
$py scripts/bisect_trials.py --calibrate

step "bisect trials: ${TRIALS:-10}, up to ${PARALLEL:-10} at a time, a physical core each"
lscpu 2>/dev/null | grep -E '^(Model name|Thread|Core|Socket|CPU\(s\))' || true
timeout "${TRIALS_TIMEOUT_S:-500}" $py scripts/bisect_trials.py --trials "${TRIALS:-10}" \
  --parallel "${PARALLEL:-10}" --processes "${PROCESSES:-6}" --dir "$RES/trials" \
  --json "$OUT/bisect-trials.json" --log-dir "$OUT/trial-logs"
echo "bisect_trials exit $? (0: >= 90% right and none wrong)"
uptime
