"""A results tree written by real asv runs, for the history and export tests.

A tiny git project with an asv suite shaped like fwdasv's (a parameterized track_
returning samples, scalar companions, a grid, a benchmark removed after the first
commit), measured by real `asv run` on an existing environment: three commits on
"testbox", the last one also on "otherbox". `build_results_tree` returns where the
results, the repository and the commits are; conftest's `results_tree` builds it once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTBOX, git

SUITE = """
import math


class TinyDecoder:
    params = [["decode_bs1", "prefill_128", "one_sample"]]
    param_names = ["case"]
    unit = "seconds"
    version = "1"

    def track_latency(self, case):
        if case == "one_sample":
            return {{"samples": [2e-4], "number": 1}}  # a 99% CI of +-Infinity
        base = {{"decode_bs1": 1e-4, "prefill_128": 5e-4}}[case] * {scale}
        return {{"samples": [base * (1 + 0.01 * ((7 * i) % 10)) for i in range(12)], "number": 1}}

    def track_spread_pct(self, case):
        return {{"decode_bs1": 0.25, "prefill_128": 0.75, "one_sample": 0.0}}[case]

    track_spread_pct.unit = "percent"

    def track_graph_vs_eager(self, case):
        return float("nan") if case == "prefill_128" else 0.0  # NaN: asv's "skipped"

    track_graph_vs_eager.unit = "relative_rms"


class Grid:
    params = [["a", "b"], [1, 2, 3]]
    param_names = ["mode", "n"]
    unit = "seconds"

    def track_value(self, mode, n):
        value = (ord(mode) * 10 + n) * 1e-6
        return {{"samples": [value] * 5, "number": 1}}


def track_old():
    return 1.0


track_old.version = "{old_version}"
{removed}
"""
REMOVED = '\n\ndef track_removed():\n    return 2.0\n\n\ntrack_removed.version = "1"\n'
SUITE_V1 = SUITE.format(scale=1.0, old_version="1", removed=REMOVED)
SUITE_V2 = SUITE.format(scale=1.1, old_version="2", removed="")

MACHINES = {
    "testbox": {
        **TESTBOX,
        "ram": "8GB",
        "gpu": "NVIDIA H200",
        "gpu_count": 1,
        "gpu_uuids": "GPU-0000",
        "driver": "570.86.15",
        "cuda": "12.8",
        "clock_policy": "locked:1980MHz",
    },
    "otherbox": {
        "machine": "otherbox",
        "os": "Linux",
        "arch": "x86_64",
        "cpu": "test cpu",
        "num_cpu": "2",
        "ram": "8GB",
        "gpu": "NVIDIA H100",
        "gpu_count": 2,
        "driver": "570.86.15",
        "cuda": "12.8",
    },
}
PER_COMMIT = 3 * 3 + 2 * 3 + 1  # TinyDecoder methods x cases, Grid combos, track_old


def asv_run(repo: Path, home: Path, commit: str, machine: str) -> None:
    argv = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "-E",
        f"existing:{sys.executable}",
        "--set-commit-hash",
        commit,
        "--machine",
        machine,
        "--record-samples",
        "--launch-method",
        "spawn",
        "--show-stderr",
    ]
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, (
        f"asv run {commit[:8]} on {machine}: rc {done.returncode}\n"
        + (done.stdout + done.stderr)[-3000:]
    )


def build_results_tree(base: Path) -> dict[str, Any]:
    """The project under `base`, its three commits measured: {"results", "repo", "commits"}."""
    home = base / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({**MACHINES, "version": 1}))
    repo = base / "project"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "asv.conf.json").write_text(
        json.dumps(
            {
                "version": 1,
                "project": "tiny",
                "repo": ".",
                "branches": ["main"],
                "environment_type": "existing",
                "benchmark_dir": "benchmarks",
                "results_dir": "results",
                "html_dir": "html",
                "launch_method": "spawn",
            }
        )
    )
    (repo / ".gitignore").write_text("results/\nhtml/\n")
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for i, suite in enumerate((SUITE_V1, SUITE_V2, SUITE_V2)):
        (repo / "benchmarks" / "forward.py").write_text(suite)
        (repo / "model.py").write_text(f"LAYERS = {i}\n")
        git(repo, "add", "-A")
        # A minute apart, as a history is: the markdown table's order is the commit dates'.
        stamp = f"2026-01-01T00:{i:02d}:00+00:00"
        with pytest.MonkeyPatch.context() as dated:
            dated.setenv("GIT_AUTHOR_DATE", stamp)
            dated.setenv("GIT_COMMITTER_DATE", stamp)
            git(repo, "commit", "-q", "-m", f"commit {i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    for i, commit in enumerate(commits):
        # asv discovers an existing environment's suite in the working tree.
        (repo / "benchmarks" / "forward.py").write_text(SUITE_V1 if i == 0 else SUITE_V2)
        asv_run(repo, home, commit, "testbox")
    asv_run(repo, home, commits[-1], "otherbox")
    return {"results": repo / "results", "repo": repo, "commits": commits}
