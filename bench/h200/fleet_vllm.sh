#!/usr/bin/env bash
# On one H200: a single-node Ray cluster measures a local vLLM history through `fwdasv shard
# --ray`, and the host path (`fwdasv shard`, no Ray) measures the same commits; then the two
# side by side (bench/h200/fleet_agreement.py) and each path's findings. Calls made back to
# back on one warm `nvidia-h200` (each under 10 minutes), after those that stage vLLM's
# offline bundle (split_a.sh join with a1, then a2; `.vllm-offline/b/stage.sh`):
#
#   bash bench/h200/fleet_vllm.sh ray    # carry .vllm-offline/c, .whl, .ray: part c, asv, Ray
#   bash bench/h200/fleet_vllm.sh fleet  # ray start --head; shard --ray over COMMITS; ray stop
#   bash bench/h200/fleet_vllm.sh host   # fwdasv shard over the same COMMITS in another project
#   bash bench/h200/fleet_vllm.sh agree  # fleet_agreement.py, regressions on both
#
# .ray/ray-core.tar.xz (git-ignored, made here by `bash bench/h200/fleet_vllm.sh pack`): Ray
# 2.60.0's cp312 wheel unpacked, without its Java jars and libraries the fleet never imports
# (rllib, data, serve, tune, train, llm): 30 MB of xz where the wheel is 79 MB, over the
# 64 MiB a call carries with the checkout. Ray's own dependencies are on the device image
# (click, filelock, msgpack, packaging, protobuf, pyyaml, requests) or in the bundle's part c
# (jsonschema). Every part is idempotent (asv and the fleet skip what is recorded). Never
# changes GPU settings. Knobs: COMMITS (1-based lines of the history, default "4 5 6": the
# ~1% Qwen3 step at 5), SAMPLES (FWDASV_SAMPLES, default 5), WORK, PY.
set -u
part=${1:?part: pack | ray | fleet | host | agree}
if [ "$part" = pack ]; then  # here, with a network: .ray/ray-core.tar.xz
  set -e
  grep -qx '/.ray/' .git/info/exclude 2>/dev/null || echo '/.ray/' >> .git/info/exclude
  tmp=$(mktemp -d); mkdir -p .ray
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$tmp" ray==2.60.0
  # zipfile drops the file modes: restored from the wheel (gcs_server, raylet are programs).
  (cd "$tmp" && python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        path = z.extract(i, "x"); mode = i.external_attr >> 16
        if mode: __import__("os").chmod(path, mode & 0o777)' ray-*.whl && cd x && tar --exclude=ray/jars --exclude=ray/rllib \
    --exclude=ray/data --exclude=ray/serve --exclude=ray/tune --exclude=ray/train --exclude=ray/llm \
    --exclude=__pycache__ -cf - ray ray-2.60.0.dist-info | xz -T0 -6) > .ray/ray-core.tar.xz
  rm -rf "$tmp"; ls -la .ray; exit 0
fi
. "$(dirname "$0")/stage.sh"
unset PYTHONDONTWRITEBYTECODE
W=${WORK:-/tmp/fwdasv-fleet-h200}
OUT=${OUT:-$W/out}
site=${VLLM_SITE:-/tmp/vsite} raysite=/tmp/raysite
py=${PY:-$py}
mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/$part.log") 2>&1

stage_all() {
  [ -d $raysite/ray ] || { echo "no Ray in $raysite: run the 'ray' part first"; exit 2; }
  stage_vllm_run "$W/logs" "$raysite" || exit 2
  export PYTHONPATH="$raysite:$PYTHONPATH" FWDASV_VLLM_ENTRY=phases
  export FWDASV_SAMPLES=${SAMPLES:-5} RAY_USAGE_STATS_ENABLED=0
}

setup() {  # the history (once) and the project DIR (once), COMMITS into range.hashes: setup DIR
  stage_vllm_project "$W/vllm-repo" "$1" || exit 2
  : > "$W/range.hashes"
  for i in ${COMMITS:-4 5 6}; do echo "${commits[$((i - 1))]}" >> "$W/range.hashes"; done
  echo "commits: $(cut -c1-8 "$W/range.hashes" | tr '\n' ' ')"
}

case $part in
ray)
  stage_vllm || { echo "the bundle's part c is not staged"; exit 2; }
  stage_asv || exit 2
  if [ ! -d $raysite/ray ]; then
    step "Ray 2.60.0 (carried, .ray/ray-core.tar.xz) into $raysite"
    mkdir -p $raysite && xz -dc .ray/ray-core.tar.xz | tar -xf - -C $raysite || exit 2
  fi
  PYTHONPATH="$raysite:$PYTHONPATH" $py -c "import ray, jsonschema; print('ray', ray.__version__)" || exit 2
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv ;;
fleet) stage_all; setup "$W/proj-ray"; cd "$W/proj-ray"
  step "ray start --head (one node, its one GPU; no dashboard)"
  $py -m ray.scripts.scripts start --head --port 6379 --num-gpus 1 --num-cpus 8 \
    --include-dashboard=false --disable-usage-stats > "$OUT/ray_start.log" 2>&1
  echo "ray start exit $?"; tail -3 "$OUT/ray_start.log"
  step "fwdasv shard --ray auto over $(wc -l < "$W/range.hashes") commits, Qwen3_0_6B"
  t0=$(date +%s.%N)
  timeout 530 $py -m fwdasv shard --ray auto "HASHFILE:$W/range.hashes" --bench '^forward\.Qwen3_0_6B\.' \
    --fleet-dir "$W/fleet" > "$OUT/shard_ray.log" 2>&1
  echo "shard --ray exit $? in $(elapsed "$t0") s"; cat "$OUT/shard_ray.log" | tail -30
  $py -m ray.scripts.scripts stop > /dev/null 2>&1
  cp .fwdasv-shards/*-ray/plan.json "$OUT/plan_ray.json" 2>/dev/null
  tar czf "$OUT/results_ray.tgz" results .fwdasv-shards 2>/dev/null ;;
host) stage_all; setup "$W/proj-host"; cd "$W/proj-host"
  step "fwdasv shard (the host path, no Ray) over the same commits"
  t0=$(date +%s.%N)
  timeout 560 $py -m fwdasv shard "HASHFILE:$W/range.hashes" --bench '^forward\.Qwen3_0_6B\.' \
    > "$OUT/shard_host.log" 2>&1
  echo "shard exit $? in $(elapsed "$t0") s"; tail -20 "$OUT/shard_host.log"
  tar czf "$OUT/results_host.tgz" results .fwdasv-shards 2>/dev/null ;;
agree) stage_all
  step "the Ray path against the host path, commit by commit"
  $py bench/h200/fleet_agreement.py --ray "$W/proj-ray/results" --host "$W/proj-host/results" \
    | tee "$OUT/agreement.txt"
  for p in ray host; do
    step "fwdasv regressions --improvements in proj-$p"
    (cd "$W/proj-$p" && timeout 120 $py -m fwdasv regressions --improvements) | tee "$OUT/regressions_$p.txt"
  done ;;
*) echo "unknown part $part"; exit 2 ;;
esac
step "done ($part)"
ls -la "$OUT"
