"""`fwdasv regressions`, `fwdasv compare`, `fwdasv bisect`: asv's results judged, for CI.

Exit statuses are part of the interface (CI gates on them):

    regressions  0 none above threshold, 1 some above threshold, 2 cannot read / bad input
    compare      0 nothing worse,         1 something worse (or newly failing), 2 bad input
    bisect       0 found (every probe decided by the samples),
                 1 found but uncertain (a probe decided by the closer median, or an
                   unmeasurable commit next to the step), 2 cannot bisect / bad input

A user error is one `Error: ...` line and status 2 (not click's usual 1), so "a
regression was found" and "the command could not run" never look alike to CI.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import click

from fwdasv.analysis import compare, regressions
from fwdasv.analysis.bisect import driver as bisection
from fwdasv.asv.project import AsvProject
from fwdasv.core.clitools import CliError, Command
from fwdasv.core.errors import UserError

USER_ERROR = 2

_CONTEXT = {"help_option_names": ["-h", "--help"]}

config_option = click.option(
    "--config",
    "config",
    default="asv.conf.json",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The asv configuration (its results_dir, html_dir and repo are used).",
)


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except UserError as error:
        raise CliError(str(error), USER_ERROR) from None


@click.command("regressions", cls=Command, context_settings=_CONTEXT)
@config_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(regressions.FORMATS),
    default="table",
    show_default=True,
    help="table: for a terminal; json: for scripts; markdown: for a pull-request comment.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    default=None,
    help="Percent above which a regression fails the check [default: asv's own, from the "
    "configuration's regressions_thresholds, else 5].",
)
@click.option(
    "--bench",
    "-b",
    multiple=True,
    help="Regex searched in the benchmark name or 'name(params)'; repeat to keep any match.",
)
def regressions_command(
    config: Path, fmt: str, threshold: float | None, bench: tuple[str, ...]
) -> None:
    """List the regressions `asv publish` found (html/regressions.json).

    One line per upward step: benchmark, parameters, machine, the commit range
    (with subjects when the repository is local), the level before and after,
    and the change. Exits 1 when any is above the threshold, so CI can gate on
    it; 2 when the site is missing (run `asv publish` first).
    """
    with _user_errors():
        project = AsvProject.load(config)
        found = regressions.load_regressions(project, bench=bench, threshold_pct=threshold)
    click.echo(regressions.format_regressions(found, fmt))
    raise SystemExit(regressions.exit_status(found))


@click.command("compare", cls=Command, context_settings=_CONTEXT)
@click.argument("a")
@click.argument("b")
@config_option
@click.option("--machine", "-m", default=None, help="Machine name [default: the only one].")
@click.option(
    "--factor",
    type=click.FloatRange(min=1),
    default=compare.DEFAULT_FACTOR,
    show_default=True,
    help="A change counts only beyond this ratio of medians (asv's --factor).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=compare.DEFAULT_ALPHA,
    show_default=True,
    help="Significance level of the Mann-Whitney test on the samples (asv's is 0.002).",
)
@click.option(
    "--bench",
    "-b",
    multiple=True,
    help="Regex searched in the benchmark name or 'name(params)'; repeat to keep any match.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(compare.FORMATS),
    default="table",
    show_default=True,
    help="table, json or markdown.",
)
@click.option("--only-changed", is_flag=True, help="Hide unchanged and unknown results.")
def compare_command(
    a: str,
    b: str,
    config: Path,
    machine: str | None,
    factor: float,
    alpha: float,
    bench: tuple[str, ...],
    fmt: str,
    only_changed: bool,
) -> None:
    """Compare the stored results of commits A (before) and B (after) on their samples.

    A and B are hashes (or prefixes), branches or tags of the asv repository.
    Verdicts follow asv: significant (Mann-Whitney p < alpha on the stored
    samples, else non-overlapping 99% CIs) and beyond --factor. Unknown: too
    few samples and no finite CI, or measured at one commit only. Exits 1 when
    anything got worse (asv compare always exits 0, asv#884).
    """
    with _user_errors():
        project = AsvProject.load(config)
        found = compare.compare(project, a, b, machine, factor=factor, alpha=alpha, bench=bench)
        label_a, label_b = compare.resolve_commit(project, a), compare.resolve_commit(project, b)
    click.echo(
        compare.format_comparisons(
            found,
            fmt,
            a=label_a,
            b=label_b,
            factor=factor,
            alpha=alpha,
            only_changed=only_changed,
        )
    )
    raise SystemExit(compare.exit_status(found))


@click.command("bisect", cls=Command, context_settings=_CONTEXT)
@click.argument("commit_range", metavar="GOOD..BAD")
@click.argument("bench", metavar="BENCH")
@click.option("--case", default=None, help="The case (parameter) to follow, e.g. decode_bs8.")
@config_option
@click.option("--machine", "-m", default=None, help="asv machine name [default: the only one].")
@click.option(
    "--factor",
    type=click.FloatRange(min=1),
    default=bisection.DEFAULT_FACTOR,
    show_default=True,
    help="A step counts only beyond this ratio of medians.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=bisection.DEFAULT_ALPHA,
    show_default=True,
    help="Significance level of the Mann-Whitney test.",
)
@click.option(
    "--max-remeasure",
    type=click.IntRange(min=0),
    default=bisection.DEFAULT_MAX_REMEASURE,
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
    factor: float,
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
        raise CliError(f"{commit_range!r}: write the range as GOOD..BAD", USER_ERROR)

    def progress(line: str) -> None:
        click.echo(line, err=True)

    with _user_errors():
        project = AsvProject.load(config)
        if machine is None:
            machine = _only_machine(project)
        result = bisection.bisect(
            project,
            good,
            bad,
            bench,
            machine,
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
        from fwdasv.core.results import write_atomic

        write_atomic(json_path, json.dumps(result.to_json(), indent=2) + "\n")
    raise SystemExit(0 if result.certain else 1)


def _only_machine(project: AsvProject) -> str:
    machines = []
    if project.results_dir.is_dir():
        machines = sorted(
            p.name for p in project.results_dir.iterdir() if (p / "machine.json").is_file()
        )
    if len(machines) != 1:
        found = ", ".join(machines) if machines else "none yet"
        raise CliError(f"pick the asv machine with --machine (results have: {found})", USER_ERROR)
    return machines[0]
