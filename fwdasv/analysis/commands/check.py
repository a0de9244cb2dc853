"""`fwdasv check BASE HEAD`: the pull-request check (`fwdasv.analysis.check.check`), its
outcome as a table, a pull-request comment (markdown) or JSON."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.check.check import run_check
from fwdasv.analysis.check.format import format_check
from fwdasv.analysis.commands.common import (
    analysis_command,
    explain_option,
    measuring_machine_option,
    progress,
    show_bench_option,
)
from fwdasv.analysis.rules import confirm
from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import project_machine
from fwdasv.core.clitools import bench_filter, config_option, format_option, path_option
from fwdasv.core.files import check_output_path, write_atomic


@analysis_command("check")
@click.argument("base", metavar="BASE")
@click.argument("head", metavar="HEAD")
@config_option()
@measuring_machine_option
@bench_filter(
    "Regex a suite's name (forward.TinyLM) or one of its benchmarks' "
    "(forward.TinyLM.track_latency, as `asv run -b`) must match; repeat to keep any match "
    "[default: every fwdasv suite of the project but the canary]."
)
@click.option(
    "--case",
    "cases",
    metavar="NAME",
    multiple=True,
    help="Only this case of the chosen suites, e.g. decode_bs1_1k; repeat for several "
    "[default: every case]. Each bench process then measures these cases only.",
)
@format_option(
    ("table", "markdown", "json"),
    "table: for a terminal; markdown: for a pull-request comment; json: for scripts.",
)
@path_option(
    "--output",
    help="Also write the outcome, in --format, to this file (the comment a CI job posts).",
)
@click.option(
    "--max-processes",
    # 3 a side at the first look, as the help and confirm's rule say: no fewer.
    type=click.IntRange(min=confirm.MIN_PROCESSES),
    default=confirm.MAX_PROCESSES,
    show_default=True,
    help="Bench processes per side at most (3 at a time while a case is undecided). A "
    "slowdown must hold over 3 more a side; under 6 it may have no room to.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Measure anew: set the processes kept by an earlier check of this pair aside "
    "(renamed, not deleted) instead of taking them first.",
)
@click.option(
    "--history/--no-history",
    default=True,
    show_default=True,
    help="Take each series' noise from its stored results on this machine as the prior, as "
    "confirm does (fewer processes on a quiet GPU); --no-history: the processes alone decide.",
)
@explain_option
@show_bench_option
def check_command(
    base: str,
    head: str,
    config: Path,
    machine: str | None,
    bench: tuple[str, ...],
    cases: tuple[str, ...],
    fmt: str,
    output: Path | None,
    max_processes: int,
    fresh: bool,
    history: bool,
    explain: bool,
    show_bench: bool,
) -> None:
    """Check a pull request: is HEAD's forward slower than BASE's?

    BASE and HEAD (commits of the project's repository: the merge base and the pull
    request's head) are installed once each and measured one bench process at a time,
    BASE HEAD BASE HEAD ..., every case of each suite (--case: those named) in each
    process; no stored results are needed. Each case is judged by confirm's rule on the
    process medians (3 a side, more while undecided, up to --max-processes), with the
    series' stored noise on this machine as the prior where there is a history
    (--no-history: none): worse (slower by at least asv.conf.json's min_effect_pct),
    unchanged, improved or undecided, with its
    interval. Each slowdown is explained: the ops (kernels) that got slower and the
    source lines that call them. On vLLM over a compiled base, a commit whose compiled
    sources differ from the base's is refused. Each process is kept as it is measured
    (.fwdasv-check/ beside asv.conf.json) and a check of the same pair takes those
    first, so a check cut short goes on where it stopped (--fresh: measure anew).
    Exits 1 on a slowdown beyond min_effect_pct, 0 otherwise, 2 on bad input.
    """
    if output is not None:
        check_output_path(output, what="--output")  # before anything is measured
    project = AsvProject.load(config)
    if output is not None:
        project.check_output(output, what="--output")
    machine = project_machine(project, machine)
    outcome = run_check(
        project,
        base,
        head,
        bench=bench,
        cases=cases,
        machine=machine,
        max_processes=max_processes,
        run_explain=explain,
        fresh=fresh,
        history=history,
        echo=progress,
        bench_echo=progress if show_bench else None,
    )
    text = format_check(outcome, fmt)
    if output is not None:
        write_atomic(output, text + "\n", make_parents=False, what="--output")
    click.echo(text)
    raise SystemExit(outcome.status)
