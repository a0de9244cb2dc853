"""`fwdasv confirm`: every regression found re-measured, A and B interleaved on this machine
(`fwdasv.analysis.confirm.reproduce`), then listed and gated as `fwdasv regressions` does."""

from __future__ import annotations

from pathlib import Path

from fwdasv.analysis import triage
from fwdasv.analysis.commands.common import (
    analysis_command,
    explain_option,
    gate_findings,
    improvements_option,
    max_processes_option,
    progress,
    show_bench_option,
)
from fwdasv.analysis.findings.format import FORMATS
from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import project_machine
from fwdasv.core.clitools import (
    bench_option,
    config_option,
    format_option,
    machine_option,
    skip_unreadable_option,
)


@analysis_command("confirm")
@config_option()
@machine_option(
    "Only this machine's findings [default: the project's machine (`fwdasv init` records it; "
    "another box is refused), else every machine with results]."
)
@bench_option
@format_option(FORMATS, "How the findings are listed after the re-measure.")
@max_processes_option("")
@explain_option
@improvements_option
@show_bench_option
@skip_unreadable_option
def confirm_command(
    config: Path,
    machine: str | None,
    bench: tuple[str, ...],
    fmt: str,
    max_processes: int,
    explain: bool,
    improvements: bool,
    show_bench: bool,
    skip_unreadable: bool,
) -> None:
    """Re-measure each regression, suspected step and speed-up found: A and B interleaved
    on this machine, then explain the slowdowns.

    For each finding with status `regression` or `suspected`, the commit before its step (A)
    and the one after (B) are installed in turn into asv's environment and
    measured one bench process at a time, A B A B ..., at least 3 processes a
    side (more while undecided). The verdict is on the process-level medians,
    so the variance between processes counts: `confirmed` or `not-reproduced`,
    appended to <results_dir>/fwdasv-verdicts.jsonl. A confirmed regression is
    explained (a kernel or op diff of A and B). A speed-up is re-measured the same
    way (--no-improvements: not): kept as `improvement` if confirmed. Exits 1
    when a regression or a confirmed one remains, 0 otherwise, 2 on bad input or
    an unreadable result file (named on stderr; --skip-unreadable to pass anyway).
    """

    project = AsvProject.load(config)
    machine = project_machine(project, machine)
    read = triage.read(project, machine=machine, bench=bench, improvements=improvements)
    if read.unreadable and not skip_unreadable:
        # Before anything is measured: the gate says 2 for them whatever confirm finds.
        gate_findings(read, fmt, skip_unreadable)
    found = triage.confirm(
        project,
        read,
        max_processes=max_processes,
        run_explain=explain,
        improvements=improvements,
        echo=progress,
        bench_echo=progress if show_bench else None,
    )
    gate_findings(found, fmt, skip_unreadable)
