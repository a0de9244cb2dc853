#!/usr/bin/env bash
# vLLM 0.33 (the offline bundle, staged by stage.sh) at two commits of a local vLLM
# repository, the second a small real change, each profiled by vLLM's own bench
# (--profile-dir), then diffed by `fwdasv explain --files`. The change: Qwen3's attention
# keeps its output in float32 before o_proj and casts back (two more elementwise kernels per
# layer), the kind of "numerics" edit that lands in a model file.
#
#   carry [".vllm-offline/c"] (parts a and b unpacked by earlier calls):
#   bash bench/h200/vllm_explain.sh "$OUT/vllm-explain"
#
# The repository holds vLLM's Python tree; its compiled extensions (two .so files, hundreds
# of MB) stay out of git and are linked from the bundle into each worktree.
set -u
out=${1:?output directory}
. "$(dirname "$0")/stage.sh"
stage_vllm || { echo "the offline bundle is not staged (unpack parts a and b first)"; exit 2; }
mkdir -p "$out"
repo=/tmp/vllm-repo
site=${VLLM_SITE:-/tmp/vsite}
if [ ! -d $repo/.git ]; then
  mkdir -p $repo
  (cd "$site" && tar cf - --exclude='*.so' --exclude=__pycache__ vllm) | tar xf - -C $repo
  printf '*.so\n__pycache__/\n' > $repo/.gitignore
  git -C $repo init -q -b main
  git -C $repo add -A
  git -C $repo -c user.name=fwdasv -c user.email=fwdasv@local commit -q -m "vLLM 0.33.0 (offline bundle)"
  file=$repo/vllm/model_executor/models/qwen3.py
  $py - "$file" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
old = "        attn_output = self.attn(q, k, v)\n        output, _ = self.o_proj(attn_output)\n"
new = ("        attn_output = self.attn(q, k, v)\n"
       "        # Keep the attention output in float32 across the head merge (numerics).\n"
       "        attn_output = attn_output.float().to(q.dtype)\n"
       "        output, _ = self.o_proj(attn_output)\n")
assert text.count(old) == 1, "qwen3.py: the attention block is not where it was"
open(path, "w").write(text.replace(old, new))
EOF
  git -C $repo -c user.name=fwdasv -c user.email=fwdasv@local commit -q -am "Qwen3: attention output in float32 across the head merge"
fi
git -C $repo log --oneline | tee "$out/commits.txt"
for side in good bad; do
  rev=$([ $side = good ] && echo HEAD~1 || echo HEAD)
  wt=/tmp/vllm-$side
  if [ ! -d $wt ]; then
    git -C $repo worktree add -q $wt "$rev"
    (cd "$site" && find vllm -name '*.so') | while read -r so; do ln -sf "$site/$so" "$wt/$so"; done
  fi
  echo "=== $side ($rev) $(date -u +%H:%M:%S)"
  PYTHONPATH="$wt:$PYTHONPATH" timeout 240 $py "$VLLM_OFFLINE_HOME/fwd.py" \
    --model "$VLLM_OFFLINE_HOME/models/qwen3-0.6b" --skip-tokenizer-init --load-format dummy \
    --seed 0 --kv-len-jitter 0 --max-model-len 8192 --iters 20 --samples 5 \
    --case decode_bs1_1k=1*1@1024 --case prefill_2k=2048 \
    --profile-dir "$out/$side" --output-json "$out/$side.json" > "$out/$side.log" 2>&1
  echo "exit $?"; grep -E "^\[forward\]|Error" "$out/$side.log" | tail -5
done
for case in decode_bs1_1k prefill_2k; do
  echo "=== fwdasv explain --files ($case)"
  $py -m fwdasv explain --files "$out/good/$case.rank0.kernels.json" "$out/bad/$case.rank0.kernels.json" \
    --format json > "$out/explain-$case.json"
  echo "exit $? (1: BAD slower)"
  $py -m fwdasv explain --files "$out/good/$case.rank0.kernels.json" "$out/bad/$case.rank0.kernels.json" \
    --top 8 | tee "$out/explain-$case.txt"
done
rm -rf "$out"/good/*.trace.json.gz "$out"/bad/*.trace.json.gz
