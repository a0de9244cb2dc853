#!/usr/bin/env bash
# Bisect trials on the H200 host's CPUs (no GPU needed: the host is the quiet box):
# bench/verdicts/bisect_trials.py's 16-commit repository (one commit +14.6%, identical
# outputs), TRIALS trials (default 10), PARALLEL at a time (default 10), each pinned to a
# physical core of its own (CPU 0's core left free), after the calibration of the step.
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 600:
#   bash bench/h200/bisect_trials.sh
#
# Under $OUT: bisect_trials.log (everything: the process-level variation at the range's
# ends, a line per trial as it ends, the tally), bisect-trials.json (each finished trial's
# bisect JSON, rewritten as each ends), trial-logs/ (each trial's ends, probes and processes).
# Many trials at once on the CPU disturb one another beyond the step (docs/measurements.md
# section 11): PARALLEL=1..3 for fewer. TRIALS_TIMEOUT_S (default 500) stops it inside one
# device call, keeping what ended.
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/busy}
export OUT=${OUT:-$RES/out}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/bisect_trials.log") 2>&1

step "machine"
date -u; nproc; uptime
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__)'
echo "checkout $(git rev-parse --short HEAD 2>/dev/null || echo '?') at $PWD"

step "asv from the carried wheels"
stage_asv || exit 2
stage_pth

step "calibration: the slow commit against its parent, interleaved, one thread"
$py bench/verdicts/bisect_trials.py --calibrate

step "bisect trials: ${TRIALS:-10}, up to ${PARALLEL:-10} at a time, a physical core each"
lscpu 2>/dev/null | grep -E '^(Model name|Thread|Core|Socket|CPU\(s\))' || true
timeout "${TRIALS_TIMEOUT_S:-500}" $py bench/verdicts/bisect_trials.py --trials "${TRIALS:-10}" \
  --parallel "${PARALLEL:-10}" --processes "${PROCESSES:-6}" --dir "$RES/trials" \
  --json "$OUT/bisect-trials.json" --log-dir "$OUT/trial-logs"
echo "bisect_trials exit $? (0: >= 90% right and none wrong)"
uptime
