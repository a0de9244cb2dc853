"""`fwdasv nightly` / scripts/nightly.py: one unattended run on a benchmark box.

In this order: optional hardware setup (locked clocks, persistence), this
machine's asv machine entry, the pre-flight checks, `asv run` (the new commits
of the configured branches, or one prepared build on an existing environment
with `--set-commit-hash`), the findings (each series judged by its own noise),
their confirmation by an interleaved A/B re-measure on this machine (and the
kernel diff of a confirmed one), `asv publish` with the findings in the site,
the gate as the exit status, and the hardware reset. The reset runs whatever
happened before it (a failed run, a failed check, Ctrl-C): the box is never
left with locked clocks.

Exit status: 0 no confirmed regression, 1 a confirmed regression (without
confirmation: any regression), 2 the run could not be made (asv failed, a
pre-flight check failed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fwdasv.analysis import findings
from fwdasv.analysis.gate import nightly_gate
from fwdasv.analysis.publish import publish
from fwdasv.analysis.reproduce import confirm_findings
from fwdasv.analysis.status import Status
from fwdasv.asv import project as asv_project
from fwdasv.core.errors import UserError
from fwdasv.core.files import check_output_path
from fwdasv.hw import checks as hw_checks
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import setup as hw_setup
from fwdasv.hw.nvml import read_inventory

STATUS_OK, STATUS_REGRESSION, STATUS_FAILED = 0, 1, 2
# What `asv run` says (with status 1) when the range holds no commit to measure.
NOTHING_SELECTED = "No commit hashes selected"


def _run_new(
    project: asv_project.AsvProject, spec: str, machine: str, echo: Callable[[str], None]
) -> int:
    """`asv run SPEC`; a night without new commits is not a failure (asv exits 1 then)."""
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        echo(f"  {line}")

    try:
        return asv_project.run_spec(project, spec, machine, echo=say)
    except asv_project.AsvError:
        if not any(NOTHING_SELECTED in line for line in lines):
            raise
        echo("[nightly] no new commit to measure; the stored results are judged again")
        return 0


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
    confirm: bool | None = None,
    echo: Callable[[str], None] = print,
) -> int:

    project = asv_project.AsvProject.load(config)
    if confirm is None:
        confirm = project.verdict_settings().confirm
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
            status = _run_new(project, spec, name, echo)
        if status == 2:
            echo("[nightly] some benchmarks failed (their results are recorded as failed)")
        if confirm and existing_python:
            echo("[nightly] an existing environment installs nothing per commit: no confirmation")
            confirm = False
        found = findings.find(project, machine=name)
        if confirm and any(f.status == Status.REGRESSION for f in found):
            echo("[nightly] 5/6 confirm the new regressions (A/B re-measure, then explain)")
            confirm_findings(project, found, echo=lambda line: echo(f"  {line}"))
        else:
            echo(
                "[nightly] 5/6 nothing to confirm" if confirm else "[nightly] 5/6 confirm: skipped"
            )
        echo("[nightly] 6/6 asv publish with the findings")
        found = publish(project, echo=None)
        found = [f for f in found if f.key.machine == name]
        for line in findings.format_findings(found, "table").splitlines():
            echo(f"  {line}")
        gating = nightly_gate(confirm).exit_status(f.status for f in found)
        return STATUS_REGRESSION if gating else STATUS_OK
    finally:
        if locked:
            echo("[nightly] reset: restoring the saved GPU state")
            hw_setup.reset(state_file, echo=echo)
