#!/usr/bin/env bash
# `fwdasv demo` end to end on one H200 without network (issue 12), then the
# network-free environment's creation and per-commit install times there.
#
# The host has python3 (3.12) with torch, click, numpy, pyyaml and nvidia-ml-py,
# but no asv and no package index: asv and its small dependencies come as wheels
# carried in .whl (../shared/tools/device-wheels.sh), unpacked into /tmp/site.
# fwdasv is this checkout. Both are made importable for every process asv starts:
# a .pth in python3's site-packages naming them (and PYTHONPATH for asv itself;
# fwdasv's environment type links what the parent imports into each env).
# pip reaches nothing: PIP_NO_INDEX=1, an empty PIP_FIND_LINKS, no config file.
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 600:
#   bash scripts/gpu/lease_demo.sh
#
# Under $OUT (small: no environments): lease_demo.log (everything), demo.log
# (the demo's output), regressions.txt, env_speed.txt, summary.md, and
# demo-results.tgz (asv.conf.json, benchmarks/, results/, html/regressions.json).
# The work itself happens under $RES (default /tmp/fwdasv-gpu/demo).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
RES=${RES:-/tmp/fwdasv-gpu/demo}
export OUT=${OUT:-$RES/out}
py=${PYTHON:-python3}
DEMO_TIMEOUT_S=${DEMO_TIMEOUT_S:-480}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/lease_demo.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
date -u
nvidia-smi -L 2>&1 | head -4
$py -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable, "| torch", torch.__version__, "| cuda", torch.cuda.is_available(), torch.cuda.device_count())'
git --version || echo "NO GIT: the demo builds a git repository and asv needs git; cannot run"
echo "checkout $(git rev-parse --short HEAD 2>/dev/null || echo '?') at $PWD"

step "asv from the carried wheels"
if ! $py -c 'import asv' 2>/dev/null; then
  wheels=$(ls .whl/*.whl .whl-dev/*.whl 2>/dev/null | head -200)
  if [ -z "$wheels" ]; then echo "no asv and no .whl/*.whl: carry .whl (../shared/tools/device-wheels.sh)"; exit 2; fi
  # shellcheck disable=SC2086
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels || exit 2
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -n "${FWDASV_LEASE_NO_PTH:-}" ]; then
  echo "FWDASV_LEASE_NO_PTH set: no .pth written (PYTHONPATH only; fwdasv's envs link it)"
elif printf '%s\n%s\n' "$PWD" /tmp/site > "$site_dir/zz-fwdasv-lease.pth" 2>/dev/null; then
  echo "wrote $site_dir/zz-fwdasv-lease.pth ($PWD, /tmp/site)"
else
  echo "cannot write into $site_dir: relying on PYTHONPATH (fwdasv's envs link it)"
fi
# What asv's processes will import, checked in a clean environment (no PYTHONPATH,
# not from the checkout's folder).
(cd / && env -u PYTHONPATH $py -c 'import asv, asv_runner, virtualenv, fwdasv, torch; print("asv", asv.__version__, "| virtualenv", virtualenv.__version__, "| fwdasv", fwdasv.__file__)') \
  || echo "without PYTHONPATH these do not all import (fine when asv runs with it: see above)"

step "fwdasv demo (PIP_NO_INDEX=1), at most ${DEMO_TIMEOUT_S} s"
demo_dir=$RES/fwdasv-demo
export FWDASV_LOG_DIR=$RES/bench-logs
started_ns=$(date +%s%N)
timeout "$DEMO_TIMEOUT_S" $py -m fwdasv demo --dir "$demo_dir" > "$OUT/demo.log" 2>&1
demo_status=$?
wall_s=$(( ($(date +%s%N) - started_ns) / 1000000000 ))
tail -40 "$OUT/demo.log"
echo "demo exit $demo_status, wall ${wall_s} s"

step "regressions, as CI reads them"
$py -m fwdasv regressions --config "$demo_dir/asv.conf.json" > "$OUT/regressions.txt" 2>&1
regressions_status=$?
cat "$OUT/regressions.txt"; echo "regressions exit $regressions_status"

step "environment creation and per-commit install, no index (benchmarks_speed/env_speed.py)"
# shellcheck disable=SC2086
timeout 150 $py benchmarks_speed/env_speed.py ${ENV_SPEED_ARGS:---kinds after --repeat 3 --commits 4} > "$OUT/env_speed.txt" 2>&1
echo "env_speed exit $?"; cat "$OUT/env_speed.txt"

step "summary"
DEMO_STATUS=$demo_status WALL_S=$wall_s REGRESSIONS_STATUS=$regressions_status DEMO_DIR=$demo_dir \
  $py - <<'EOF' | tee "$OUT/summary.md"
import collections, glob, json, os, re, subprocess

out, demo = os.environ["OUT"], os.environ["DEMO_DIR"]
log = open(os.path.join(out, "demo.log"), errors="replace").read()
timers = collections.Counter()
for path in glob.glob(os.path.join(os.environ["FWDASV_LOG_DIR"], "**", "*.json"), recursive=True):
    timers.update(re.findall(r'"timer":\s*"([a-z]+)"', open(path, errors="replace").read()))
builds = []
for path in sorted(glob.glob(os.path.join(demo, "results", "*", "*-*.json"))):
    data = json.load(open(path))
    if "<build>" in data.get("durations", {}):
        builds.append((data["commit_hash"][:8], data["durations"]["<build>"]))
slow = subprocess.run(
    ["git", "-C", os.path.join(demo, "tinylm"), "log", "--format=%h %s", "--grep", "soft-capping"],
    capture_output=True, text=True,
).stdout.strip()
bisect = [line.strip() for line in log.splitlines() if "first bad commit" in line]
# The demo's findings table (step 4/7): one row per finding, its status first.
found = log.split("[demo] 4/7", 1)[-1].split("[demo] 5/7", 1)[0]
flagged = [line for line in found.splitlines() if line.split()[:1] in (["regression"], ["confirmed"])]
done = re.findall(r"done in (\d+) s", log)
print("# fwdasv demo on the H200 host, no network")
print()
print(f"- demo exit status {os.environ['DEMO_STATUS']}, wall {float(os.environ['WALL_S']):.0f} s (script), "
      f"{done[-1] + ' s (demo' + chr(39) + 's own)' if done else 'no done line'}")
print(f"- timer used (bench JSON files): {dict(timers) or 'none found'}")
print(f"- injected slow commit: {slow or '?'}")
print(f"- findings (step 4/7): {len(flagged)}")
for line in flagged:
    print(f"    {line.strip()}")
print(f"- bisect: {bisect[-1] if bisect else 'no bisect result'}")
print(f"- fwdasv regressions exit {os.environ['REGRESSIONS_STATUS']}")
print(f"- asv build+install per commit (results' <build> durations, s): "
      + ", ".join(f"{c} {s:.1f}" for c, s in builds))
print()
print("env_speed (after, no index):")
print("```")
print(open(os.path.join(out, "env_speed.txt"), errors="replace").read().strip()[-1500:])
print("```")
EOF

step "pack (no environments)"
tar czf "$OUT/demo-results.tgz" -C "$demo_dir" asv.conf.json benchmarks results html/regressions.json 2>/dev/null
ls -la "$OUT"
