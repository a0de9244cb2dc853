#!/usr/bin/env bash
# The verdict runs with vLLM 0.33 from the offline bundle, in four device calls made back to
# back on one `nvidia-h200` (the machine forgets everything 30 s after a call; a call carries
# at most 64 MiB, so the bundle arrives in its three parts, asv's wheels with part b):
#
#   1. carry [".vllm-offline/a"]           bash bench/h200/verdicts_vllm.sh a
#      unpack part a (the call's 64 MiB hold nothing else)
#   2. carry [".vllm-offline/b", ".whl"]   bash bench/h200/verdicts_vllm.sh b
#      unpack part b; asv from the wheels; the GPU-marked tests; the verdict chain: a ~1%
#      real regression through asv, found, confirmed (and explained), no-op commits after it
#   3. carry [".vllm-offline/c"]           bash bench/h200/verdicts_vllm.sh c
#      unpack part c; vLLM at two commits of a local vLLM repository, diffed through
#      --profile-dir (vllm_explain.sh); timing protocols beside vLLM's bench in one run
#   4. carry []                            bash bench/h200/verdicts_vllm.sh d
#      `fwdasv demo` end to end without network (demo.sh)
#
# Read-only for the hardware. Everything lands under /tmp/fwdasv-gpu/<phase>; the summaries,
# verdicts_vllm_<phase>.log and a tarball go to $OUT.
set -u
phase=${1:?phase: a | b | c | d}
. "$(dirname "$0")/stage.sh"
RES=/tmp/fwdasv-gpu/$phase
OUT=${OUT:-$RES/out}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/verdicts_vllm_$phase.log") 2>&1
pack() {
  tar czf "$OUT/$phase.tgz.tmp" -C "$RES" --exclude=out --exclude='*.trace.json.gz' \
    --exclude=env --exclude='*/env/*' --exclude=tinylm --exclude=gpulm --exclude='chain-work' . \
    2>/dev/null && mv "$OUT/$phase.tgz.tmp" "$OUT/$phase.tgz"
}

step "machine ($phase)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
echo "checkout $PWD"

case $phase in
a)
  step "unpack part a"
  stage_unpack a
  $py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
  ;;
b)
  step "unpack part b"
  stage_unpack b
  step "asv from the carried wheels (the .pth: for every process asv starts without PYTHONPATH)"
  stage_asv || exit 2
  stage_pth
  (cd / && env -u PYTHONPATH $py -c 'import asv, fwdasv; print("asv", asv.__version__, "| fwdasv", fwdasv.__file__)')
  step "GPU-marked tests (tests/conftest.py imports asv)"
  timeout 150 $py -m pytest -q -p no:cacheprovider -m gpu \
    tests/engine/test_capture.py tests/engine/test_profile.py 2>&1 | tee "$RES/pytest_gpu.txt" | tail -15
  step "verdict chain: a small real regression through asv, found and confirmed"
  CHAIN_WORK=$RES/chain-work CHAIN_ASV_TIMEOUT_S=330 timeout 480 \
    $py bench/h200/verdict_chain.py --out "$RES/chain" --before 4 --after 4 2>&1 | tail -60
  cp "$RES/chain/summary.json" "$OUT/chain_summary.json" 2>/dev/null
  ;;
c)
  step "unpack part c"
  stage_vllm || { echo "bundle not staged: run phases a and b first"; exit 2; }
  export PYTHONPATH="$PYTHONPATH:$PWD"
  step "vLLM at two commits of a local vLLM repository, diffed through --profile-dir"
  timeout 260 bash bench/h200/vllm_explain.sh "$RES/vllm-explain"
  cp "$RES"/vllm-explain/explain-*.txt "$OUT/" 2>/dev/null
  pack
  step "timing protocols beside vLLM's bench, one run"
  timeout 330 $py bench/h200/measure_protocol.py --out "$RES/protocol" \
    --protocols steady,duty-cycled --rounds 2 --deadline-s 300 \
    --vllm-model "$VLLM_OFFLINE_HOME/models/llama-3.1-8b" --vllm-entry module 2>&1 | tail -30
  cp "$RES/protocol/summary.md" "$OUT/protocol_summary.md" 2>/dev/null
  ;;
d)
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"  # asv: unpacked by call b
  step "fwdasv demo without network"
  RES=$RES/demo OUT=$OUT DEMO_TIMEOUT_S=${DEMO_TIMEOUT_S:-460} \
    ENV_SPEED_ARGS="--kinds after --repeat 1 --commits 3" bash bench/h200/demo.sh
  ;;
esac
pack
step "done ($phase)"
ls -la "$OUT"
