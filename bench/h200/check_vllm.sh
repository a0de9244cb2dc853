#!/usr/bin/env bash
# On one H200: `fwdasv check BASE HEAD` (the pull-request check) over vLLM's compiled base,
# on real pull-request pairs of a local vLLM history (make_vllm_history.py, from the offline
# bundle's vLLM 0.33 Python):
#   slow  the ~1% Qwen3 commit against its parent (Python only: two more elementwise kernels a
#         layer) -> exit 1, the case `worse` with its interval; and the csrc/ commit against its
#         parent (compiled sources differ from the base's) -> refused in one line, exit 2,
#         before anything is installed or measured
#   noop  a Python-only pair off the forward (the commit after the slow one) -> exit 0
#   fast  the slow pair reversed (HEAD the slow commit's parent: the casts taken out again), a
#         pull request that speeds the forward up -> `improved`, exit 0; without the stored
#         history its interval, not judge_ab, decides it, and it is held 3 more a side
#   history  (optional, first) the series' stored history on this GPU: `fwdasv hw machine
#         --name MACHINE` and `asv run --record-samples` of the history's first 5 commits (before
#         the slow one, one level) under the machine `fwdasv init` recorded, so that later
#         checks judge with its noise as their prior (section 35), not the processes alone
# Each part is one device call (kind nvidia-h200, timeout_s 600), made back to back after the
# calls that unpack parts a and b of the bundle (bench/h200/split_a.sh join with a1, then a2;
# bash .vllm-offline/b/stage.sh); the first carries [".vllm-offline/c", ".whl"]:
#
#   bash bench/h200/check_vllm.sh history   # optional; then slow and noop take its prior
#   bash bench/h200/check_vllm.sh slow
#   bash bench/h200/check_vllm.sh noop
#   bash bench/h200/check_vllm.sh fast
#
# Under $OUT/check-vllm: each check's comment (markdown, stdout and --output), progress
# (stderr) and exit status; check_vllm.log has everything. Knobs: CASES (FWDASV_CASES for
# the history's asv run and `--case` for each check, default decode_bs1_1k: one case keeps
# 6-12 vLLM processes inside a call; without --case a check's process measured all 11), SAMPLES
# (FWDASV_SAMPLES, default 5), CHECK_TIMEOUT (seconds a check may take, default 540), WORK,
# VLLM_SITE, EXPLAIN (1: the slow pair's check profiles both commits and keeps the kernel
# diff in $OUT/check-vllm/explain), MAX_PROCESSES (each check's --max-processes, default the
# check's own 12: fewer fit a check and its profiles in one call). Changes no GPU setting; a
# second call reuses the history and the project, and a check the time limit cut short goes
# on from the processes it kept (about 50 s each on the H200: the slow pair's 6+6 and the
# no-op's 9+9 take two calls; measurements, section 33).
set -u
part=${1:?part: history | slow | noop | fast}
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE  # the per-commit trees keep bytecode across commits
W=${WORK:-/tmp/fwdasv-check-vllm}
OUT=${OUT:-$W/out}
res=$OUT/check-vllm
site=${VLLM_SITE:-/tmp/vsite}
mkdir -p "$W" "$res"
exec > >(tee -a "$res/check_vllm.log") 2>&1
started=$(date +%s.%N)

