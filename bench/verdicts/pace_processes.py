#!/usr/bin/env python
"""Fresh bench processes of the demo's two commits around its injected step, interleaved:
per process the latency, the wall-time ratio to fwdasv's fixed workload and the CPU-time
ratio (what `track_relative` holds), with their spread between processes and the step.

Builds the demo's tinylm repository in DIR, checks out the soft-capping commit (B) and the
one before it (A), and runs `--rounds` times A then B, each a fresh `python -m fwdasv.engine
--reference` process on the demo's two cases (one thread, iters 5 x samples 10, as the
demo's suite). With `--neighbours N`, N of busy_demo.py's memory streamers run meanwhile.
Prints each series per process, its coefficient of variation per commit, and B's median
over A's.

    python bench/verdicts/pace_processes.py --dir /tmp/pace --rounds 4
    python bench/verdicts/pace_processes.py --dir /tmp/pace --rounds 4 --neighbours 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import busy_demo

from fwdasv.demo.project import SLOW_COMMIT_SUBJECT, build_project
from fwdasv.demo.run import CASES


def checkouts(root: Path) -> dict[str, Path]:
    """A (the commit before the injected one) and B (the injected one), checked out."""
    repo = root / "tinylm"
    if not repo.exists():
        build_project(repo)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    hashes = git("log", "--reverse", "--format=%H", "main").splitlines()
    subjects = git("log", "--reverse", "--format=%s", "main").splitlines()
    slow = subjects.index(SLOW_COMMIT_SUBJECT)
    out = {}
    for label, commit in (("A", hashes[slow - 1]), ("B", hashes[slow])):
        tree = root / label
        if not tree.exists():
            git("worktree", "add", "-f", "--detach", str(tree), commit)
        out[label] = tree
    return out


def one_process(tree: Path, output: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "fwdasv.engine", "--target", "tinylm.bench:target"]
    for case in CASES:
        argv += ["--case", case]
    argv += ["--device", "cpu", "--iters", "5", "--samples", "10", "--warmup-s", "0.1"]
    argv += ["--threads", "1", "--reference", "--output-json", str(output)]
    subprocess.run(argv, env=env, capture_output=True, check=True, timeout=900)
    return json.loads(output.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/pace"))
    parser.add_argument("--rounds", type=int, default=4, help="processes per commit")
    parser.add_argument("--neighbours", type=int, default=0, help="memory streamers meanwhile")
    args = parser.parse_args()
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    trees = checkouts(root)
    stop = multiprocessing.Event()
    streamers = [
        multiprocessing.Process(target=busy_demo.stream_memory, args=(seed, stop), daemon=True)
        for seed in range(args.neighbours)
    ]
    loads: list[float] = []
    series: dict[tuple[str, str, str], list[float]] = {}
    try:
        for process in streamers:
            process.start()
        for number in range(args.rounds):
            for label, tree in trees.items():
                for case in one_process(tree, root / f"{label}-{number}.json"):
                    rank = case["ranks"][0]
                    forward = rank["latency_us"]["samples_us"]
                    workload = rank["reference"]["latency_us"]["samples_us"]
                    wall = statistics.median(f / w for f, w in zip(forward, workload, strict=True))
                    values = {
                        "latency_ms": rank["latency_us"]["median"] / 1e3,
                        "wall ratio": wall,
                        "CPU ratio": statistics.median(rank["reference"]["cpu_ratios"]),
                    }
                    for kind, value in values.items():
                        series.setdefault((kind, case["case"], label), []).append(value)
                loads.append(os.getloadavg()[0])
    finally:
        stop.set()
        for process in streamers:
            process.join(10)
            if process.is_alive():
                process.terminate()
    print(
        f"{args.rounds} processes a commit, {args.neighbours} memory streamers; load average "
        f"after each pair {min(loads):.1f}-{max(loads):.1f} ({os.cpu_count()} CPUs)"
    )
    for kind in ("latency_ms", "wall ratio", "CPU ratio"):
        for case in (c.split("=")[0] for c in CASES):
            a, b = series[(kind, case, "A")], series[(kind, case, "B")]

            def cv(values: list[float]) -> float:
                return 100 * statistics.stdev(values) / statistics.mean(values)

            step = 100 * (statistics.median(b) / statistics.median(a) - 1)
            print(
                f"{kind:10s} {case:13s} A {[round(v, 2) for v in a]} B {[round(v, 2) for v in b]}"
                f"  CV A {cv(a):.1f}% B {cv(b):.1f}%  step {step:+.1f}%"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
