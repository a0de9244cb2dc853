#!/usr/bin/env bash
# Where a vLLM commit's time goes, on one `nvidia-h200`, in three calls made back to back
# (the machine forgets everything 30 s after a call; a call carries at most 64 MiB):
#
#   1. carry [".vllm-offline/a"]                  bash bench/h200/vllm_startup.sh a
#   2. carry [".vllm-offline/b"]                  bash bench/h200/vllm_startup.sh b
#   3. carry [".vllm-offline/c", ".whl"]          bash bench/h200/vllm_startup.sh c
#
# Calls a and b unpack their part of vLLM's offline bundle. Call c builds a local vLLM
# repository from the bundle's Python sources (two commits), then times vLLM's forward bench
# on the Qwen3_0_6B suite's cases with each startup phase (fwdasv.backends.vllm_phases): a
# cold first process, the same tree again, a second commit's fresh tree (no .pyc), and that
# tree after `compileall`; then asv's own cost per benchmark (spawn vs forkserver) on the
# small CanaryDecoder suite. Read-only for the hardware. Under $OUT: vllm_startup_<call>.log,
# startup.tgz (every bench's JSON, log and phase timers).
set -u
phase=${1:?phase: a | b | c}
. "$(dirname "$0")/stage.sh"
RES=/tmp/fwdasv-gpu/startup
OUT=${OUT:-$RES/out}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/vllm_startup_$phase.log") 2>&1

step "machine ($phase)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv 2>&1 | head -3
nproc

case $phase in
a) stage_unpack a ;;
b) stage_unpack b ;;
c)
  stage_vllm || { echo "bundle not staged: run a and b first"; exit 2; }
  stage_asv || exit 2
  site=/tmp/vsite repo=/tmp/vllm-repo
  step "local vLLM repository from the bundle's Python"
  mkdir -p $repo
  (cd $site && tar cf - --exclude='*.so' --exclude=__pycache__ vllm) | tar xf - -C $repo
  printf '*.so\n__pycache__/\n' > $repo/.gitignore
  git -C $repo init -q -b main && git -C $repo add -A
  git -C $repo -c user.name=fwdasv -c user.email=fwdasv@local commit -q -m "vLLM 0.33.0"
  echo "# a comment" >> $repo/vllm/envs.py
  git -C $repo -c user.name=fwdasv -c user.email=fwdasv@local commit -q -am "a Python-only change"
  du -sh $repo/vllm; find $repo/vllm -name '*.py' | wc -l
  tree() {  # tree NAME REV: a fresh copy of REV's Python with the base's .so files linked
    local dir=/tmp/vtree-$1
    rm -rf "$dir"; mkdir -p "$dir"
    local t0; t0=$(date +%s.%N)
    git -C $repo archive "$2" vllm | tar xf - -C "$dir"
    (cd $site && find vllm -name '*.so') | while read -r so; do ln -sf "$site/$so" "$dir/$so"; done
    echo "tree $1: $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s (git archive + links)"
  }
  mapfile -t cases < <($py - <<'EOF'
from benchmarks.forward import Qwen3_0_6B
for case in Qwen3_0_6B.cases:
    print("--case"); print(case)
EOF
)
  bench() {  # bench LABEL TREE [env...]
    local label=$1 dir=$2; shift 2
    step "bench $label"
    local t0; t0=$(date +%s.%N)
    env "$@" FWDASV_LAUNCHED_AT="$(date +%s.%N)" PYTHONPATH="$dir:$PYTHONPATH" timeout 300 \
      $py -X importtime -m fwdasv.backends.vllm_phases --model "$VLLM_OFFLINE_HOME/models/qwen3-0.6b" \
      --skip-tokenizer-init --load-format dummy --seed 0 --kv-len-jitter 0 --iters 20 --samples 10 \
      --max-model-len 8192 --output-json "$RES/$label.json" "${cases[@]}" \
      > "$RES/$label.log" 2> "$RES/$label.err"
    local rc=$?
    echo "exit $rc wall $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
    grep '^\[phase\]' "$RES/$label.err"
    grep -E '^\[forward\]' "$RES/$label.log" | head -3
    # the slowest imports (cumulative us), for the import phase
    grep 'import time:' "$RES/$label.err" | sort -t'|' -k2 -n -r | head -12
    grep -v 'import time:' "$RES/$label.err" | grep -v '^\[phase\]' | grep -iE 'took|seconds|error' | head -12
  }
  tree c0 HEAD~1
  bench cold-c0 /tmp/vtree-c0 VLLM_ENABLE_STARTUP_PLAN=1
  bench warm-c0 /tmp/vtree-c0 VLLM_ENABLE_STARTUP_PLAN=1
  tree c1 HEAD
  bench fresh-c1 /tmp/vtree-c1 VLLM_ENABLE_STARTUP_PLAN=1
  tree c1b HEAD
  t0=$(date +%s.%N); $py -m compileall -q -j 16 /tmp/vtree-c1b/vllm > /dev/null
  echo "compileall -j 16: $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
  bench compiled-c1 /tmp/vtree-c1b VLLM_ENABLE_STARTUP_PLAN=1
  bench noplan-c1 /tmp/vtree-c1b
  step "asv's own cost per benchmark: CanaryDecoder, spawn vs forkserver"
  site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n%s\n%s\n' /tmp/vtree-c1b "$PWD" /tmp/site > "$site_dir/zz-fwdasv-checkout.pth"
  proj=/tmp/asvproj; rm -rf $proj; mkdir -p $proj/benchmarks
  cp benchmarks/forward.py $proj/benchmarks/; touch $proj/benchmarks/__init__.py
  cat > $proj/asv.conf.json <<EOF
{"version": 1, "project": "vllm", "repo": "$repo", "branches": ["main"],
 "environment_type": "existing", "benchmark_dir": "benchmarks", "results_dir": "results",
 "html_dir": "html", "env_dir": "env"}
EOF
  printf '{"h200": {"machine": "h200", "os": "Linux", "arch": "x86_64", "cpu": "x", "num_cpu": "16", "ram": "128GB"}, "version": 1}' > ~/.asv-machine.json
  for method in spawn forkserver; do
    t0=$(date +%s.%N)
    (cd $proj && timeout 200 $py -m asv run -E "existing:$(command -v $py)" --set-commit-hash "$(git -C $repo rev-parse HEAD)" \
      --machine h200 --record-samples --launch-method $method -b CanaryDecoder > "$RES/asv-$method.log" 2>&1)
    rc=$?
    echo "asv $method: exit $rc wall $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
    tail -3 "$RES/asv-$method.log"
    $py - "$proj/results/h200" "$method" <<'EOF'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*-existing*.json"):
    data = json.load(open(path))
    cols = data["result_columns"]
    durations = {k: v for k, v in data.get("durations", {}).items()}
    per = [dict(zip(cols, row)).get("duration") for row in data["results"].values()]
    print(sys.argv[2], "durations", durations, "benchmarks", len(per), "sum of durations", round(sum(d or 0 for d in per), 2))
EOF
    rm -rf $proj/results/h200/*-existing*.json
  done
  step "caches"
  du -sh ~/.cache/vllm ~/.triton 2>/dev/null; ls ~/.cache/vllm 2>/dev/null
  tar czf "$OUT/startup.tgz" -C "$RES" --exclude=out . 2>/dev/null
  ;;
esac
step "done ($phase)"
ls -la "$OUT"
