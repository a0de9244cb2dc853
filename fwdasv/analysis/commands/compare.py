"""`fwdasv compare A B`: two commits' stored results compared, each series by its own noise
(`fwdasv.analysis.compare.stored`), beside the history's findings between them; exits 1
when a latency got worse or the history holds a gating finding between A and B."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.commands.common import (
    analysis_command,
    refuse_bad_pair,
    warn_environments,
)
from fwdasv.analysis.compare.compare import METHODS, NOISE
from fwdasv.analysis.compare.format import FORMATS, format_comparisons
from fwdasv.analysis.compare.stored import compare_commits, default_factor, resolve_commit
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import (
    alpha_option,
    bench_option,
    config_option,
    factor_option,
    finding,
    format_option,
    machine_option,
)
from fwdasv.core.verdicts import MIN_EFFECT_PCT, VerdictSettings


@analysis_command("compare")
@click.argument("a")
@click.argument("b", required=False)
@config_option()
@machine_option()
@factor_option(
    "A floor: a change counts only beyond this ratio of medians (asv's --factor) "
    "[default: 1 + asv.conf.json's fwdasv.min_effect_pct / 100, the smallest change the "
    f"findings report: {VerdictSettings().min_effect_factor:g} for {MIN_EFFECT_PCT:g}%].",
)
@alpha_option(help="Significance level (two-sided) of the test (asv's is 0.002).")
@click.option(
    "--method",
    type=click.Choice(METHODS),
    default=NOISE,
    show_default=True,
    help="noise: each series' run-to-run noise from its history; mann-whitney: asv's rule "
    "(the stored samples of the two commits only).",
)
@bench_option
@format_option(FORMATS, "table, json or markdown.")
@click.option(
    "--only-changed",
    is_flag=True,
    help="Hide unchanged, not-significant, unknown and telemetry results.",
)
def compare_command(
    a: str,
    b: str | None,
    config: Path,
    machine: str | None,
    factor: float | None,
    alpha: float,
    method: str,
    bench: tuple[str, ...],
    fmt: str,
    only_changed: bool,
) -> None:
    """Compare the stored results of commits A (before) and B (after).

    A and B are hashes (or prefixes), branches or tags of the asv repository;
    `A..B` as one argument is the same pair.
    A change is significant when it exceeds what the series' own run-to-run
    noise (estimated from its stored history) explains, at --alpha, and counts
    beyond --factor, a floor. --method mann-whitney is asv's rule instead.
    Not-significant: the noise cannot tell the change from none, whatever its
    ratio (the note says why). Unknown: too few samples and no finite CI, or
    measured at one commit only. Only latency (unit seconds, and a paced suite's
    track_relative, unit ratio) counts: telemetry
    (clocks, power, spread, graph-vs-eager, clock uncertainty) is shown as
    `telemetry`, never worse or better. Where the stored history holds a finding
    between A and B (its pair inside A..B, same series), it is shown beside the pair's
    verdict, and a regression or confirmed one fails as `fwdasv regressions` fails on
    it ("decided by: finding"). Exits 1 when a latency got worse (asv compare always
    exits 0, asv#884).
    """
    if b is None:
        a, dots, b = a.partition("..")
        if not dots or not a or not b or b.startswith("."):
            raise click.UsageError("give two commits: A B (before, after), or A..B")
    project = AsvProject.load(config)
    refuse_bad_pair(project, a, b, "A and B", "compare")
    warn_environments(project, machine)
    if factor is None:
        factor = default_factor(project)
    found = compare_commits(
        project, a, b, machine, factor=factor, alpha=alpha, bench=bench, method=method,
        warn=lambda line: click.echo(f"Warning: {line}", err=True),
    )  # fmt: skip
    label_a, label_b = resolve_commit(project, a), resolve_commit(project, b)
    click.echo(
        format_comparisons(
            found,
            fmt,
            a=label_a,
            b=label_b,
            factor=factor,
            alpha=alpha,
            only_changed=only_changed,
        )
    )
    # One verdict per pair: a gating finding of the history between A and B fails too.
    failed = COMPARISON.exit_status(c.verdict for c in found) != 0
    finding(failed or any(c.decided_by == "finding" for c in found))
