"""`fwdasv check` on pull requests that change no forward: README-only commits, each checked.

    python bench/verdicts/check_noop_pairs.py [--pairs 20] [--max-processes 12] [--workdir DIR]

Builds the demo repository (fwdasv/demo/project.py) and an asv project for it with the
demo's paced CPU suite (tinylm's two attention-heavy cases, as `fwdasv init` writes a
suite on a box without a GPU), adds `--pairs` commits on top that change README.md
only, and runs `fwdasv check PARENT COMMIT` (the real command, a subprocess) on each.
A false alarm is an exit 1 on a pair whose forward is the same code. `--max-processes`
is check's own option (12, its default; 3: one look, and no second to hold a slowdown).
Prints one line a pair (exit status, each case's word and change, processes, seconds),
then the count that exited 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fwdasv.asv.scaffold import init_project
from fwdasv.demo.project import build_project
from fwdasv.demo.run import demo_suite
from fwdasv.git import git

# The demo's paced suite at a smaller scale (one bench process a commit).
SUITE = demo_suite(True, iters=3, samples=10, warmup_s=0.05, launches=1)
IDENTITY = {
    "GIT_AUTHOR_NAME": "fwdasv",
    "GIT_AUTHOR_EMAIL": "fwdasv@example.com",
    "GIT_COMMITTER_NAME": "fwdasv",
    "GIT_COMMITTER_EMAIL": "fwdasv@example.com",
}


def readme_commits(repo: Path, count: int) -> list[str]:
    """`count` commits that append a line to README.md: the forward's code untouched."""
    import os

    env = {**os.environ, **IDENTITY}
    hashes = []
    for number in range(1, count + 1):
        with open(repo / "README.md", "a") as handle:
            handle.write(f"\nA note on usage, number {number}.\n")
        git(repo, "add", "README.md", env=env)
        git(repo, "commit", "-q", "-m", f"Docs: usage note {number}", env=env)
        hashes.append(git(repo, "rev-parse", "HEAD").strip())
    return hashes


def check(config: Path, base: str, head: str, max_processes: int) -> tuple[int, dict, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwdasv",
            "check",
            base,
            head,
            "--config",
            str(config),
            "--format",
            "json",
            "--max-processes",
            str(max_processes),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.perf_counter() - started
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        document = {"error": done.stderr.strip().splitlines()[-1:] or ["?"]}
    return done.returncode, document, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20, help="README-only commits to check")
    parser.add_argument("--max-processes", type=int, default=12, help="check's, a side")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="fwdasv-check-noop-")).resolve()
    build_project(root / "tinylm")
    project = init_project(
        root / "asv", root / "tinylm", SUITE, project="tinylm", canary=False, check=False
    ).project
    tip = git(root / "tinylm", "rev-parse", "HEAD").strip()
    hashes = [tip, *readme_commits(root / "tinylm", args.pairs)]
    passed = 0
    print(
        f"fwdasv check --max-processes {args.max_processes} on {args.pairs} README-only pairs "
        f"({root})",
        flush=True,
    )
    for number, (base, head) in enumerate(itertools.pairwise(hashes), start=1):
        status, document, wall = check(project.config_path, base, head, args.max_processes)
        passed += status == 0
        cases = document.get("cases", [])
        words = ", ".join(f"{c['case']} {c['status']} {c['percent']:+.2f}%" for c in cases)
        processes = document.get("cost", {}).get("bench_processes", "?")
        print(
            f"pair {number:2d} {base[:8]}..{head[:8]}: exit {status}; {words or document}; "
            f"{processes} processes, {wall:.0f} s",
            flush=True,
        )
    print(f"{passed}/{args.pairs} README-only pairs exited 0", flush=True)


if __name__ == "__main__":
    main()
