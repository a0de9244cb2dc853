#!/usr/bin/env bash
# On one H200: the sparse workflow on a local 16-commit vLLM history, from `asv run --steps` to
# the culprit recorded with the finding. make_sparse_history.py: this script's own ~1%
# Python-only slowdown at commit 8, a csrc commit at 9 the compiled-code guard refuses (10
# takes it out again), the rest comment-only. One command, after the calls that unpack the
# offline bundle's parts a (in two halves: bench/h200/split_a.sh) and b, on the same warm
# `nvidia-h200`, carry [".vllm-offline/c", ".whl"]:
#
#   bash bench/h200/sparse_bisect.sh
#
# Steps: the history; fwdasv init --vllm --base; asv run --steps 4 ALL (commits 3 7 11 15: the
# slow one unmeasured); fwdasv regressions; ONE fwdasv confirm for every finding of the pair
# (its wall time and processes); fwdasv bisect with no arguments (its ends start from
# confirm's processes; the csrc commit skipped unmeasured); regressions --format json.
# Each step is done once: the command run again (same WORK) goes on where the last call
# stopped. Within BUDGET seconds (default 530) it starts no step it cannot finish (confirm
# needs CONFIRM_S, default 300) and cuts bisect short (it resumes from its kept processes),
# then exits 75: run the same command again. At about 45 s a vLLM bench process, the whole
# takes about 1000 s: asv's 4 commits (the first cold) about 250 s, confirm's 3+3 processes
# about 280 s, bisect about 270 s (the ends are confirm's; the slow commit's 3 processes and
# the final pair's re-check of 3), so expect 2-3 calls. Exit 0: everything ran and the
# culprit is the slow commit; 1: it ran and something is not as expected (summary.json says
# what); 2: staging. STOP_AFTER=confirm ends after confirm (its cost with several findings).
# CASES (default decode_bs1_1k,decode_bs8_1k: two findings on one pair) narrows the Qwen3
# suite (FWDASV_CASES); each vLLM bench process costs about 30-50 s. At prefill noise
# (CASES=prefill_2k, docs/measurements.md section 48) confirm took 6+6 processes (370 s)
# and each probe 6: set CONFIRM_S=400, or a confirm started with less is cut and goes on
# from its kept processes on the next call (section 50: a cut confirm resumed on an H100).
# Never changes GPU settings. COLD=1 adds the 1% step bisected by hand from no stored
# samples (a fresh project; about 12 more processes, one more call; bisect_cold.json).
# ONLY=cold runs that step alone (no asv run, confirm or bisect of the main project: about
# 15 processes, 7 to 12 minutes with CASES=decode_bs1_1k), and the summary checks only it.
# COLD_RANGE="7 10" (default "7 11"): the by-hand range's ends, as commit numbers.
# Under $OUT/sparse:
# summary.json (every step's seconds and exit, the figures), each step's output, the
# verdicts file, results.
set -u
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE
started=$(date +%s.%N)
here=$PWD
W=${WORK:-/tmp/fwdasv-sparse}
OUT=${OUT:-$W/out}
S=$OUT/sparse
BUDGET=${BUDGET:-530}
CONFIRM_S=${CONFIRM_S:-300}
export FWDASV_CASES=${CASES:-decode_bs1_1k,decode_bs8_1k}
site=${VLLM_SITE:-/tmp/vsite}
py=${PY:-$py}
mkdir -p "$W" "$S"
exec > >(tee -a "$S/sparse.log") 2>&1
left() { awk "BEGIN{printf \"%d\", $BUDGET - ($(date +%s.%N) - $started)}"; }
now() { date +%s.%N; }
# record STEP START EXIT: one line of seconds.tsv (summary.json reads them all)
record() {
  local s; s=$(awk "BEGIN{printf \"%.1f\", $(now) - $2}")
  printf '%s\t%s\t%s\n' "$1" "$s" "$3" >> "$S/seconds.tsv"
  echo "[$1] exit $3 in $s s ($(left) s of the budget left)"
}
again() { echo "not finished within the budget: run the same command again (WORK=$W)"; exit 75; }
# limit KEEP: the seconds a step may take, leaving KEEP of the budget (nothing: none left)
limit() { local t=$(($(left) - $1)); [ "$t" -gt 0 ] && echo "$t"; }

step "staging (the bundle in $site, asv, this checkout)"
stage_vllm_run "$W/logs" || exit 2
export FWDASV_VLLM_ENTRY=phases
repo=$W/vllm-repo proj=$W/proj machine=h200
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw --format=csv 2>&1 | head -3

if [ ! -f "$W/vllm-repo.commits" ]; then
  step "a 16-commit local vLLM history from $site's Python (bench/h200/make_sparse_history.py)"
  t0=$(now)
  $py bench/h200/make_sparse_history.py --base $site --out "$repo" > /dev/null || exit 2
  record history "$t0" 0
fi
if [ ! -f "$proj/asv.conf.json" ]; then
  step "fwdasv init --vllm --base $site"
  t0=$(now)
  $py -m fwdasv init --vllm --repo "$repo" --base $site --dir "$proj" || exit 2
  (cd "$proj" && $py -m fwdasv hw machine --name $machine) || exit 2
  record init "$t0" 0
fi
cp "$W/vllm-repo.commits" "$S/commits.txt"
mapfile -t commits < <(cut -d' ' -f1 "$W/vllm-repo.commits")
slow=${commits[8]} csrc=${commits[9]}
echo "slow commit ${slow:0:8} (8), csrc commit ${csrc:0:8} (9), cases $FWDASV_CASES"
cd "$proj" || exit 2
cold_only=()
if [ "${ONLY:-}" = cold ]; then
  echo "ONLY=cold: the by-hand bisect of a fresh project alone"
  COLD=1 cold_only=(--cold-only)
