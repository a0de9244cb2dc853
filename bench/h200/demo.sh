#!/usr/bin/env bash
# `fwdasv demo` end to end on one H200 without network, then the network-free environment's
# creation and per-commit install times there (bench/speed/env_speed.py). asv comes from the
# carried wheels (stage.sh); fwdasv is this checkout, made importable for every process asv
# starts by a .pth (FWDASV_NO_PTH=1: PYTHONPATH only; fwdasv's environments link it).
#
#   device run, kind nvidia-h200, carry [".whl"], timeout_s 600:
#   bash bench/h200/demo.sh
#
# Under $OUT (small: no environments): demo_steps.log (everything), demo.log (the demo's
# output), regressions.txt, env_speed.txt, summary.md, and demo-results.tgz (asv.conf.json,
# benchmarks/, results/, html/regressions.json). The work itself happens under $RES (default
# /tmp/fwdasv-gpu/demo). Knobs: DEMO_TIMEOUT_S (480), ENV_SPEED_ARGS.
set -u
. "$(dirname "$0")/stage.sh"
RES=${RES:-/tmp/fwdasv-gpu/demo}
export OUT=${OUT:-$RES/out}
DEMO_TIMEOUT_S=${DEMO_TIMEOUT_S:-480}
mkdir -p "$RES" "$OUT"
exec > >(tee -a "$OUT/demo_steps.log") 2>&1

step "machine"
date -u
nvidia-smi -L 2>&1 | head -4
$py -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable, "| torch", torch.__version__, "| cuda", torch.cuda.is_available(), torch.cuda.device_count())'
git --version || echo "NO GIT: the demo builds a git repository and asv needs git; cannot run"
echo "checkout $(git rev-parse --short HEAD 2>/dev/null || echo '?') at $PWD"

step "asv from the carried wheels"
stage_asv || exit 2
stage_pth
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

step "environment creation and per-commit install, no index (bench/speed/env_speed.py)"
# shellcheck disable=SC2086
timeout 150 $py bench/speed/env_speed.py ${ENV_SPEED_ARGS:---kinds after --repeat 3 --commits 4} > "$OUT/env_speed.txt" 2>&1
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
