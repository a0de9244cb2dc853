#!/usr/bin/env bash
# On one H200: `fwdasv check BASE HEAD` (the pull-request check) over vLLM's compiled base,
# on real pull-request pairs of a local vLLM history (make_vllm_history.py, from the offline
# bundle's vLLM 0.33 Python):
#   slow  the ~1% Qwen3 commit against its parent (Python only: two more elementwise kernels a
#         layer) -> exit 1, the case `worse` with its interval; and the csrc/ commit against its
#         parent (compiled sources differ from the base's) -> refused in one line, exit 2,
#         before anything is installed or measured
#   noop  a Python-only pair off the forward (the commit after the slow one) -> exit 0
# Each part is one device call (kind nvidia-h200, timeout_s 600), made back to back after the
# calls that unpack parts a and b of the bundle (bench/h200/split_a.sh join with a1, then a2;
# bash .vllm-offline/b/stage.sh); the first carries [".vllm-offline/c", ".whl"]:
#
#   bash bench/h200/check_vllm.sh slow
#   bash bench/h200/check_vllm.sh noop
#
# Under $OUT/check-vllm: each check's comment (markdown, stdout and --output), progress
# (stderr) and exit status; check_vllm.log has everything. Knobs: CASES (FWDASV_CASES,
# default decode_bs1_1k: one case keeps 6-12 vLLM processes inside a call), SAMPLES
# (FWDASV_SAMPLES, default 5), CHECK_TIMEOUT (seconds a check may take, default 540), WORK,
# VLLM_SITE. Changes no GPU setting; a second call reuses the history and the project, and
# a check the time limit cut short goes on from the processes it kept (about 50 s each on the
# H200: the slow pair's 6+6 and the no-op's 9+9 take two calls; measurements, section 33).
set -u
part=${1:?part: slow | noop}
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
    --output "$res/$name.md" --format markdown "$@" > "$res/$name.out" 2> "$res/$name.err")
  status=$?
  echo "$status" > "$res/$name.status"
  echo "check $name exit $status in $(elapsed "$t0") s"
  cat "$res/$name.out"; echo "--- stderr (last 25 lines)"; tail -25 "$res/$name.err"
}

case $part in
slow)
  read -r csrc_base csrc_head < <(by_subject CSRC_SUBJECT)
  check refused "$csrc_base" "$csrc_head" --no-explain
  read -r slow_base slow_head < <(by_subject SLOW_SUBJECT)
  check slow "$slow_base" "$slow_head" --no-explain ;;
noop)
  # The commit after the slow one: Python only, off the forward.
  read -r _ slow_head < <(by_subject SLOW_SUBJECT)
  next=$(awk -v h="$slow_head" 'found {print $1; exit} $1 == h {found=1}' "$repo.commits")
  check noop "$slow_head" "$next" --no-explain ;;
*) echo "unknown part $part"; exit 2 ;;
esac
step "done ($part), wall $(elapsed "$started") s"
ls -la "$res"
