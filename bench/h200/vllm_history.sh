#!/usr/bin/env bash
# On one H200: a local vLLM history (built from the offline bundle's vLLM 0.33 sources by
# make_vllm_history.py) measured by asv with each commit's Python over the bundle's compiled
# files, then the verdicts. Calls made back to back on one warm `nvidia-h200` (each under 10
# minutes), after two that unpack the bundle's parts a and b (carry [".vllm-offline/a"]:
# `bash .vllm-offline/a/stage.sh`; then the same for b):
#
#   bash bench/h200/vllm_history.sh run1      # carry .vllm-offline/c, .whl: history + init + machine; asv run, commits 1-7
#   bash bench/h200/vllm_history.sh run2      # asv run, commits 8-13 (the csrc one refused)
#   bash bench/h200/vllm_history.sh verdicts  # regressions, confirm (A/B, 3 processes a side)
#   bash bench/h200/vllm_history.sh explain   # bisect around the step, explain (profiles)
#   bash bench/h200/vllm_history.sh before    # optional: commit 1 in a fresh tree (no bytecode, spawn), same phases
#
# Every part re-does the cheap staging it needs (stage.sh: the carried bundle's part c, or
# /tmp/vsite unpacked earlier; asv in /tmp/site or from .whl/*.whl) and is idempotent: a part
# cut short is picked up by running it again (asv skips commits already measured). Never
# changes GPU settings. Results, logs and the per-commit cost table go under $OUT (default
# /tmp/fwdasv-hist/out). Knobs: CASE (default decode_bs1_1k), STARTUP_PLAN=1
# (VLLM_ENABLE_STARTUP_PLAN=1 for the bench processes), VLLM_SITE, WORK, PY.
set -u
part=${1:?part: run1 | run2 | verdicts | explain | before}
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE  # the per-commit trees keep bytecode across commits
W=${WORK:-/tmp/fwdasv-hist}
OUT=${OUT:-$W/out}
CASE=${CASE:-decode_bs1_1k}
BENCH=forward.Qwen3_0_6B.track_latency
site=${VLLM_SITE:-/tmp/vsite}  # the staged bundle's site (stage.sh's VLLM_SITE)
py=${PY:-$py}
mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/$part.log") 2>&1

# --- the staged bundle, asv, fwdasv from this checkout
stage_vllm_run "$W/logs" || exit 2
export FWDASV_VLLM_ENTRY=phases
[ "${STARTUP_PLAN:-0}" = 1 ] && export VLLM_ENABLE_STARTUP_PLAN=1
repo=$W/vllm-repo proj=$W/proj machine=h200

setup() {
  local fresh=1
  [ -f "$proj/asv.conf.json" ] && fresh=0
  stage_vllm_project "$repo" "$proj" || exit 2
  if [ $fresh = 1 ]; then
    (cd "$proj" && $py -m fwdasv hw machine --name $machine) || exit 2
  fi
  slow=$(grep -n "Qwen3: keep the attention output" "$W/vllm-repo.commits" | cut -d: -f1)  # 1-based
}

run_part() {  # run_part FIRST LAST (1-based, inclusive)
  printf '%s\n' "${commits[@]:$(($1 - 1)):$(($2 - $1 + 1))}" > "$W/$part.hashes"
  step "asv run --record-samples, commits $1-$2 of ${#commits[@]}, Qwen3_0_6B (forkserver, phases in the bench logs)"
  local t0; t0=$(date +%s.%N)
  (cd "$proj" && timeout 540 $py -m asv run "HASHFILE:$W/$part.hashes" --record-samples \
    --skip-existing-successful --machine $machine --bench '^forward\.Qwen3_0_6B\.' --show-stderr \
    > "$OUT/asv_$part.log" 2>&1)
  echo "asv run exit $? in $(elapsed "$t0") s"
  grep -E "fwdasv: .*compiled code differs|^\[ *[0-9]+\.[0-9]+%\] ·· Building|Installing|failed" "$OUT/asv_$part.log" | head -30
}

table() {
  step "per-commit cost"
  $py bench/h200/vllm_cost_table.py --project "$proj" --logs "$W/logs" --json "$OUT/cost.json" | tee "$OUT/cost.md"
  cp "$proj/.fwdasv-vllm/installs.jsonl" "$OUT/" 2>/dev/null
  tar czf "$OUT/results.tgz" -C "$proj" results .fwdasv-vllm/installs.jsonl 2>/dev/null
  tar czf "$OUT/bench_logs.tgz" -C "$W" logs 2>/dev/null
}

