#!/usr/bin/env bash
# On one H200: `fwdasv explain` names vLLM's kernel, the aten op that launched it and the model
# line a commit added, marked changed here, with the time each part took. A local vLLM history
# (make_vllm_history.py, from the offline bundle's vLLM 0.33 Python; its slow commit casts
# Qwen3's attention output to float32 and back: Python only), `fwdasv init --vllm` over the
# bundle's compiled files, then `fwdasv explain PARENT SLOW forward.Qwen3_0_6B.track_latency
# --case decode_bs1_1k`: each bench process is vLLM's bench plus one eager forward of the same
# batch (fwdasv.backends.vllm_explain) that ties the graph's kernels to their ops and lines.
#
#   device run, kind nvidia-h200, carry [".vllm-offline/c", ".whl"] (parts a and b of the bundle
#   unpacked by earlier calls: bash .vllm-offline/a/stage.sh, then b), timeout_s 600:
#   bash bench/h200/vllm_explain_source.sh
#
# Under $OUT/vllm-explain-source (vllm_explain_source.py summarize): explain.txt (the table), explain.json, explain.err (progress
# and the time line: profiled runs, eager pass, diff), summary.json (the checks and figures),
# kernels/ (each profile's kernels.json), vllm_explain_source.log (everything). Knobs: ROUNDS
# (profiles a side, default 2: 4 vLLM processes fit one call), CASE (default decode_bs1_1k),
# WORK, VLLM_SITE. Changes no GPU setting; re-running reuses the history and the project.
set -u
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE  # the per-commit trees keep bytecode across commits
W=${WORK:-/tmp/fwdasv-vllm-explain-source}
OUT=${OUT:-$W/out}
res=$OUT/vllm-explain-source
CASE=${CASE:-decode_bs1_1k}
ROUNDS=${ROUNDS:-2}
BENCH=forward.Qwen3_0_6B.track_latency
site=${VLLM_SITE:-/tmp/vsite}
mkdir -p "$W" "$res"
exec > >(tee -a "$res/vllm_explain_source.log") 2>&1
started=$(date +%s.%N)

step "machine"
nvidia-smi -L 2>&1 | head -2
git --version || { echo "NO GIT: the script builds a git repository; cannot run"; exit 2; }

step "the staged bundle, asv, fwdasv from this checkout"
stage_vllm_run "$W/logs" || exit 2
repo=$W/vllm-repo proj=$W/proj

fresh=1
[ -f "$proj/asv.conf.json" ] && fresh=0
stage_vllm_project "$repo" "$proj" || exit 2
if [ $fresh = 1 ]; then
  (cd "$proj" && $py -m fwdasv hw machine --name h200) || exit 2
fi
read -r good bad < <($py bench/h200/vllm_explain_source.py commits "$W/vllm-repo.commits")
echo "GOOD $good (its parent), BAD $bad ($(git -C "$repo" log -1 --format=%s "$bad"))"
git -C "$repo" diff --stat "$good" "$bad"

step "fwdasv explain ${good:0:8} ${bad:0:8} $BENCH --case $CASE --rounds $ROUNDS"
rm -rf "$res/profiles"
t0=$(date +%s.%N)
(cd "$proj" && timeout 500 $py -m fwdasv explain "$good" "$bad" $BENCH --case "$CASE" \
  --rounds "$ROUNDS" --profile-dir "$res/profiles" --format json \
  > "$res/explain.json" 2> "$res/explain.err")
status=$?
echo "explain exit $status (1: BAD slower) in $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
tail -20 "$res/explain.err"

step "the table, the checks, the figures"
$py bench/h200/vllm_explain_source.py summarize --res "$res" --repo "$repo" --good "$good" \
  --bad "$bad" --status "$status"
final=$?
rm -rf "$res/profiles"/*/*.trace.json.gz
echo "wall $(awk "BEGIN{print $(date +%s.%N) - $started}") s"
exit $final
