#!/usr/bin/env bash
# The same-night gate on one H200, in ONE device call of at most 5 minutes: a user repository
# (`gpulm`, fwdasv's decoder with Llama-3-8B-sized layers) whose NEWEST commit adds ~1% (one
# more elementwise kernel per layer); `fwdasv nightly` without clock locking, the night that
# commit lands, must report it `confirmed` and exit 1 (bench/h200/nightly_edge.py). asv comes
# from the carried wheels (stage.sh); torch is the device's. Read-only for the hardware.
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 320:
#   DEADLINE_S=290 bash bench/h200/nightly_edge.sh
#
# Prints the summary (nightly's exit, the newest commit's finding: status, percent, z against
# its threshold, the re-measured pair and its confirmation) and "[edge] OK" or "[edge] MISSED";
# $OUT gets edge_summary.json, the logs and nightly_edge.log.
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/edge}
OUT=${OUT:-$RES/out}
DEADLINE_S=${DEADLINE_S:-290}
mkdir -p "$RES" "$OUT"
start=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - start) )); }
exec > >(tee -a "$OUT/nightly_edge.log") 2>&1

echo "=== machine ($(date -u +%H:%M:%S))"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
stage_asv || exit 2
# asv starts benchmark processes without PYTHONPATH: a .pth puts the checkout and asv first.
stage_pth
(cd / && env -u PYTHONPATH $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')

echo "=== nightly the night a ~1% regression lands ($(left) s left)"
EDGE_WORK=$RES/work timeout "$(( $(left) - 5 ))" $py bench/h200/nightly_edge.py --out "$RES/edge" 2>&1 | tail -60
cp "$RES/edge/summary.json" "$OUT/edge_summary.json" 2>/dev/null
for f in "$RES"/edge/*.log "$RES"/edge/*.out; do [ -f "$f" ] && cp "$f" "$OUT/"; done
echo "=== done ($(left) s left)"
ls -la "$OUT"
