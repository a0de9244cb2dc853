"""`fwdasv regressions`: the findings of the stored results, each series judged by its own
noise, with an exit status for CI (`fwdasv.analysis.rules.gate.findings_gate`)."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.commands.common import (
    analysis_command,
    confirm_found,
    gate_findings,
    warn_environments,
)
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.format import FORMATS
from fwdasv.analysis.rules.gate import findings_gate
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import (
    FiniteRange,
    bench_option,
    config_option,
    format_option,
    machine_option,
    skip_unreadable_option,
)
from fwdasv.core.verdicts import MIN_EFFECT_PCT


@analysis_command("regressions")
@config_option()
@format_option(
    FORMATS,
    "table: for a terminal; json: for scripts; markdown: for a pull-request comment.",
)
@machine_option("Only this machine's results [default: every machine].")
@bench_option
@click.option(
    "--min-effect",
    "--threshold",
    "min_effect",
    type=FiniteRange(min=0),
    default=None,
    help=(
        "Smallest step reported, in percent, however significant (--threshold: its old name) "
        f"[default: asv.conf.json's fwdasv.min_effect_pct, else {MIN_EFFECT_PCT}]."
    ),
)
@click.option(
    "--confirm",
    "run_confirm",
    is_flag=True,
    help="Re-measure each new regression and suspected finding first (`fwdasv confirm`), "
    "on this machine.",
)
@click.option(
    "--improvements",
    is_flag=True,
    help="List the improvements (downward steps, status `improvement`) too; they never gate.",
)
@click.option(
    "--fail-on-suspected",
    is_flag=True,
    help="Exit 1 on a suspected finding too (a step at the history's edge that too few "
    "commits show to rule out outliers) [default: only a regression or confirmed one].",
)
@skip_unreadable_option
def regressions_command(
    config: Path,
    fmt: str,
    machine: str | None,
    bench: tuple[str, ...],
    min_effect: float | None,
    run_confirm: bool,
    improvements: bool,
    fail_on_suspected: bool,
    skip_unreadable: bool,
) -> None:
    """List the regressions in the stored results, each series judged by its own noise.

    Reads asv's results directory directly (no `asv publish` needed). For every
    latency series (benchmark, case, machine, environment; a paced suite's
    track_relative in place of its case's latency) the run-to-run noise
    is estimated from its own history and the upward steps it cannot explain
    are listed, with their status: regression (detected), suspected (at the
    history's edge: the newest 1-3 commits, or 2-3 at a series' start, too few
    to rule out outliers), confirmed or not-reproduced (by `fwdasv confirm`),
    drift (the environment canary or the GPU clock stepped at the same commit),
    improvement (with --improvements). Exits 1 on any regression or confirmed
    finding (and suspected with --fail-on-suspected), 0 otherwise, 2 when the
    results cannot be read. A result file that cannot be read (truncated, not
    JSON) is named on stderr, counted in the JSON (`unreadable`) and fails the
    command (2) unless --skip-unreadable: a regression at its commit would not
    show. A commit never measured is no problem. A suite measured before with no
    value in any case at its newest commit (its target's module gone, every case
    skipped or failed there) is named under the listing, counted in the JSON
    (`unmeasured`) and fails the command (2) likewise.
    """
    project = AsvProject.load(config)
    warn_environments(project, machine)
    found = findings.scan(
        project, machine=machine, bench=bench, min_effect_pct=min_effect, improvements=improvements
    )
    if run_confirm:
        found = confirm_found(project, found)
    gate_findings(found, fmt, skip_unreadable, findings_gate(fail_on_suspected))
