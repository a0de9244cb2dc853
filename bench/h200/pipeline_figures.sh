#!/usr/bin/env bash
# Two GPUs: fwdasv's pipeline on Qwen3-0.6B's shapes with vLLM's cases and on the 8B-layer
# decoder, next to the single-GPU engine (measure_pipeline.py), and the 2-GPU pipeline test.
# Results tarred to $OUT after each step.
#
#   device run, kind nvidia-h200-x2:
#   bash bench/h200/pipeline_figures.sh
set -u
. "$(dirname "$0")/stage.sh"
stage_checkout
RES=${RES:-/tmp/fwdasv-gpu/clock}; mkdir -p "$RES"
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/clock.tgz" -C "$RES" . && for d in qwen llama; do cp "$RES/$d/summary.md" "$OUT/${d}_summary.md" 2>/dev/null; done; true; }
echo "=== qwen3 shapes, vLLM's cases ($(date -u +%T))"
timeout 150 $py bench/h200/measure_pipeline.py --timeout-s 100 --target fwdasv.targets.decoder:qwen3_0_6b_shapes \
  --case decode=32*1@1024 --case prefill=512 --out "$RES/qwen" 2>&1 | tail -9; pack
echo "=== 8B layers ($(date -u +%T))"
timeout 150 $py bench/h200/measure_pipeline.py --timeout-s 100 --out "$RES/llama" 2>&1 | tail -9; pack
echo "=== 2-GPU pipeline test ($(date -u +%T))"
timeout 120 $py -m pytest -q -p no:cacheprovider -m multigpu tests/engine/test_pipeline.py 2>&1 | tee "$RES/pytest_multigpu.txt" | tail -4; pack
