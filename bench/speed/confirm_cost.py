"""Confirm's cost per finding: one shared asv environment against one environment per commit.

    python bench/speed/confirm_cost.py [--processes 3] [--workdir DIR]

Builds a small PyTorch model repository (tests/toy_model.py) and an asv project for it
(fwdasv's environment, no index), then runs the same interleaved A/B re-measure (A B A B
..., `--processes` bench processes a side, confirm's first look) twice, side by side: with
one environment for both commits (a reinstall at every switch of commit) and with one
environment per commit (confirm's way). Prints installs, install seconds and total seconds
per finding for each, and a second A/B over the per-commit environments (explain after
confirm: nothing to install).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from toy_model import build_repo  # noqa: E402

from fwdasv.analysis.remeasure import Remeasurer, resolve  # noqa: E402
from fwdasv.asv.scaffold import write_torch_project  # noqa: E402
from fwdasv.asv.suitespec import torch_suite_source  # noqa: E402


def measure(project, a: str, b: str, processes: int, per_commit: bool, work: Path) -> dict:
    target = resolve(project, "forward.Mymodel.track_latency", None)
    measurer = Remeasurer(project, target, work, per_commit_envs=per_commit)
    started = time.perf_counter()
    for k in range(processes):
        measurer.process_median(a, f"a{k}")
        measurer.process_median(b, f"b{k}")
    return {
        "installs": measurer.installs,
        "install_s": measurer.install_s,
        "total_s": time.perf_counter() - started,
        "processes": measurer.runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="bench processes per side")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="fwdasv-confirm-cost-")).resolve()
    hashes = build_repo(root / "mymodel", commits=3, slow_index=2)
    suite = torch_suite_source(
        "Mymodel", "mymodel.bench:target", ["decode=1*1@64"], iters=5, samples=5, warmup_s=0.1
    )
    project = write_torch_project(root / "asv", root / "mymodel", "mymodel", [suite])
    a, b = hashes[0], hashes[2]
    rows = [
        ("before: one shared env", measure(project, a, b, args.processes, False, root / "w0")),
        ("after: one env per commit", measure(project, a, b, args.processes, True, root / "w1")),
        ("after, again (explain)", measure(project, a, b, args.processes, True, root / "w2")),
    ]
    print(f"confirm's interleaved A/B, {args.processes} processes a side, one finding ({root})")
    print(f"{'':28s} {'installs':>8s} {'install s':>10s} {'total s':>8s} {'processes':>9s}")
    for label, row in rows:
        print(
            f"{label:28s} {row['installs']:8d} {row['install_s']:10.1f} {row['total_s']:8.1f} "
            f"{row['processes']:9d}"
        )


if __name__ == "__main__":
    main()
