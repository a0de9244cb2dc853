"""`fwdasv nightly` / scripts/nightly.py: one unattended run on a benchmark box.

In this order: optional hardware setup (locked clocks, persistence), this
machine's asv machine entry, the pre-flight checks, `asv run` (the new commits
of the configured branches, or one prepared build on an existing environment
with `--set-commit-hash`), `asv publish`, the regressions listing as the exit
status, and the hardware reset. The reset runs whatever happened before it (a
failed run, a failed check, Ctrl-C): the box is never left with locked clocks.

Exit status: 0 nothing above threshold, 1 a regression above threshold,
2 the run could not be made (asv failed, a pre-flight check failed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fwdasv.analysis import regressions
from fwdasv.asv import project as asv_project
from fwdasv.core.errors import UserError
from fwdasv.core.files import check_output_path
from fwdasv.hw import checks as hw_checks
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import setup as hw_setup
from fwdasv.hw.nvml import read_inventory

STATUS_OK, STATUS_REGRESSION, STATUS_FAILED = 0, 1, 2


def run_nightly(
    config: str | Path,
    *,
    machine: str | None = None,
    gpus: tuple[str, ...] | None = None,
    lock_clocks: str | None = None,
    state_file: str | None = None,
    spec: str = "NEW",
    existing_python: str | None = None,
    commit: str | None = None,
    machine_file: str | None = None,
    echo: Callable[[str], None] = print,
) -> int:

    project = asv_project.AsvProject.load(config)
    if existing_python and not commit:
        raise UserError("--existing needs --commit: asv must be told which commit the build is")
    # Before the clocks are touched or anything runs.
    check_output_path(hw_machine.machine_file_path(machine_file), what="--machine-file")
    locked = False
    try:
        if lock_clocks:
            echo(f"[nightly] 1/6 hardware setup: lock clocks at {lock_clocks}")
            hw_setup.setup(gpus, lock_clocks, persistence=True, state_file=state_file, echo=echo)
            locked = True
        else:
            echo("[nightly] 1/6 hardware setup: none asked (clocks as they are)")
        entry = hw_machine.this_machine(machine, gpus, "locked" if locked else "auto")
        hw_machine.write_machine_file(entry, machine_file)
        name = entry["machine"]
        echo(f"[nightly] 2/6 machine {name}: gpu {entry.get('gpu')} x{entry.get('gpu_count')}")
        if entry.get("gpu_count", "0") != "0":
            inventory = read_inventory(gpus, state_file)
            checks = hw_checks.preflight(inventory, "locked" if locked else "any")
            failed = [c for c in checks if c.required and not c.ok]
            for check in checks:
                echo(
                    f"  {check.name} gpu {check.gpu}: {'ok' if check.ok else 'FAILED'} {check.detail}"
                )
            if failed:
                echo(f"[nightly] 3/6 pre-flight failed ({len(failed)} check(s)); not measuring")
                return STATUS_FAILED
        echo("[nightly] 3/6 pre-flight ok")
        if existing_python:
            echo(
                f"[nightly] 4/6 asv run on the existing environment {existing_python}, commit {commit}"
            )
            status = asv_project.run_asv(
                project,
                "run",
                "-E",
                f"existing:{existing_python}",
                "--set-commit-hash",
                str(commit),
                "--machine",
                name,
                "--record-samples",
                "--launch-method",
                "spawn",
                "--show-stderr",
                echo=lambda line: echo(f"  {line}"),
                check_codes=(0, 2),
            )
        else:
            echo(f"[nightly] 4/6 asv run {spec}")
            status = asv_project.run_spec(project, spec, name, echo=lambda line: echo(f"  {line}"))
        if status == 2:
            echo("[nightly] some benchmarks failed (their results are recorded as failed)")
        echo("[nightly] 5/6 asv publish")
        asv_project.publish(project, echo=None)
        found = regressions.load_regressions(project)
        echo("[nightly] 6/6 regressions")
        for line in regressions.format_table(found).splitlines():
            echo(f"  {line}")
        return regressions.exit_status(found)
    finally:
        if locked:
            echo("[nightly] reset: restoring the saved GPU state")
            hw_setup.reset(state_file, echo=echo)
