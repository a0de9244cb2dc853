#!/usr/bin/env bash
# On two H200s of one host (`nvidia-h200-x2`): the pipeline suites through an `fwdasv init
# --vllm --base` project, and one vLLM history measured on both GPUs at once (`fwdasv shard`).
# Calls made back to back on one warm machine (each under 10 minutes), after two that unpack
# the offline bundle's parts a and b (as for vllm_history.sh: carry [".vllm-offline/a"] and
# `bash .vllm-offline/a/stage.sh`; then the same for b):
#
#   bash bench/h200/two_gpus.sh pp2      # carry .vllm-offline/c, .whl: history + init; the PP2
#                                        #   suites (vLLM's and fwdasv's decoder over NCCL) at 4
#                                        #   commits on both GPUs, regressions --format json
#   bash bench/h200/two_gpus.sh one      # 6 commits (the ~1% step among them) on GPU 0 alone
#   bash bench/h200/two_gpus.sh shard    # the same 6 on both GPUs at once: wall time against `one`
#   bash bench/h200/two_gpus.sh agree    # 2 commits measured again on the other GPU: agreement
#   bash bench/h200/two_gpus.sh confirm  # findings (each names its GPU's machine); one confirmed
#                                        #   on its own GPU (A and B pinned to it)
#
# Every part re-does the cheap staging it needs and is idempotent (asv skips what it has).
# Never changes GPU settings (clocks stay as they are: both GPUs alike). Results and logs go
# under $OUT (default /tmp/fwdasv-2gpu/out). Knobs: SAMPLES (FWDASV_SAMPLES for every suite,
# default 5: a commit's cost is mostly startup, see docs/measurements.md section 12), CASE
# (confirm's case, default decode_bs1_1k), VLLM_SITE, WORK, PY.
set -u
part=${1:?part: pp2 | one | shard | agree | confirm}
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE  # the per-commit trees keep bytecode across commits
W=${WORK:-/tmp/fwdasv-2gpu}
OUT=${OUT:-$W/out}
CASE=${CASE:-decode_bs1_1k}
site=${VLLM_SITE:-/tmp/vsite}
py=${PY:-$py}
mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/$part.log") 2>&1

[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ] || {
  echo "this part needs 2 GPUs; nvidia-smi -L says:"; nvidia-smi -L; exit 2; }
stage_vllm_run "$W/logs" || exit 2
export FWDASV_VLLM_ENTRY=phases
export FWDASV_SAMPLES=${SAMPLES:-5}
repo=$W/vllm-repo ROOT=$PWD
SUITE='^forward\.Qwen3_0_6B\.'

setup() {  # the history (once) and the project DIR (once each): setup DIR
  stage_vllm_project "$repo" "$1" || exit 2
  # One machine per GPU, as `fwdasv shard` names them (its UUID's digest): "NAME UUID" lines.
  mapfile -t gpus < <($py -c "
from fwdasv.hw.nvml import read_inventory
from fwdasv.hw.shard import gpu_machines
for g in gpu_machines(read_inventory()): print(g.machine, g.uuid)")
  read -r m0 u0 <<< "${gpus[0]}"; read -r m1 u1 <<< "${gpus[1]}"
}

hashes() {  # hashes NAME FIRST LAST: lines FIRST..LAST (1-based) of the history into $W/NAME
  printf '%s\n' "${commits[@]:$(($2 - 1)):$(($3 - $2 + 1))}" > "$W/$1"
  echo "$W/$1"
}

case $part in
pp2) setup "$W/proj-pp2"; cd "$W/proj-pp2"
  $py -m fwdasv hw machine --name h200x2 || exit 2
  # Lines 4-7: commits 3-6, the ~1% Qwen3 step (commit 5) among them.
  step "asv run, the pipeline suites (vLLM's PP2 and fwdasv's DecoderPP2, NCCL), 4 commits"
  t0=$(date +%s.%N)
  timeout 480 $py -m asv run "HASHFILE:$(hashes pp2.hashes 4 7)" --record-samples \
    --skip-existing-successful --machine h200x2 --bench '^pipeline\.' --show-stderr \
    > "$OUT/asv_pp2.log" 2>&1
  echo "asv run exit $? in $(elapsed "$t0") s"
  grep -E "pipeline\.(Qwen3_0_6B_PP2|DecoderPP2)\.track_latency|failed|skipped" "$OUT/asv_pp2.log" | head -30
  step "fwdasv regressions --format json (the pipeline series)"
  timeout 60 $py -m fwdasv regressions --machine h200x2 --format json > "$OUT/pp2_regressions.json"
  echo "exit $?"; head -c 3000 "$OUT/pp2_regressions.json"; echo
  tar czf "$OUT/pp2_results.tgz" -C "$W/proj-pp2" results 2>/dev/null ;;
