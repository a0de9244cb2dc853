#!/usr/bin/env bash
# Issue 21 §3 on one H200: `fwdasv explain` names an added elementwise op, its source
# line and the kernel it launched, on top (scripts/gpu/explain_source.py says how).
#
# The host has python3 with torch (CUDA), click, numpy and nvidia-ml-py, but no asv
# and no package index: asv and its small dependencies come as wheels carried in .whl,
# unpacked into /tmp/site (as lease_demo.sh does). fwdasv is this checkout. Nothing
# here changes GPU settings (no clocks, no MIG, no reset).
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 300:
#   bash scripts/gpu/lease_explain_source.sh
#
# Under $OUT/explain-source: explain.txt (the table), explain.json, explain.err
# (progress), summary.json (checks), profiles/ (6 kernels.json + traces), and
# lease_explain_source.log (everything). Expected wall time: 2-3 minutes.
set -u
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
RES=${RES:-/tmp/fwdasv-gpu/explain-source}
export OUT=${OUT:-$RES/out}
py=${PYTHON:-python3}
mkdir -p "$RES" "$OUT/explain-source"
exec > >(tee -a "$OUT/explain-source/lease_explain_source.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
nvidia-smi -L 2>&1 | head -2
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
git --version || { echo "NO GIT: the script builds a git repository; cannot run"; exit 2; }

step "asv from the carried wheels"
if ! $py -c 'import asv' 2>/dev/null; then
  wheels=$(ls .whl/*.whl .whl-dev/*.whl 2>/dev/null | head -200)
  if [ -z "$wheels" ]; then echo "no asv and no .whl/*.whl: carry .whl"; exit 2; fi
  # shellcheck disable=SC2086
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels || exit 2
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD" /tmp/site > "$site_dir/zz-fwdasv-lease.pth" 2>/dev/null \
  && echo "wrote $site_dir/zz-fwdasv-lease.pth" || echo "relying on PYTHONPATH"

step "explain HEAD~1 HEAD (one added tanh per layer), 3 profiles a side"
timeout 200 $py scripts/gpu/explain_source.py --out "$OUT/explain-source" --work "$RES/work" \
  --rounds "${ROUNDS:-3}" --timeout-s 170
status=$?
echo "explain_source exit $status"
cat "$OUT/explain-source/summary.json" 2>/dev/null
exit $status
