#!/usr/bin/env bash
# vLLM 0.33 from the offline bundle (../shared/tools/vllm-offline) on the asv suites' cases,
# beside fwdasv's engine and pipeline figures, on two H200s, in calls made back to back (the
# machine forgets everything once released):
#   bash bench/h200/vllm_suites.sh stage-a   # carry .vllm-offline/a: unpack it; SDPA determinism probe
#   bash bench/h200/vllm_suites.sh figures   # carry .vllm-offline/b, c and .whl: engine + pipeline figures
#   bash bench/h200/vllm_suites.sh bare      # carry .vllm-offline/c and .whl: `vllm bench forward` alone
#   bash bench/h200/vllm_suites.sh asv       # carry .vllm-offline/c and .whl: asv on an existing env
# Read-only for the hardware. Results under $RES, copied (tarred) to $OUT.
set -u
phase=${1:?phase: stage-a | figures | bare | asv}
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/$phase}
mkdir -p "$RES"
step() { pack; echo; echo "=== $* ($(date -u +%H:%M:%S))"; }  # packs first
pack() {
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/$phase.tgz.tmp" -C "$RES" . 2>/dev/null && mv "$OUT/$phase.tgz.tmp" "$OUT/$phase.tgz"
  for f in "$RES"/*.md; do [ -e "$f" ] && cp "$f" "$OUT/"; done
}
setup_paths() {
  stage_asv
  stage_vllm
}
vllm_bare() {  # name, model dir, suite class, extra args...: vLLM's bench alone on a suite's cases
  local name=$1 model=$2 suite=$3; shift 3
  local cases=()
  mapfile -t cases < <($py - "$suite" <<'EOF'
import importlib, sys
module, name = sys.argv[1].rsplit(".", 1)
for case in getattr(importlib.import_module(module), name).cases:
    print("--case")
    print(case)
EOF
)
  echo "--- $name (${#cases[@]} args of cases)"
  timeout 400 $py "$VLLM_OFFLINE_HOME/fwd.py" --model "$VLLM_OFFLINE_HOME/models/$model" --skip-tokenizer-init \
    --load-format dummy --seed 0 --kv-len-jitter 0 --iters 20 --samples 10 --max-model-len 8192 \
    --output-json "$RES/$name.json" "${cases[@]}" "$@" > "$RES/$name.log" 2>&1
  echo "exit $?"; grep -E "^\[forward\]|Error|error:" "$RES/$name.log" | tail -15
}

case $phase in
stage-a)
  step "unpack part a"
  stage_unpack a
  step "SDPA determinism probe (batched long-context decode, bf16)"
  PYTHONPATH=$PWD timeout 120 $py - <<'EOF' 2>&1 | tee "$RES/sdpa_probe.txt"
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
torch.manual_seed(0)
q = torch.randn(32, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(32, 8, 8192, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn(32, 8, 8192, 128, device="cuda", dtype=torch.bfloat16)
def run():
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
print("torch", torch.__version__)
for label, backends in [("default", None), ("cudnn", [SDPBackend.CUDNN_ATTENTION]), ("flash", [SDPBackend.FLASH_ATTENTION]),
                        ("efficient", [SDPBackend.EFFICIENT_ATTENTION]), ("math", [SDPBackend.MATH]),
                        ("fwdasv decoder set", [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])]:
    try:
        if backends is None:
            outs = [run() for _ in range(5)]
        else:
            with sdpa_kernel(backends):
                outs = [run() for _ in range(5)]
        torch.cuda.synchronize()
        same = all(torch.equal(outs[0], o) for o in outs[1:])
        print(f"{label:20s} reproducible over 5 runs: {same}  max diff {max((outs[0].float()-o.float()).abs().max().item() for o in outs[1:]):.3e}")
    except Exception as error:
        print(f"{label:20s} not available: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
EOF
  step "engine GPU tests after the SDPA change"
  PYTHONPATH=$PWD timeout 150 $py -m pytest -q -p no:cacheprovider -m gpu tests/engine/test_capture.py 2>&1 | tee "$RES/pytest_gpu.txt" | tail -5
  ;;
figures)
  setup_paths
  step "engine figures (GPU 0), SM clock and power sampled every 100 ms"
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > "$RES/clocks_engine.csv" 2>&1 &
  sampler=$!
  CUDA_VISIBLE_DEVICES=0 timeout 240 $py bench/h200/measure_engine.py --out "$RES/engine" 2>&1 | tail -8
  kill $sampler 2>/dev/null
  cp "$RES/engine/summary.md" "$RES/engine_summary.md" 2>/dev/null
  step "pipeline figures: fwdasv PP2, single GPU, vLLM PP2, fwdasv PP2 on vLLM's shapes"
  timeout 300 $py bench/h200/measure_pipeline.py --timeout-s 120 --out "$RES/pipeline" 2>&1 | tail -14
  cp "$RES/pipeline/summary.md" "$RES/pipeline_summary.md" 2>/dev/null
  ;;
bare)
  setup_paths
  step "vLLM's bench alone on the asv suites' cases"
  vllm_bare qwen3 qwen3-0.6b benchmarks.forward.Qwen3_0_6B
  vllm_bare llama8b llama-3.1-8b benchmarks.forward.Llama31_8B
  vllm_bare qwen3_verify qwen3-0.6b benchmarks.forward.Qwen3_0_6B_Verify \
    --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}' --exclude-drafter
  ;;
asv)
  setup_paths
  step "a local repository holding the bundle's vLLM source (asv keys results to its commit)"
  src=/tmp/vllm-src
  if [ ! -d $src/.git ]; then
    mkdir -p $src && cp -r /tmp/vsite/vllm $src/ && cp -r /tmp/vsite/vllm-0.33.0.dist-info $src/ 2>/dev/null
    git -C $src init -q -b main && git -C $src add -A && \
      git -C $src -c user.name=fwdasv -c user.email=fwdasv@local commit -q -m "vLLM 0.33.0 (offline bundle)" --date "2026-11-01T00:00:00Z"
  fi
  commit=$(git -C $src rev-parse HEAD); echo "commit $commit"
  $py - "$src" "$RES" <<'EOF'
import json, sys, json5
src, res = sys.argv[1], sys.argv[2]
conf = json5.load(open("asv.conf.json"))
conf.update(repo=src, environment_type="existing", benchmark_dir=f"{__import__('os').getcwd()}/benchmarks",
            results_dir=f"{res}/results", html_dir=f"{res}/html", env_dir="/tmp/asv-env")
conf.pop("install_command", None); conf.pop("uninstall_command", None); conf.pop("build_command", None)
json.dump(conf, open("/tmp/asv-vllm.conf.json", "w"), indent=2)
EOF
  timeout 60 $py -m fwdasv hw machine --name h200x2-offline > "$RES/machine.txt" 2>&1; cat "$RES/machine.txt"
  step "asv run on the existing environment (--set-commit-hash)"
  export FWDASV_MODEL_DIR=$VLLM_OFFLINE_HOME/models FWDASV_VLLM_ENTRY=module FWDASV_LOG_DIR=$RES/logs
  timeout 520 $py -m asv run --config /tmp/asv-vllm.conf.json -E "existing:$(command -v $py)" \
    --set-commit-hash "$commit" --record-samples --launch-method spawn --machine h200x2-offline --show-stderr \
    --bench "${ASV_BENCH:-.}" > "$RES/asv_run.log" 2>&1
  echo "asv run exit $?"; grep -E "^\[|·|failed|skipped" "$RES/asv_run.log" | grep -vE "^\s*$" | tail -60
  step "publish and export"
  timeout 60 $py -m asv publish --config /tmp/asv-vllm.conf.json > "$RES/asv_publish.log" 2>&1; echo "publish exit $?"
  timeout 60 $py -m fwdasv export "$RES/results" --format csv -o "$RES/asv_export.csv"; echo "export exit $?"
  head -3 "$RES/asv_export.csv"
  ;;
esac
step "done"
ls -la "${OUT:-$RES}"
