"""Confirm's cost for the findings of one commit pair: one re-measure per finding against one per pair.

    python bench/speed/confirm_cost.py [--cases 8] [--workdir DIR]

Builds a small PyTorch model repository (tests/toy_model.py, its forward doubled at the
last commit) and an asv project for it whose suite has `--cases` cases (fwdasv's
environment, no index), installs A and B once each (one environment per commit, as
confirm keeps them), then confirms, side by side in one run, with the real
`confirm.run_confirmation` on real bench processes (A B A B ..., 3 a side first):

- one finding alone (its case only in each bench process);
- before: `--cases` findings of the pair, each re-measured on its own (one case a process);
- after: the same findings from one interleaved A/B whose processes measure every case.

Prints bench processes, seconds and each row's cost over one finding's; the target is
after <= 1.3x. On a GPU a process's start (imports, engine, capture: 18-36 s for vLLM)
dwarfs a case's timing (about 2.8 s), so the ratio there is lower than on this CPU,
where a tiny model's case costs a good part of a 3 s process.
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

from fwdasv.analysis.confirm.processes import Cursor, ProcessPool, SeriesRef  # noqa: E402
from fwdasv.analysis.rules import confirm  # noqa: E402
from fwdasv.asv.install import env_dir_for, install_commit  # noqa: E402
from fwdasv.asv.scaffold import write_torch_project  # noqa: E402
from fwdasv.asv.suitespec import torch_suite_source  # noqa: E402

SUITE = "forward.Mymodel"
CASES = ("p16=16", "p32=32", "p48=48", "p64=64", "p96=96", "p128=128", "d4=4*1@64", "d8=8*1@64")
NOISE_PCT = 2.0  # a CPU process's noise (the floor): a 2x step decides at the first look


def confirm_pair(project, a: str, b: str, cases: list[str], work: Path) -> dict:
    """The findings of `cases` confirmed from one pool (one A/B for all of them)."""
    pool = ProcessPool(project, tuple(SeriesRef(SUITE, c) for c in cases), work)
    started = time.perf_counter()
    statuses = []
    for case in cases:
        cursor = Cursor(pool, a, b, SeriesRef(SUITE, case))
        verdict = confirm.run_confirmation(cursor.measure, NOISE_PCT, claimed_pct=100.0)
        statuses.append(str(verdict.status))
    return {
        "processes": pool.bench_processes,
        "total_s": time.perf_counter() - started,
        "installs": pool.installs,
        "statuses": statuses,
    }


def each_alone(project, a: str, b: str, cases: list[str], work: Path) -> dict:
    """The same findings, each re-measured on its own (a one-case pool each: before)."""
    rows = [confirm_pair(project, a, b, [case], work / case) for case in cases]
    return {
        "processes": sum(r["processes"] for r in rows),
        "total_s": sum(r["total_s"] for r in rows),
        "installs": sum(r["installs"] for r in rows),
        "statuses": [s for r in rows for s in r["statuses"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=len(CASES), help="findings of the pair")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="fwdasv-confirm-cost-")).resolve()
    hashes = build_repo(root / "mymodel", commits=3, slow_index=2)
    cases = list(CASES[: args.cases])
    suite = torch_suite_source(
        "Mymodel", "mymodel.bench:target", cases, iters=5, samples=5, warmup_s=0.1
    )
    project = write_torch_project(root / "asv", root / "mymodel", "mymodel", [suite])
    a, b = hashes[0], hashes[2]
    started = time.perf_counter()
    for commit in (a, b):
        install_commit(project, commit, env_dir=env_dir_for(project, commit))
    install_s = time.perf_counter() - started
    names = [c.split("=")[0] for c in cases]
    one = confirm_pair(project, a, b, names[:1], root / "w-one")
    after = confirm_pair(project, a, b, names, root / "w-after")
    before = each_alone(project, a, b, names, root / "w-before")
    print(
        f"confirm of {len(names)} findings of one pair (A {a[:8]}, B {b[:8]}, {root}); "
        f"A and B installed once each first: {install_s:.1f} s"
    )
    print(f"{'':44s} {'processes':>9s} {'total s':>8s} {'x one':>6s}  verdicts")
    for label, row in (
        ("one finding", one),
        (f"before: {len(names)} findings, a re-measure each", before),
        (f"after: {len(names)} findings, one re-measure", after),
    ):
        verdicts = ", ".join(sorted(set(row["statuses"])))
        print(
            f"{label:44s} {row['processes']:9d} {row['total_s']:8.1f} "
            f"{row['total_s'] / one['total_s']:6.2f}  {verdicts}"
        )


if __name__ == "__main__":
    main()
