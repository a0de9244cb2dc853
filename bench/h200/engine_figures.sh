#!/usr/bin/env bash
# GPU checks for the engine, the pipeline and the hardware commands, on one or two NVIDIA
# GPUs: hw check / setup --dry-run / machine (read-only for the hardware), the GPU-marked
# tests, the engine figures (measure_engine.py, GPU 0) and, with two GPUs, the pipeline
# figures (measure_pipeline.py, PIPELINE_ARGS appended). Results go to $RES (default
# /tmp/fwdasv-gpu) and, tarred after every step, to $OUT when set.
#
#   device run, kind nvidia-h200-x2, carry [".whl"]:
#   bash bench/h200/engine_figures.sh
set -u
. "$(dirname "$0")/stage.sh"
stage_asv
RES=${RES:-/tmp/fwdasv-gpu}
mkdir -p "$RES"
pack() {
  # After every step, so a run cut short still returns what it measured.
  [ -n "${OUT:-}" ] || return 0
  cp "$RES"/engine/summary.md "$OUT/engine_summary.md" 2>/dev/null
  cp "$RES"/pipeline/summary.md "$OUT/pipeline_summary.md" 2>/dev/null
  cp "$RES"/pytest_gpu.txt "$OUT/" 2>/dev/null
  tar czf "$OUT/results.tgz.tmp" -C "$RES" . && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"
}
step() { pack; echo; echo "=== $* ($(date -u +%H:%M:%S))"; }  # packs first
gpus=$($py -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)

step "machine"
date -u | tee "$RES/date.txt"
nvidia-smi | tee "$RES/nvidia-smi.txt" | head -20
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER > "$RES/nvidia-smi-clocks-before.txt" 2>&1
$py -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.device_count(), torch.cuda.get_device_name(0))' | tee "$RES/torch.txt"

step "hw check (read-only) and setup --dry-run"
timeout 60 $py -m fwdasv hw check --format json > "$RES/hw_check.json" 2> "$RES/hw_check.err"; echo "hw check json exit $?"
timeout 60 $py -m fwdasv hw check > "$RES/hw_check.txt" 2>&1; echo "hw check exit $?"; cat "$RES/hw_check.txt" | head -40
timeout 60 $py -m fwdasv hw setup --dry-run --lock-clocks base --state-file /tmp/fwdasv-hw-state.json > "$RES/hw_setup_dry_run.txt" 2>&1; echo "hw setup --dry-run exit $?"; cat "$RES/hw_setup_dry_run.txt"
test -e /tmp/fwdasv-hw-state.json && echo "UNEXPECTED: dry run wrote a state file" || echo "dry run wrote no state file"
timeout 60 $py -m fwdasv hw machine --machine-file "$RES/asv-machine.json" > "$RES/hw_machine.txt" 2>&1; echo "hw machine exit $?"; cat "$RES/hw_machine.txt"
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER > "$RES/nvidia-smi-clocks-after.txt" 2>&1
nvidia-smi --query-gpu=index,persistence_mode,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$RES/nvidia-smi-settings.csv"

step "GPU tests"
timeout 200 $py -m pytest -q -p no:cacheprovider -m "gpu or multigpu" tests/engine/test_capture.py tests/engine/test_pipeline.py tests/engine/test_clock.py 2>&1 | tee "$RES/pytest_gpu.txt" | tail -25

step "engine figures (one GPU)"
CUDA_VISIBLE_DEVICES=0 timeout 240 $py bench/h200/measure_engine.py --out "$RES/engine" 2>&1 | tail -30

if [ "$gpus" -ge 2 ]; then
  step "pipeline figures (two GPUs)"
  timeout 200 $py bench/h200/measure_pipeline.py --timeout-s 90 --out "$RES/pipeline" ${PIPELINE_ARGS:-} 2>&1 | tail -30
fi

step "done"
ls -la "${OUT:-$RES}"
