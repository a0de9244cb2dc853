#!/usr/bin/env bash
# On one H200 without network: a script-style model repository (model.py at the root, no
# packaging; tests/script_model.py, 6 commits, the 4th doubles the MLP) with its target
# outside it, tracked as a user would: fwdasv init --target-path (check at HEAD on CUDA), hw
# machine (a GPU entry), asv run ALL (CUDA graphs), regressions, compare, then the
# environment each benchmark process recorded (torch, torch's CUDA).
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 420:
#   bash bench/h200/script_repo.sh
#
# Expected wall time: 2-4 min (one env creation, 6 commits x one bench process).
# Under $OUT: script_repo.log (everything), init.txt, regressions.txt, compare.txt,
# ran.jsonl (the recorded environments), summary.md.
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/script-repo}
export OUT=${OUT:-$RES/out}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/script_repo.log") 2>&1

step "machine"
nvidia-smi -L 2>&1 | head -2
$py -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| torch cuda", torch.version.cuda, "| available", torch.cuda.is_available())'

step "asv from the carried wheels"
stage_asv || exit 2
stage_pth

step "the repository and the target outside it"
export HOME=$RES/home
rm -rf "$HOME"; mkdir -p "$HOME"
(cd tests && $py -c "
import script_model as s
hashes = s.build_repo('$HOME/src/ngmodel', commits=6, slow_index=3)
s.write_target('$HOME/ngbench')
print('commits', ' '.join(h[:8] for h in hashes), '| slow', hashes[3][:8])
open('$RES/hashes', 'w').write('\n'.join(hashes))
") || exit 2
before=$(sed -n 3p "$RES/hashes"); slow=$(sed -n 4p "$RES/hashes")

step "fwdasv init --target-path (no setup.py/pyproject: the checkout goes on the path)"
cd "$HOME"
$py -m fwdasv init --repo src/ngmodel --target ngbench:target --target-path ngbench \
  --case prefill_128=128 --case decode_bs8=8*1@256 --dir ng-asv > "$OUT/init.txt" 2>&1
echo "init exit $?"; cat "$OUT/init.txt"
cd ng-asv || exit 2
sed -i 's/warmup_s = 1.0/warmup_s = 0.2/' benchmarks/forward.py

step "hw machine, asv run ALL"
$py -m fwdasv hw machine --name h200-script 2>&1 | tail -3
started=$(date +%s)
timeout 300 $py -m asv run --record-samples --launch-method spawn --machine h200-script ALL > "$RES/asv-run.log" 2>&1
echo "asv run exit $? in $(( $(date +%s) - started )) s"; grep -E "track_latency|prefill_128 |decode_bs8 |Installing|rror" "$RES/asv-run.log" | head -40

step "regressions, compare $before $slow"
$py -m fwdasv regressions > "$OUT/regressions.txt" 2>&1; echo "regressions exit $?"; cat "$OUT/regressions.txt"
$py -m fwdasv compare "$before" "$slow" --only-changed > "$OUT/compare.txt" 2>&1; echo "compare exit $?"; cat "$OUT/compare.txt"

step "what each benchmark process recorded"
cat results/.fwdasv-ran/*.jsonl > "$OUT/ran.jsonl" 2>/dev/null; head -3 "$OUT/ran.jsonl"
$py - <<PY > "$OUT/summary.md"
import json, torch
rows = [json.loads(l) for l in open("$OUT/ran.jsonl")]
print(f"records: {len(rows)}, commits: {len({r['commit'] for r in rows})}")
print("torch recorded:", sorted({r['torch'] for r in rows}), "| this torch:", torch.__version__)
print("torch CUDA recorded:", sorted({str(r['torch_cuda']) for r in rows}), "| torch.version.cuda:", torch.version.cuda)
PY
cat "$OUT/summary.md"
