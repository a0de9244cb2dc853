"""What one `fwdasv check` of a pair costs against one `fwdasv confirm` of the same pair.

    python bench/speed/check_cost.py [--workdir DIR]

Builds the demo repository (fwdasv/demo/project.py) and an asv project for it with the
demo's paced CPU suite (two cases), measures its history with asv (every commit, as the
demo does where the box is noisy) under a machine file of its own, and takes the
findings at the injected commit. Then, side by side in one run, A and B (the pair
confirm re-measures for them: `pair_groups`) installed once first:

- confirm: the findings of the pair re-measured (one interleaved A/B, the history's
  noise as the prior) and each confirmed one explained, as `fwdasv confirm` does;
- check: `run_check(A, B)`, every case from no stored results (the run's own noise
  only), each slowdown explained, as `fwdasv check A B` does.

Prints bench processes (timed and profiled), installs and seconds for each, and check's
over confirm's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fwdasv.analysis.check.check import run_check
from fwdasv.analysis.confirm.reproduce import confirm_findings, pair_groups
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.series import load_series
from fwdasv.analysis.rules.status import TO_CONFIRM
from fwdasv.asv.install import env_dir_for, install_commit
from fwdasv.asv.project import run_commits
from fwdasv.asv.scaffold import init_project
from fwdasv.demo.project import build_project, slow_commit
from fwdasv.demo.run import CASES, demo_suite
from fwdasv.hw.machine import this_machine, write_machine_file

MACHINE = "check-cost"
# The demo's paced suite at a smaller scale (one bench process a commit).
SUITE = demo_suite(True, iters=3, samples=10, warmup_s=0.05, launches=1)


def counted(echo_lines: list[str]) -> int:
    """Profiled bench processes (explain's), from the progress lines."""
    return sum(line.startswith("profiling ") for line in echo_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="fwdasv-check-cost-")).resolve()
    hashes = build_project(root / "tinylm")
    project = init_project(
        root / "asv", root / "tinylm", SUITE, project="tinylm", canary=False, check=False
    ).project
    machine_file = root / "machines.json"
    write_machine_file(this_machine(MACHINE), machine_file)
    started = time.perf_counter()
    run_commits(project, hashes, MACHINE, echo=None, machine_file=machine_file)
    history_s = time.perf_counter() - started
    slow = slow_commit(hashes)
    pending = [
        f for f in findings.find(project) if f.status in TO_CONFIRM and slow == f.after_commit
    ]
    if not pending:
        raise SystemExit(f"no finding at the injected commit {slow[:8]} after one asv run")
    order, series = load_series(project)
    group = pair_groups(pending, order, series)[0]
    a, b = group.a, group.b
    started = time.perf_counter()
    for commit in (a, b):
        install_commit(project, commit, env_dir=env_dir_for(project, commit))
    install_s = time.perf_counter() - started

    confirm_lines: list[str] = []
    started = time.perf_counter()
    confirm_findings(project, list(group.findings), echo=confirm_lines.append)
    confirm_s = time.perf_counter() - started
    # confirm's own last line of the pair: "... judged from N bench processes ..."
    pool_line = next(
        (line for line in confirm_lines if "judged from" in line), "judged from ? bench"
    )
    check_lines: list[str] = []
    started = time.perf_counter()
    outcome = run_check(project, a, b, echo=check_lines.append)
    check_s = time.perf_counter() - started

    print(
        f"pair A {a[:8]} B {b[:8]} ({len(group.findings)} finding(s), {len(CASES)} cases; "
        f"{root}); history measured by asv in {history_s:.0f} s; A and B installed first "
        f"in {install_s:.1f} s"
    )
    print(f"{'':8s} {'timed':>6s} {'profiled':>8s} {'seconds':>8s}  verdicts")
    confirm_timed = pool_line.split("judged from ")[1].split()[0]
    judged = sorted({str(f.status) for f in findings.find(project) if f.after_commit == slow})
    print(
        f"{'confirm':8s} {confirm_timed:>6s} {counted(confirm_lines):8d} {confirm_s:8.1f}  "
        f"{', '.join(judged)}"
    )
    words = ", ".join(f"{c.case} {c.status}" for c in outcome.cases)
    print(
        f"{'check':8s} {outcome.bench_processes:6d} {counted(check_lines):8d} {check_s:8.1f}  "
        f"{words}"
    )
    print(f"check / confirm: {check_s / confirm_s:.2f}x the seconds")


if __name__ == "__main__":
    main()
