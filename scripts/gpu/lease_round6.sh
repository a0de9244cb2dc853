#!/usr/bin/env bash
# This round's H200 runs (issues 18, 19, 21), in device calls made back to back on one warm
# `nvidia-h200` (the machine forgets everything 30 s after a call; a call carries at most 64 MiB
# and brings back at most 8 files, so each phase packs its results into one tarball):
#
#   1. carry [".vllm-offline/a"]           bash scripts/gpu/lease_round6.sh a
#      unpack part a of vLLM's offline bundle (the call's 64 MiB hold nothing else)
#   2. carry [".vllm-offline/b", ".whl"]   bash scripts/gpu/lease_round6.sh b
#      unpack part b; asv from the wheels; issue 19's same-night gate on the engine
#      (lease_nightly_edge.sh: the newest commit adds ~1%, nightly confirms it, exits 1)
#   3. carry [".vllm-offline/c"]           bash scripts/gpu/lease_round6.sh c
#      unpack part c; issue 18: a local vLLM history, init --vllm over /tmp/vsite, asv run part 1
#   4. carry []                            bash scripts/gpu/lease_round6.sh d   (asv run part 2)
#   5. carry []                            bash scripts/gpu/lease_round6.sh e   (regressions, confirm)
#   6. carry []                            bash scripts/gpu/lease_round6.sh f   (bisect, explain)
#   7. carry []                            bash scripts/gpu/lease_round6.sh g
#      issue 21: explain names an added op, its source line and its kernel (explain_source.py)
#
# The order is the priority: vLLM (issue 18) before the engine's explain, so that a session's
# 30 minutes of device time, if they run out, cut the least needed part.
# Read-only for the hardware: no clock, power or persistence change.
set -u
phase=${1:?phase: a | b | c | d | e | f | g}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
FINAL=${OUT:-/tmp/fwdasv-gpu/final}
RES=/tmp/fwdasv-gpu/$phase
mkdir -p "$RES" "$FINAL"
exec > >(tee -a "$FINAL/lease_$phase.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
py=python3
pack() { tar czf "$FINAL/$phase.tgz" -C "$RES" --exclude='*.trace.json.gz' --exclude='env' . 2>/dev/null; }
pth() {  # the checkout, asv's wheels and (once staged) vLLM, for processes asv starts without PYTHONPATH
  local site_dir; site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$PWD" /tmp/site "$@" > "$site_dir/zz-fwdasv-lease.pth"
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
}
step "machine ($phase)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
case $phase in
a) bash .vllm-offline/a/stage.sh
   $py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())' ;;
b) bash .vllm-offline/b/stage.sh
   step "asv from the carried wheels"
   $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
   pth
   (cd / && $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')
   step "issue 19: the night a ~1% regression lands (lease_nightly_edge.sh)"
   OUT=$RES/edge-out RES=$RES/edge DEADLINE_S=${EDGE_DEADLINE_S:-270} bash scripts/gpu/lease_nightly_edge.sh 2>&1 | tail -50
   cp "$RES/edge-out/edge_summary.json" "$FINAL/edge_summary.json" 2>/dev/null ;;
g) pth
   step "issue 21: explain names the added op, its line and its kernel (explain_source.py)"
   OUT=$RES RES=$RES/xs-work ROUNDS=${ROUNDS:-2} timeout ${XS_TIMEOUT_S:-200} bash scripts/gpu/lease_explain_source.sh 2>&1 | tail -50
   cp "$RES/explain-source/explain.txt" "$FINAL/explain_source.txt" 2>/dev/null
   cp "$RES/explain-source/summary.json" "$FINAL/explain_source_summary.json" 2>/dev/null ;;
c|d|e|f)
   # shellcheck disable=SC1091
   if [ -f .vllm-offline/c/stage.sh ]; then source .vllm-offline/c/stage.sh; fi
   pth /tmp/vsite
   part=$(case $phase in c) echo run1;; d) echo run2;; e) echo verdicts;; f) echo explain;; esac)
   OUT=$RES/vllm timeout 580 bash scripts/gpu/lease_vllm_history.sh "$part"
   for f in cost.md regressions.txt confirm.txt bisect.txt explain.txt; do
     [ -f "$RES/vllm/$f" ] && cp "$RES/vllm/$f" "$FINAL/${phase}_$f"
   done ;;
esac
pack
step "done ($phase)"
ls -la "$FINAL"
