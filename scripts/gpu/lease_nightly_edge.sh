#!/usr/bin/env bash
# issue 19's H200 must-show, in ONE device call of at most 5 minutes: a user repository
# (`gpulm`, fwdasv's decoder with Llama-3-8B-sized layers) whose NEWEST commit adds ~1%
# (one more elementwise kernel per layer); `fwdasv nightly` without clock locking, the
# night that commit lands, must report it `confirmed` and exit 1
# (scripts/gpu/nightly_edge.py). asv comes as wheels (.whl, no network); torch is the
# device's. Read-only for the hardware: no clock, power or persistence change.
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 320:
#   DEADLINE_S=290 bash scripts/gpu/lease_nightly_edge.sh
#
# Prints the summary (nightly's exit, the newest commit's finding: status, percent, z
# against its threshold, the re-measured pair and its confirmation) and "[edge] OK" or
# "[edge] MISSED"; $OUT gets edge_summary.json, the logs and lease.log.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
RES=${RES:-/tmp/fwdasv-edge-lease}
OUT=${OUT:-$RES/out}
DEADLINE_S=${DEADLINE_S:-290}
py=${PYTHON:-python3}
mkdir -p "$RES" "$OUT"
start=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - start) )); }
exec > >(tee -a "$OUT/lease.log") 2>&1

echo "=== machine ($(date -u +%H:%M:%S))"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
if ! $py -c 'import asv' 2>/dev/null; then
  # shellcheck disable=SC2086
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
# asv starts benchmark processes without PYTHONPATH: a .pth puts the checkout and asv first.
site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD" /tmp/site > "$site_dir/zz-fwdasv-lease.pth" || echo "no .pth written"
(cd / && env -u PYTHONPATH $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')

echo "=== nightly the night a ~1% regression lands ($(left) s left)"
EDGE_WORK=$RES/work timeout "$(( $(left) - 5 ))" $py scripts/gpu/nightly_edge.py --out "$RES/edge" 2>&1 | tail -60
cp "$RES/edge/summary.json" "$OUT/edge_summary.json" 2>/dev/null
for f in "$RES"/edge/*.log "$RES"/edge/*.out; do [ -f "$f" ] && cp "$f" "$OUT/"; done
echo "=== done ($(left) s left)"
ls -la "$OUT"
