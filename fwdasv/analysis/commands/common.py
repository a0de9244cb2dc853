"""What the analysis commands share: progress lines, the findings' listing and gate, the
environment warning, and the options two commands spell alike.

Progress goes to stderr, so stdout holds only the answer (a table, JSON, Markdown).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from fwdasv.analysis import triage
from fwdasv.analysis.compare.stored import resolve_commit
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.rules import confirm as confirm_rule
from fwdasv.analysis.rules.gate import FINDINGS, Gate, inside_steps
from fwdasv.asv import ranenv
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import (
    CONTEXT,
    AnalysisCommand,
    CliError,
    end,
    machine_option,
    warn_unreadable,
)
from fwdasv.core.errors import EXIT_USAGE

F = TypeVar("F", bound=Callable[..., Any])


def analysis_command(
    name: str, extra_args: bool = False
) -> Callable[[Callable[..., Any]], click.Command]:
    """`@click.command` of an analysis command: one-line user errors with status 2
    (`AnalysisCommand`), `-h`, defaults shown; `extra_args`: arguments beyond its own reach
    the command (`click.Context.args`), to name the mistake they are."""
    settings = {**CONTEXT, "allow_extra_args": True} if extra_args else CONTEXT
    return click.command(name, cls=AnalysisCommand, context_settings=settings)


def progress(line: str) -> None:
    """One progress line, on stderr."""
    click.echo(line, err=True)


def gate_findings(
    found: findings.Found, fmt: str, skip_unreadable: bool, gate: Gate = FINDINGS
) -> None:
    """Print the findings, name the unreadable files, the suites gone dark and the
    warnings, exit by the findings' gate."""
    unreadable = count_unreadable(found, skip_unreadable)
    click.echo(format_findings(found.findings, fmt, found.unreadable, found.dark))
    end(gate.exit_status((f.status for f in found.findings), unreadable, len(found.dark)))


def count_unreadable(found: findings.Found, skip_unreadable: bool) -> int:
    """Name the unreadable files and the read's warnings on stderr; the count the gate reads:
    0 when skipped, except a file inside a finding's range (`fwdasv.analysis.rules.gate.
    inside_steps`), which --skip-unreadable cannot pass."""
    for warning in found.warnings:
        click.echo(f"Warning: {warning}", err=True)
    unreadable = warn_unreadable(found.unreadable, skip_unreadable)
    if not skip_unreadable:
        return unreadable
    inside = inside_steps((p.path for p in found.unreadable), found.steps())
    for path, step in inside:
        click.echo(
            f"Error: {path} is inside the step {step}: with its commit's result missing the "
            "step can be misread, so --skip-unreadable does not pass it; fix or remove the "
            "file (`asv run` the commit again)",
            err=True,
        )
    return len(inside)


def warn_environments(project: AsvProject, machine: str | None = None) -> None:
    """Warn (stderr) about results labelled with another environment than the one that ran
    (`fwdasv.asv.ranenv`): the machine entry was rewritten under them."""
    found = ranenv.disagreements(project.results_dir, [machine] if machine else None)
    for line in ranenv.warning_lines(found):
        click.echo(line, err=True)


def confirm_found(project: AsvProject, found: findings.Found) -> findings.Found:
    """Confirm `found` (`fwdasv.analysis.triage.confirm`): the findings as now judged."""
    return triage.confirm(project, found, echo=progress)


def refuse_bad_pair(project: AsvProject, a: str, b: str, names: str, what: str) -> None:
    """A UserError (2) when A and B (`names`: "A and B") name one commit, or B is an
    ancestor of A (the pair reversed), before anything is read or measured: the pair could
    only come out "no change", or every step backwards. Commits of two branches (neither
    an ancestor of the other) pass, and so does a pair git cannot place (no clone)."""
    first, second = resolve_commit(project, a), resolve_commit(project, b)
    if first.startswith(second) or second.startswith(first):
        raise CliError(
            f"{names} name one commit, {first[:8]} ({a!r}, {b!r}): {what} needs two commits, "
            "the earlier first (a finding's pair: `fwdasv regressions` lists them)",
            EXIT_USAGE,
        )
    if project.is_ancestor(second, first):
        raise CliError(
            f"{names} are reversed: {b!r} ({second[:8]}) is an ancestor of {a!r} "
            f"({first[:8]}); {what} takes the earlier commit first: `fwdasv {what} {b} {a}`",
            EXIT_USAGE,
        )


def measuring_machine_option(f: F) -> F:
    """`--machine` (check, explain): the machine this box measures as, checked by
    `fwdasv.asv.project_machine.project_machine`."""
    return machine_option(
        "The machine this box measures as [default: the project's machine, which `fwdasv init` "
        "records: another box is refused unless named here]."
    )(f)


def max_processes_option(what: str) -> Callable[[F], F]:
    """`--max-processes` (confirm, triage fixed-by): bench processes a side at most, never
    under confirm's first look (`MIN_PROCESSES`, 3 a side: what their help promises)."""
    return click.option(
        "--max-processes",
        type=click.IntRange(min=confirm_rule.MIN_PROCESSES),
        default=confirm_rule.MAX_PROCESSES,
        show_default=True,
        help=f"{what}Bench processes per side at most (measured 3 at a time while undecided).",
    )


def explain_switch(help: str | None) -> Callable[[F], F]:
    """`--explain/--no-explain`, on by default: explain what a command confirms (the kernel
    diff of a confirmed step); `help` says where."""
    return click.option("--explain/--no-explain", default=True, show_default=True, help=help)


# check, confirm and nightly.
explain_option = explain_switch(
    "Profile a confirmed regression at both commits and keep the kernel diff."
)


# confirm and nightly: re-measure speed-ups too.
improvements_option = click.option(
    "--improvements/--no-improvements",
    default=True,
    show_default=True,
    help="Re-measure each speed-up found too (A/B, as a regression): a confirmed one stays "
    "`improvement`, one the re-measure rules out is set aside as `not-reproduced`.",
)


def show_bench_option(f: F) -> F:
    """`--show-bench` (bisect, check, confirm, explain, triage): the bench processes' own output."""
    return click.option(
        "--show-bench", is_flag=True, help="Echo the bench processes' output (to stderr)."
    )(f)


def case_option(help: str) -> Callable[[F], F]:
    """`--case NAME` (bisect, explain): the one case of BENCH to follow."""
    return click.option("--case", metavar="NAME", default=None, help=help)