one) setup "$W/proj-one"; cd "$W/proj-one"
  $py -m fwdasv hw machine --gpus 0 || exit 2
  step "asv run, 6 commits (lines 2-7) on GPU 0 alone ($m0), $SUITE"
  t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$u0 timeout 560 $py -m asv run "HASHFILE:$(hashes six.hashes 2 7)" \
    --record-samples --skip-existing-successful --machine "$m0" --bench "$SUITE" --show-stderr \
    > "$OUT/asv_one.log" 2>&1
  status=$?; wall=$(elapsed "$t0")
  echo "asv run exit $status in $wall s"; echo "$wall" > "$OUT/wall_one.txt" ;;
shard) setup "$W/proj-shard"; cd "$W/proj-shard"
  step "fwdasv shard, the same 6 commits on both GPUs at once, $SUITE"
  t0=$(date +%s.%N)
  timeout 560 $py -m fwdasv shard "HASHFILE:$(hashes six.hashes 2 7)" --bench "$SUITE" \
    > "$OUT/shard.txt" 2>&1
  status=$?; wall=$(elapsed "$t0")
  grep -v '^\[GPU ' "$OUT/shard.txt"
  echo "fwdasv shard exit $status in $wall s"; echo "$wall" > "$OUT/wall_shard.txt"
  [ -f "$OUT/wall_one.txt" ] && awk -v one="$(cat "$OUT/wall_one.txt")" -v two="$wall" \
    'BEGIN{printf "wall time: one GPU %.1f s, two GPUs %.1f s: %.2fx faster\n", one, two, one/two}'
  cp .fwdasv-shards/*/plan.json "$OUT/" 2>/dev/null ;;
agree) setup "$W/proj-shard"; cd "$W/proj-shard"
  # Lines 2 and 3: the first commit of each GPU's share, measured again on the other GPU.
  step "the first commit of each GPU measured on the other one too (both at once)"
  t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$u1 timeout 300 $py -m asv run "HASHFILE:$(hashes on1.hashes 2 2)" \
    --record-samples --skip-existing-successful --machine "$m1" --bench "$SUITE" \
    > "$OUT/asv_agree1.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=$u0 timeout 300 $py -m asv run "HASHFILE:$(hashes on0.hashes 3 3)" \
    --record-samples --skip-existing-successful --machine "$m0" --bench "$SUITE" \
    > "$OUT/asv_agree0.log" 2>&1
  wait; echo "both done in $(elapsed "$t0") s"
  step "GPU 1 against GPU 0 on the same commits (bench/h200/gpu_agreement.py)"
  $py "$ROOT/bench/h200/gpu_agreement.py" --results results --machines "$m0" "$m1" \
    | tee "$OUT/agreement.txt" ;;
confirm) setup "$W/proj-shard"; cd "$W/proj-shard"
  step "fwdasv regressions --format json: every finding names its GPU's machine"
  timeout 120 $py -m fwdasv regressions --format json > "$OUT/shard_regressions.json"
  echo "exit $?"
  $py -c "
import json; found = json.load(open('$OUT/shard_regressions.json'))
rows = found['regressions']
for f in rows: print(f.get('machine'), f.get('status'), f.get('benchmark'), f.get('case'), f.get('percent'))"
  machine=$($py -c "
import json; found = json.load(open('$OUT/shard_regressions.json'))
rows = found['regressions']
hit = [f for f in rows if f.get('case') == '$CASE' and f.get('status') in ('regression', 'suspected')]
print(hit[0]['machine'] if hit else '')")
  [ -n "$machine" ] || { echo "no regression on $CASE to confirm"; exit 1; }
  step "fwdasv confirm on $machine ($CASE): A and B on that machine's GPU, 3 processes a side"
  t0=$(date +%s.%N)
  timeout 480 $py -m fwdasv confirm --machine "$machine" --bench "$CASE" --max-processes 3 \
    --no-explain > "$OUT/confirm.txt" 2>&1
  echo "exit $? in $(elapsed "$t0") s"; cat "$OUT/confirm.txt"
  tar czf "$OUT/shard_results.tgz" -C "$W/proj-shard" results .fwdasv-shards 2>/dev/null ;;
*) echo "unknown part $part"; exit 2 ;;
esac
step "done ($part)"
ls -la "$OUT"
