#!/usr/bin/env bash
# On one GPU: `fwdasv check BASE HEAD` on the demo repository (fwdasv/demo/project.py), timed
# by fwdasv's engine with CUDA graphs: the injected commit against its parent (exit 1, both
# cases `worse`, explained: the ops that replaced the fused attention) and a README-only pair
# (exit 0). asv comes from the carried wheels, fwdasv is this checkout; no vLLM needed.
#
#   device run, kind nvidia-h200 (or nvidia-h100-x1), carry [".whl"], timeout_s 600:
#   bash bench/h200/check_demo.sh
#
# Under $OUT/check-demo: each check's comment (markdown), progress (stderr), exit status;
# check_demo.log has everything. Knobs: SLOW_TIMEOUT (default 330), NOOP_TIMEOUT (default
# 180), WORK. Changes no GPU setting.
set -u
. "$(dirname "$0")/stage.sh"
W=${WORK:-/tmp/fwdasv-check-demo}
OUT=${OUT:-$W/out}
res=$OUT/check-demo
mkdir -p "$W" "$res"
exec > >(tee -a "$res/check_demo.log") 2>&1
started=$(date +%s.%N)

step "machine"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
stage_asv || exit 2
stage_pth
export FWDASV_LOG_DIR=$W/logs
repo=$W/tinylm proj=$W/proj
if [ ! -d "$repo/.git" ]; then
  step "the demo repository"
  $py -c 'import sys; from pathlib import Path; from fwdasv.demo.project import build_project
build_project(Path(sys.argv[1]))' "$repo" || exit 2
fi
if [ ! -f "$proj/asv.conf.json" ]; then
  step "fwdasv init (the demo's target and cases)"
  $py -m fwdasv init --repo "$repo" --target tinylm.bench:target \
    --case 'decode_bs8_2k=8*1@2048' --case 'prefill_512=512' --dir "$proj" || exit 2
fi
slow=$(git -C "$repo" log --format=%H --grep='^Support attention logit soft-capping$' main)
readme=$(git -C "$repo" log --format=%H --grep='^README: how to run the forward bench$' main)

check() {  # check NAME BASE HEAD SECONDS [options]
  local name=$1 base=$2 head=$3 seconds=$4 t0 status; shift 4
  step "fwdasv check ${base:0:8} ${head:0:8} ($name: $(git -C "$repo" log -1 --format=%s "$head"))"
  t0=$(date +%s.%N)
  (cd "$proj" && timeout "$seconds" $py -m fwdasv check "$base" "$head" --format markdown \
    --output "$res/$name.md" "$@" > /dev/null 2> "$res/$name.err")
  status=$?
  echo "$status" > "$res/$name.status"
  echo "check $name exit $status in $(elapsed "$t0") s"
  cat "$res/$name.md" 2>/dev/null; echo "--- stderr (last 20 lines)"; tail -20 "$res/$name.err"
}

check slow "$(git -C "$repo" rev-parse "$slow~1")" "$slow" "${SLOW_TIMEOUT:-330}"
check noop "$(git -C "$repo" rev-parse "$readme~1")" "$readme" "${NOOP_TIMEOUT:-180}" --no-explain
step "done, wall $(elapsed "$started") s"
ls -la "$res"