step "machine ($part)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
stage_vllm_run "$W/logs" || exit 2
export FWDASV_CASES=${CASES:-decode_bs1_1k} FWDASV_SAMPLES=${SAMPLES:-5}
repo=$W/vllm-repo proj=$W/proj
stage_vllm_project "$repo" "$proj" || exit 2
# The machine `fwdasv init` recorded for this box (the one every check measures under), so
# the history part stores its series there; MACHINE names another.
machine=${MACHINE:-$($py -c 'import json, sys
from fwdasv.asv.project_machine import recorded_machine
print(recorded_machine(json.load(open(sys.argv[1]))).name)' "$proj/asv.conf.json")} || exit 2
# FWDASV_CASES: the cases each check measures.
check_opts=(--machine "$machine")
for c in ${FWDASV_CASES//,/ }; do check_opts+=(--case "$c"); done
[ -n "${MAX_PROCESSES:-}" ] && check_opts+=(--max-processes "$MAX_PROCESSES")

# A commit by its subject in the history's listing, and its parent (the line before).
by_subject() {
  local subject
  subject=$($py -c "import sys; sys.path.insert(0, 'bench/h200')
import make_vllm_history as m; print(getattr(m, sys.argv[1]))" "$1") || return 2
  awk -v s="$subject" '{h=$1; $1=""; sub(/^ /, ""); if ($0 == s) {print prev, h; exit} prev=h}' \
    "$repo.commits"
}

check() {  # check NAME BASE HEAD [options]: one `fwdasv check`, its outputs under $res/NAME.*
  local name=$1 base=$2 head=$3; shift 3
  step "fwdasv check ${base:0:8} ${head:0:8} ($name: $(git -C "$repo" log -1 --format=%s "$head"))"
  git -C "$repo" diff --stat "$base" "$head" | tail -3
  local t0 status
  t0=$(date +%s.%N)
  (cd "$proj" && timeout "${CHECK_TIMEOUT:-540}" $py -m fwdasv check "$base" "$head" --bench '^forward\.Qwen3_0_6B\.' \
    --output "$res/$name.md" --format markdown "${check_opts[@]}" "$@" > "$res/$name.out" 2> "$res/$name.err")
  status=$?
  echo "$status" > "$res/$name.status"
  echo "check $name exit $status in $(elapsed "$t0") s"
  cat "$res/$name.out"; echo "--- stderr (last 25 lines)"; tail -25 "$res/$name.err"
}

case $part in
history)
  [ -f "$HOME/.asv-machine.json" ] && grep -q "\"$machine\"" "$HOME/.asv-machine.json" \
    || (cd "$proj" && $py -m fwdasv hw machine --name $machine) || exit 2
  printf '%s\n' "${commits[@]:0:5}" > "$W/history.hashes"
  step "asv run --record-samples, the history's first 5 commits (before the slow one), Qwen3_0_6B"
  t0=$(date +%s.%N)
  (cd "$proj" && timeout "${HISTORY_TIMEOUT:-480}" $py -m asv run "HASHFILE:$W/history.hashes" \
    --record-samples --skip-existing-successful --machine $machine --bench '^forward\.Qwen3_0_6B\.' \
    --show-stderr > "$res/asv_history.log" 2>&1)
  echo "asv run exit $? in $(elapsed "$t0") s"
  grep -E "failed|Error" "$res/asv_history.log" | head -10
  (cd "$proj" && $py -m fwdasv export --machine $machine --bench '^forward\.Qwen3_0_6B\.' \
    --format markdown > "$res/history.md" 2> "$res/history_export.err")
  echo "export exit $?"; head -20 "$res/history.md"
  tar czf "$res/history_results.tgz" -C "$proj" results 2>/dev/null
  ;;
slow)
  read -r csrc_base csrc_head < <(by_subject CSRC_SUBJECT)
  check refused "$csrc_base" "$csrc_head" --no-explain
  read -r slow_base slow_head < <(by_subject SLOW_SUBJECT)
  # EXPLAIN=1: profile the worse pair and keep its kernel diff (`fwdasv explain`'s table in
  # the comment, the kernels.json files under .fwdasv-explain/ copied to $res/explain).
  if [ "${EXPLAIN:-0}" = 1 ]; then
    check slow "$slow_base" "$slow_head" --explain
    [ -d "$proj/.fwdasv-explain" ] && cp -r "$proj/.fwdasv-explain" "$res/explain"
  else
    check slow "$slow_base" "$slow_head" --no-explain
  fi ;;
noop)
  # The commit after the slow one: Python only, off the forward.
  read -r _ slow_head < <(by_subject SLOW_SUBJECT)
  next=$(awk -v h="$slow_head" 'found {print $1; exit} $1 == h {found=1}' "$repo.commits")
  check noop "$slow_head" "$next" --no-explain ;;
fast)
  # The slow pair reversed: BASE the slow commit, HEAD its parent.
  read -r slow_base slow_head < <(by_subject SLOW_SUBJECT)
  check fast "$slow_head" "$slow_base" --no-explain ;;
*) echo "unknown part $part"; exit 2 ;;
esac
step "done ($part), wall $(elapsed "$started") s"
ls -la "$res"
