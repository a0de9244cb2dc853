#!/usr/bin/env bash
# The verdict runs on one H200, in ONE device call (every call pays a machine start); vLLM is
# not needed, asv comes from the carried wheels (stage.sh). Read-only for the hardware. Steps,
# most important first, each bounded by what is left of DEADLINE_S, each leaving its summary
# in $OUT as soon as it ends:
#
#   1. verdict chain: a ~1.5% real regression through asv, found and confirmed, no-op
#      commits after it (bench/h200/verdict_chain.py)
#   2. kernel diff: the 8B-layer decoder with one kernel added per layer
#      (bench/h200/measure_explain.py)
#   3. timing protocols: steady vs duty-cycled, fresh processes interleaved
#      (bench/h200/measure_protocol.py)
#   4. `fwdasv demo` without network, with what time is left
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 470:
#   DEADLINE_S=440 bash bench/h200/verdicts.sh
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu}
OUT=${OUT:-$RES/out}
DEADLINE_S=${DEADLINE_S:-440}
mkdir -p "$RES" "$OUT"
start=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - start) )); }
# budget MAX: the smaller of MAX and what the deadline leaves (at least 1 s)
budget() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S), $(left) s left)"; }
pack() { tar czf "$OUT/all.tgz.tmp" -C "$RES" --exclude=out --exclude='*.trace.json.gz' \
  --exclude='env' --exclude='*/env/*' --exclude='tinylm' --exclude='gpulm' . 2>/dev/null \
  && mv "$OUT/all.tgz.tmp" "$OUT/all.tgz"; }
exec > >(tee -a "$OUT/verdicts.log") 2>&1

step "machine"
date -u
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
stage_asv || exit 2
# asv starts benchmark processes without PYTHONPATH: a .pth puts the checkout and asv first.
stage_pth
(cd / && env -u PYTHONPATH $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')

step "1/4 verdict chain: a small real regression through asv"
CHAIN_WORK=$RES/chain-work CHAIN_ASV_TIMEOUT_S=$(budget 200) \
  timeout "$(budget 260)" $py bench/h200/verdict_chain.py --out "$RES/chain" 2>&1 | tail -45
cp "$RES/chain/summary.json" "$OUT/chain_summary.json" 2>/dev/null
pack

step "2/4 kernel diff: one kernel added per layer"
timeout "$(budget 80)" $py bench/h200/measure_explain.py --out "$RES/explain" 2>&1 | tail -30
cp "$RES/explain/summary.json" "$OUT/explain_summary.json" 2>/dev/null
cp "$RES/explain/explain.md" "$OUT/explain.md" 2>/dev/null
pack

step "3/4 timing protocols: steady vs duty-cycled"
timeout "$(budget 110)" $py bench/h200/measure_protocol.py --out "$RES/protocol" \
  --protocols steady,duty-cycled --rounds 2 --deadline-s "$(budget 95)" 2>&1 | tail -25
cp "$RES/protocol/summary.md" "$OUT/protocol_summary.md" 2>/dev/null
pack

step "4/4 fwdasv demo without network"
FWDASV_LOG_DIR=$RES/demo-logs timeout "$(budget 400)" $py -m fwdasv demo --dir "$RES/fwdasv-demo" \
  > "$RES/demo.log" 2>&1
echo "demo exit $?"
tail -45 "$RES/demo.log"
cp "$RES/demo.log" "$OUT/demo.log"
pack
step "done"
ls -la "$OUT"
