#!/usr/bin/env python
"""The demo on a very busy box: two demos at once beside memory streamers.

Starts `--neighbours` processes (default 3) that stream memory in random bursts (each burst
0.5-5 s of copying a 64 MiB array back and forth, then a pause of 0.5-5 s), runs `--demos`
demos at once (default 2, each `python -m fwdasv demo` in its own fresh directory), stops
the neighbours, and checks each demo: a finding at the injected commit ("Support attention
logit soft-capping") with status `confirmed` in `fwdasv regressions --format json`,
`fwdasv regressions` exiting 1, and no finding (of any status) whose commits leave the
model's forward code (tinylm/model.py, tinylm/config.py) as it was.

Prints each demo's wall time, the load average seen while they ran (sampled every 5 s: min /
median / max) and one PASS/FAIL line per demo; exits 0 only when every demo passed. Each
demo's output is kept in DIR/demoN.log.

    python bench/verdicts/busy_demo.py --dir /tmp/busy-demo            # 2 demos, 3 neighbours
    python bench/verdicts/busy_demo.py --demos 1 --neighbours 1        # a reduced run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SLOW_SUBJECT = "Support attention logit soft-capping"  # fwdasv.demo.project.SLOW_COMMIT_SUBJECT
FORWARD_FILES = ("tinylm/model.py", "tinylm/config.py")  # what a commit changes to reach it
BURST_S = (0.5, 5.0)
STREAM_MB = 64


def stream_memory(seed: int, stop: multiprocessing.Event) -> None:
    """A neighbour: bursts of memory streaming (0.5-5 s), pauses of 0.5-5 s, until `stop`."""
    import numpy as np

    rng = random.Random(seed)
    a = np.ones(STREAM_MB * 2**20 // 8)
    b = np.empty_like(a)
    while not stop.is_set():
        until = time.monotonic() + rng.uniform(*BURST_S)
        while time.monotonic() < until and not stop.is_set():
            np.copyto(b, a)
            np.copyto(a, b)
        stop.wait(rng.uniform(*BURST_S))


def sample_load(samples: list[float], done: threading.Event) -> None:
    while not done.wait(5.0):
        samples.append(os.getloadavg()[0])


def check(directory: Path) -> tuple[bool, str]:
    """Whether the demo in `directory` confirmed the injected commit and the gate exits 1."""
    config = directory / "asv.conf.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwdasv",
            "regressions",
            "--config",
            str(config),
            "--format",
            "json",
            "--improvements",  # a speed-up listed at a commit that leaves the forward is astray too
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        found = json.loads(done.stdout)["regressions"]
    except (ValueError, KeyError):
        return False, f"regressions exited {done.returncode}: {done.stderr.strip()[-300:]}"
    at_commit = [f for f in found if any(c["subject"] == SLOW_SUBJECT for c in f["commits"])]
    statuses = sorted({f["status"] for f in at_commit})
    astray = [f for f in found if not touches_forward(directory / "tinylm", f)]
    ok = "confirmed" in statuses and done.returncode == 1 and not astray
    shown = ", ".join(
        "{} {} {:+.0f}%".format(f["case"], f["status"], f["percent"]) for f in at_commit
    )
    others = "; ".join(
        "{} {} {:+.0f}% at {}".format(
            f["case"], f["status"], f["percent"], ", ".join(c["subject"] for c in f["commits"])
        )
        for f in astray
    )
    return ok, (
        f"regressions exit {done.returncode}; findings at the injected commit: "
        f"{shown or 'none'}; all findings: {len(found)}; at commits that leave the forward "
        f"as it was: {others or 'none'}"
    )


def touches_forward(repo: Path, finding: dict) -> bool:
    """Whether the finding's commits change the model's forward code."""
    changed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", finding["before_commit"],
         finding["after_commit"]],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    return any(path in FORWARD_FILES for path in changed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("busy-demo"), help="work directory")
    parser.add_argument("--demos", type=int, default=2, help="demos run at once (default 2)")
    parser.add_argument("--neighbours", type=int, default=3, help="memory streamers (default 3)")
    parser.add_argument(
        "--keep", action="store_true", help="reuse earlier demo directories (default: fresh)"
    )
    args = parser.parse_args()
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    stop = multiprocessing.Event()
    neighbours = [
        multiprocessing.Process(target=stream_memory, args=(seed, stop), daemon=True)
        for seed in range(args.neighbours)
    ]
    loads: list[float] = []
    sampling = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(loads, sampling), daemon=True)
    demos = []
    try:
        for process in neighbours:
            process.start()
        sampler.start()
        print(
            f"{args.neighbours} memory streamers started (bursts of {BURST_S[0]}-{BURST_S[1]} s); "
            f"starting {args.demos} demos",
            flush=True,
        )
        for n in range(args.demos):
            directory = root / f"demo{n + 1}"
            if directory.exists() and not args.keep:
                shutil.rmtree(directory)
            log = open(root / f"demo{n + 1}.log", "w")  # noqa: SIM115 (closed below)
            started = time.monotonic()
            process = subprocess.Popen(
                [sys.executable, "-m", "fwdasv", "demo", "--dir", str(directory)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            demos.append((directory, process, log, started))
        walls = []
        for directory, process, log, started in demos:
            process.wait()
            log.close()
            walls.append((directory, process.returncode, time.monotonic() - started))
    finally:
        stop.set()
        sampling.set()
        for process in neighbours:
            process.join(10)
            if process.is_alive():
                process.terminate()
        for _, process, _, _ in demos:
            if process.poll() is None:
                process.terminate()
    if loads:
        print(
            f"load average while the demos ran: min {min(loads):.1f}, "
            f"median {statistics.median(loads):.1f}, max {max(loads):.1f} "
            f"({os.cpu_count()} CPUs)"
        )
    passed = True
    for directory, code, wall in walls:
        ok, detail = check(directory)
        ok = ok and code == 0
        passed &= ok
        print(
            f"{'PASS' if ok else 'FAIL'} {directory.name}: demo exit {code}, {wall:.0f} s; {detail}"
        )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