fi
# The by-hand bisect's ends, checked before any step runs.
read -r cold_good cold_bad <<< "${COLD_RANGE:-7 11}"
if ! [[ "$cold_good" =~ ^[0-9]+$ && "$cold_bad" =~ ^[0-9]+$ ]] \
  || [ "$cold_good" -ge "$cold_bad" ] || [ "$cold_bad" -ge "${#commits[@]}" ]; then
  echo "COLD_RANGE=\"${COLD_RANGE:-}\" is not two commit numbers GOOD BAD with" \
    "0 <= GOOD < BAD < ${#commits[@]}; give e.g. COLD_RANGE=\"7 10\"" >&2
  exit 2
fi
# todo STEP: whether the main project's STEP is still to run (never with ONLY=cold, which
# marks nothing done: the same WORK without it later runs every step)
todo() { [ ${#cold_only[@]} = 0 ] && [ ! -f "$W/done.$1" ]; }

if todo asv; then
  step "asv run --steps 4 ALL (commits 3 7 11 15; the slow one must not be one)"
  t=$(limit 10) || again; t0=$(now)
  timeout "$t" $py -m asv run ALL --steps 4 --record-samples \
    --skip-existing-successful --machine $machine --bench '^forward\.Qwen3_0_6B\.' \
    --show-stderr >> "$S/asv_run.log" 2>&1
  rc=$?; record "asv run --steps 4" "$t0" $rc
  [ $rc = 124 ] && again
  touch "$W/done.asv"
fi
ls results/$machine/ 2>/dev/null | grep -v machine.json | cut -c1-8 | sort > "$S/measured.txt"
echo "measured: $(tr '\n' ' ' < "$S/measured.txt")"

if todo regressions; then
  step "fwdasv regressions"
  t0=$(now)
  timeout 120 $py -m fwdasv regressions --machine $machine > "$S/regressions.txt" 2>&1
  rc=$?; record regressions "$t0" $rc; cat "$S/regressions.txt"
  timeout 120 $py -m fwdasv regressions --machine $machine --format json \
    > "$S/regressions_before.json" 2> /dev/null
  touch "$W/done.regressions"
fi

if todo confirm; then
  [ "$(left)" -ge "$CONFIRM_S" ] || again
  step "fwdasv confirm: every finding of the pair, one interleaved A/B"
  t=$(limit 5) || again; t0=$(now)
  timeout "$t" $py -m fwdasv confirm --machine $machine --no-explain \
    > "$S/confirm.txt" 2>&1
  rc=$?; record confirm "$t0" $rc; cat "$S/confirm.txt"
  [ $rc = 124 ] && again
  touch "$W/done.confirm"
fi

if [ "${STOP_AFTER:-}" = confirm ]; then
  echo "STOP_AFTER=confirm: stopping before bisect (confirm's cost is in $S/confirm.txt)"
  exit 0
fi

if todo bisect; then
  [ "$(left)" -ge 60 ] || again
  step "fwdasv bisect (no arguments: every finding's range of several commits)"
  t=$(limit 20) || again; t0=$(now)
  timeout "$t" $py -m fwdasv bisect --machine $machine --json "$S/bisect.json" \
    >> "$S/bisect.txt" 2>&1
  rc=$?; record bisect "$t0" $rc; cat "$S/bisect.txt"
  [ $rc = 124 ] && again  # its processes are kept: the next call goes on from them
  touch "$W/done.bisect"
fi

if [ "${COLD:-0}" = 1 ] && [ ! -f "$W/done.cold" ]; then
  # The issue's other H200 must-show: the same 1% step bisected by hand from no stored
  # samples (a fresh project: the run's own spread decides, the step's size from the ends).
  [ "$(left)" -ge 120 ] || again
  step "COLD=1: fwdasv bisect $cold_good..$cold_bad by hand in a fresh project, no stored samples"
  cold=$W/proj-cold
  [ -f "$cold/asv.conf.json" ] || $py -m fwdasv init --vllm --repo "$repo" --base $site \
    --dir "$cold" > /dev/null || exit 2
  (cd "$cold" && $py -m fwdasv hw machine --name $machine > /dev/null) || exit 2
  t=$(limit 20) || again; t0=$(now)
  (cd "$cold" && timeout "$t" $py -m fwdasv bisect "${commits[$cold_good]}..${commits[$cold_bad]}" \
    forward.Qwen3_0_6B.track_latency --case "${FWDASV_CASES%%,*}" --machine $machine \
    --json "$S/bisect_cold.json" >> "$S/bisect_cold.txt" 2>&1)
  rc=$?; record "bisect, cold" "$t0" $rc; cat "$S/bisect_cold.txt"
  [ $rc = 124 ] && again
  touch "$W/done.cold"
fi

step "fwdasv regressions --format json: the culprit on each finding"
timeout 120 $py -m fwdasv regressions --machine $machine --format json \
  > "$S/regressions_after.json" 2> /dev/null
cp results/fwdasv-verdicts.jsonl "$S/" 2>/dev/null
tar czf "$S/results.tgz" results .fwdasv-confirm .fwdasv-bisect 2>/dev/null
cd "$here" || exit 2
$py bench/h200/sparse_summary.py "$S" --slow "$slow" --csrc "$csrc" \
  --started "$started" "${cold_only[@]}" > "$S/summary.json"
rc=$?
cat "$S/summary.json"
exit $rc
