#!/usr/bin/env bash
# On one H200: `fwdasv explain` names an added elementwise op, its source line and the kernel
# it launched, on top (bench/h200/explain_source.py says how). asv comes from the carried
# wheels (stage.sh); fwdasv is this checkout. Nothing here changes GPU settings.
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 300:
#   bash bench/h200/explain_source.sh
#
# Under $OUT/explain-source: explain.txt (the table), explain.json, explain.err (progress),
# summary.json (checks), profiles/ (6 kernels.json + traces), and explain_source.log
# (everything). Expected wall time: 2-3 minutes. ROUNDS: profiles a side (default 3).
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/explain-source}
export OUT=${OUT:-$RES/out}
mkdir -p "$RES" "$OUT/explain-source"
exec > >(tee -a "$OUT/explain-source/explain_source.log") 2>&1

step "machine"
nvidia-smi -L 2>&1 | head -2
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.cuda.is_available())'
git --version || { echo "NO GIT: the script builds a git repository; cannot run"; exit 2; }

step "asv from the carried wheels"
stage_asv || exit 2
stage_pth

step "explain HEAD~1 HEAD (one added tanh per layer), 3 profiles a side"
timeout 200 $py bench/h200/explain_source.py --out "$OUT/explain-source" --work "$RES/work" \
  --rounds "${ROUNDS:-3}" --timeout-s 170
status=$?
echo "explain_source exit $status"
cat "$OUT/explain-source/summary.json" 2>/dev/null
exit $status
