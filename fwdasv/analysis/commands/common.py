"""What the analysis commands share: progress lines, the findings' listing and gate, the
environment warning, and the options two commands spell alike.

Progress goes to stderr, so stdout holds only the answer (a table, JSON, Markdown).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from fwdasv.analysis import findings
from fwdasv.analysis.finding import Finding
from fwdasv.analysis.findings_format import format_findings
from fwdasv.analysis.gate import FINDINGS, Gate
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import CONTEXT, AnalysisCommand, end, warn_unreadable

F = TypeVar("F", bound=Callable[..., Any])


def analysis_command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    """`@click.command` of an analysis command: one-line user errors with status 2
    (`AnalysisCommand`), `-h`, defaults shown."""
    return click.command(name, cls=AnalysisCommand, context_settings=CONTEXT)


def progress(line: str) -> None:
    """One progress line, on stderr."""
    click.echo(line, err=True)


def gate_findings(
    found: findings.Found, fmt: str, skip_unreadable: bool, gate: Gate = FINDINGS
) -> None:
    """Print the findings, name the unreadable files, exit by the findings' gate."""
    unreadable = warn_unreadable(found.unreadable, skip_unreadable)
    click.echo(format_findings(found.findings, fmt, found.unreadable))
    end(gate.exit_status((f.status for f in found.findings), unreadable))


def warn_environments(project: AsvProject, machine: str | None = None) -> None:
    """Warn (stderr) about results labelled with another environment than the one that ran
    (`fwdasv.asv.ranenv`): the machine entry was rewritten under them."""
    from fwdasv.asv import ranenv

    found = ranenv.disagreements(project.results_dir, [machine] if machine else None)
    for line in ranenv.warning_lines(found):
        click.echo(line, err=True)


def confirm_and_scan(
    project: AsvProject,
    found: Sequence[Finding],
    machine: str | None,
    bench: tuple[str, ...],
    min_effect: float | None,
    improvements: bool = False,
) -> findings.Found:
    """Confirm `found` (`fwdasv.analysis.reproduce`), then read the findings again."""
    from fwdasv.analysis.reproduce import confirm_findings

    confirm_findings(project, found, echo=progress)
    return findings.scan(
        project, machine=machine, bench=bench, min_effect_pct=min_effect, improvements=improvements
    )


def explain_option(f: F) -> F:
    """`--explain/--no-explain` (confirm, nightly): the kernel diff of a confirmed step."""
    return click.option(
        "--explain/--no-explain",
        default=True,
        show_default=True,
        help="Profile a confirmed regression at both commits and keep the kernel diff.",
    )(f)


def show_bench_option(f: F) -> F:
    """`--show-bench` (confirm, explain): the bench processes' own output."""
    return click.option(
        "--show-bench", is_flag=True, help="Echo the bench processes' output (to stderr)."
    )(f)


def case_option(help: str) -> Callable[[F], F]:
    """`--case NAME` (bisect, explain): the one case of BENCH to follow."""
    return click.option("--case", metavar="NAME", default=None, help=help)
