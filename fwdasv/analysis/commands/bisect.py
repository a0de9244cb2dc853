"""`fwdasv bisect GOOD..BAD BENCH`: the first commit where BENCH changed, measured with asv
(`fwdasv.analysis.bisect`); the answer on stdout, progress on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import click

from fwdasv.analysis.bisect.driver import bisect
from fwdasv.analysis.bisect.rules import DEFAULT_MAX_REMEASURE, DEFAULT_PROBE_FACTOR
from fwdasv.analysis.commands.common import analysis_command, case_option, progress
from fwdasv.analysis.judgment import DEFAULT_ALPHA
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import (
    CliError,
    alpha_option,
    config_option,
    factor_option,
    finding,
    machine_option,
)
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.core.files import check_output_path, write_atomic
from fwdasv.core.verdicts import PROBE_FLOOR_PCT


@analysis_command("bisect")
@click.argument("commit_range", metavar="GOOD..BAD")
@click.argument("bench", metavar="BENCH")
@case_option("The case (parameter) to follow, e.g. decode_bs8.")
@config_option()
@machine_option()
@factor_option(
    "A probe's step counts only beyond this ratio of medians [default: "
    f"{DEFAULT_PROBE_FACTOR:g} ({PROBE_FLOOR_PCT:g}%: above the run-to-run offsets one "
    "run's samples do not see), or 1 + asv.conf.json's fwdasv.min_effect_pct / 100 when larger]."
)
@alpha_option(DEFAULT_ALPHA, "Significance level of the Mann-Whitney test.")
@click.option(
    "--max-remeasure",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_REMEASURE,
    show_default=True,
    help="Extra asv runs (appended samples) for a commit the samples cannot place.",
)
@click.option(
    "--python",
    default=None,
    help="Passed to asv run as --python (a version; 'same' and paths are refused).",
)
@click.option("--show-asv", is_flag=True, help="Echo asv's own output (to stderr).")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the result (every probe) as JSON to this file.",
)
def bisect_command(
    commit_range: str,
    bench: str,
    case: str | None,
    config: Path,
    machine: str | None,
    factor: float | None,
    alpha: float,
    max_remeasure: int,
    python: str | None,
    show_asv: bool,
    json_path: Path | None,
) -> None:
    """Find the first commit in GOOD..BAD where BENCH changed, measuring with asv.

    Each probe is one `asv run` of BENCH (and --case) at one commit on the
    first-parent line, samples recorded (or appended when measured again).
    Stored results with enough samples are reused. A probe is bad when it
    moved from GOOD beyond --factor with Mann-Whitney p < alpha (in BAD's
    direction), good when it did not and BAD moved from it that way, and is
    measured again otherwise (after --max-remeasure: the closer median,
    flagged uncertain). Needs an asv-managed
    environment (virtualenv, uv, ...) that installs every commit: an existing
    environment / --python=same is refused, since it would measure one build
    for every commit. Progress goes to stderr, the answer to stdout. Exits 0
    when found, 1 when found but uncertain, 2 when it cannot bisect.
    """
    good, sep, bad = commit_range.partition("..")
    if not sep or not good or not bad or bad.startswith("."):
        raise CliError(f"{commit_range!r}: write the range as GOOD..BAD", EXIT_USAGE)
    if json_path is not None:
        # Before any asv run: a path that cannot be written costs no measurement.
        check_output_path(json_path, what="--json")

    project = AsvProject.load(config)
    result = bisect(
        project,
        good,
        bad,
        bench,
        machine or project.only_machine(),
        case,
        factor=factor,
        alpha=alpha,
        max_remeasure=max_remeasure,
        python=python,
        echo=progress,
        asv_echo=progress if show_asv else None,
    )
    click.echo(result.summary())
    if json_path is not None:
        write_atomic(
            json_path,
            json.dumps(result.to_json(), indent=2) + "\n",
            make_parents=False,
            what="--json",
        )
    finding(not result.certain)
