#!/usr/bin/env bash
# The H200 runs still owed by issues 9-12, in four device calls made back to back on one
# `nvidia-h200` (the machine forgets everything 30 s after a call; a call carries at most
# 64 MiB, so vLLM's offline bundle arrives in its three parts, asv's wheels with part b):
#
#   1. carry [".vllm-offline/a"]           bash scripts/gpu/lease_finish.sh a
#      unpack part a (the call's 64 MiB hold nothing else)
#   2. carry [".vllm-offline/b", ".whl"]   bash scripts/gpu/lease_finish.sh b
#      unpack part b; asv from the wheels; the GPU-marked tests; the verdict chain
#      (issue 9): a ~1% real regression through asv, found, confirmed (and explained),
#      no-op commits after it
#   3. carry [".vllm-offline/c"]           bash scripts/gpu/lease_finish.sh c
#      unpack part c; vLLM at two commits of a local vLLM repository, diffed through
#      --profile-dir (issue 10); timing protocols beside vLLM's bench in one run (issue 11)
#   4. carry []                            bash scripts/gpu/lease_finish.sh d
#      `fwdasv demo` end to end without network (issue 12)
#
# Lease 5 (2026-12-02, docs/measurements.md) ran a, b, c, d in that order, about 20 minutes
# of device time; the GPU-marked tests ran in calls of their own after d (they were in
# call a then, where asv was not there yet to import).
#
# Read-only for the hardware: no clock, power or persistence change. Everything lands
# under $RES (/tmp/fwdasv-gpu/<phase>); the summaries and a tarball go to $OUT.
set -u
phase=${1:?phase: a | b | c | d}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
RES=/tmp/fwdasv-gpu/$phase
OUT=${OUT:-$RES/out}
py=python3
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/lease_$phase.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
pack() {
  tar czf "$OUT/$phase.tgz.tmp" -C "$RES" --exclude=out --exclude='*.trace.json.gz' \
    --exclude=env --exclude='*/env/*' --exclude=tinylm --exclude=gpulm --exclude='chain-work' . \
    2>/dev/null && mv "$OUT/$phase.tgz.tmp" "$OUT/$phase.tgz"
}
# asv (phase b unpacks it into /tmp/site) and this checkout, for this shell and, through a
# .pth, for every process asv starts without PYTHONPATH.
use_asv() {
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
}

step "machine ($phase)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
echo "checkout $PWD"

case $phase in
a)
  step "unpack part a"
  bash .vllm-offline/a/stage.sh
  $py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
  ;;
b)
  step "unpack part b"
  bash .vllm-offline/b/stage.sh
  step "asv from the carried wheels"
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
  use_asv
  site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n%s\n' "$PWD" /tmp/site > "$site_dir/zz-fwdasv-lease.pth"
  (cd / && env -u PYTHONPATH $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')
  step "GPU-marked tests (tests/conftest.py imports asv)"
  timeout 150 $py -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_engine_gpu.py tests/test_profile_explain.py 2>&1 | tee "$RES/pytest_gpu.txt" | tail -15
  step "verdict chain: a small real regression through asv, found and confirmed"
  CHAIN_WORK=$RES/chain-work CHAIN_ASV_TIMEOUT_S=330 timeout 480 \
    $py scripts/gpu/verdict_chain.py --out "$RES/chain" --before 4 --after 4 2>&1 | tail -60
  cp "$RES/chain/summary.json" "$OUT/chain_summary.json" 2>/dev/null
  ;;
c)
  step "unpack part c"
  # shellcheck disable=SC1091
  source .vllm-offline/c/stage.sh
  [ -n "${VLLM_OFFLINE_HOME:-}" ] || { echo "bundle not staged: run phases a and b first"; exit 2; }
  export PYTHONPATH="$PYTHONPATH:$PWD"
  step "vLLM at two commits of a local vLLM repository, diffed through --profile-dir"
  timeout 260 bash scripts/gpu/vllm_explain.sh "$RES/vllm-explain"
  cp "$RES"/vllm-explain/explain-*.txt "$OUT/" 2>/dev/null
  pack
  step "timing protocols beside vLLM's bench, one run"
  timeout 330 $py scripts/gpu/measure_protocol.py --out "$RES/protocol" \
    --protocols steady,duty-cycled --rounds 2 --deadline-s 300 \
    --vllm-model "$VLLM_OFFLINE_HOME/models/llama-3.1-8b" --vllm-entry module 2>&1 | tail -30
  cp "$RES/protocol/summary.md" "$OUT/protocol_summary.md" 2>/dev/null
  ;;
d)
  use_asv
  step "fwdasv demo without network"
  RES=$RES/demo OUT=$OUT DEMO_TIMEOUT_S=${DEMO_TIMEOUT_S:-460} \
    ENV_SPEED_ARGS="--kinds after --repeat 1 --commits 3" bash scripts/gpu/lease_demo.sh
  ;;
esac
pack
step "done ($phase)"
ls -la "$OUT"