case $part in
run1) setup; run_part 1 7; table ;;
run2) setup; run_part 8 "${#commits[@]}"; table
  step "asv run ALL once more: nothing left to measure, the csrc commit refused again"
  (cd "$proj" && timeout 120 $py -m asv run ALL --record-samples --skip-existing-successful \
    --machine $machine --bench '^forward\.Qwen3_0_6B\.' > "$OUT/asv_all_again.log" 2>&1)
  echo "exit $?"; grep -E "compiled code differs" "$OUT/asv_all_again.log" | head -3 ;;
verdicts) setup; cd "$proj"
  step "fwdasv regressions"
  timeout 120 $py -m fwdasv regressions --machine $machine > "$OUT/regressions.txt" 2>&1
  echo "exit $?"; cat "$OUT/regressions.txt"
  step "fwdasv confirm ($CASE; A and B installed once each, 3 processes a side)"
  t0=$(date +%s.%N)
  timeout 480 $py -m fwdasv confirm --machine $machine --bench "$CASE" --max-processes 3 --no-explain \
    > "$OUT/confirm.txt" 2>&1
  echo "exit $? in $(elapsed "$t0") s"; cat "$OUT/confirm.txt"
  timeout 60 $py -m fwdasv regressions --machine $machine > "$OUT/regressions_after.txt" 2>&1
  echo "regressions after confirm: exit $?"; cat "$OUT/regressions_after.txt" ;;
explain) setup; cd "$proj"
  # GOOD = the slow commit's parent, BAD 5 after it: the first probe is the csrc commit (untestable).
  good=${commits[$((slow - 2))]} bad=${commits[$((slow + 4))]}
  step "fwdasv bisect ${good:0:8}..${bad:0:8} $BENCH --case $CASE (stored samples reused)"
  t0=$(date +%s.%N)
  # --factor 1.005: the step is ~1% (bisect's default probe floor is 5%).
  timeout 300 $py -m fwdasv bisect "$good..$bad" $BENCH --case "$CASE" --machine $machine --factor 1.005 \
    --json "$OUT/bisect.json" > "$OUT/bisect.txt" 2>&1
  echo "exit $? in $(elapsed "$t0") s"; cat "$OUT/bisect.txt"
  step "fwdasv explain (profiles at the slow commit and its parent, vLLM's --profile-dir)"
  t0=$(date +%s.%N)
  timeout 270 $py -m fwdasv explain "${commits[$((slow - 2))]}" "${commits[$((slow - 1))]}" $BENCH \
    --case "$CASE" --top 15 --rounds "${ROUNDS:-2}" > "$OUT/explain.txt" 2>&1
  echo "exit $? in $(elapsed "$t0") s"; cat "$OUT/explain.txt" ;;
before) setup
  step "before: commit 1 the old way (a fresh tree, no bytecode, spawn), Qwen3_0_6B cases, phases"
  dir=$W/before-tree; rm -rf "$dir"; mkdir -p "$dir"
  t0=$(date +%s.%N)
  git -C "$repo" archive "${commits[0]}" vllm | tar xf - -C "$dir"
  (cd $site && find vllm -name '*.so') | while read -r so; do ln -sf "$site/$so" "$dir/$so"; done
  echo "tree (git archive + links): $(elapsed "$t0") s"
  mapfile -t cases < <($py -c "from fwdasv.vllm_suites import Qwen3_0_6B as S; [print('--case', c, sep='\n') for c in S.cases]")
  t0=$(date +%s.%N)
  PYTHONPATH="$dir:$PYTHONPATH" timeout 400 $py -m fwdasv.backends.vllm_phases \
    --model "$VLLM_OFFLINE_HOME/models/qwen3-0.6b" --skip-tokenizer-init --load-format dummy --seed 0 \
    --kv-len-jitter 0 --iters 20 --samples 10 --max-model-len 8192 --output-json "$OUT/before.json" \
    "${cases[@]}" > "$OUT/before_bench.log" 2>&1
  echo "exit $? wall $(elapsed "$t0") s"; grep '^\[phase\]' "$OUT/before_bench.log" ;;
*) echo "unknown part $part"; exit 2 ;;
esac
step "done ($part)"
ls -la "$OUT"
