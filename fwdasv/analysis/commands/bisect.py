"""`fwdasv bisect [GOOD..BAD BENCH]`: the first commit of a step, by interleaved bench processes
(`fwdasv.analysis.bisect`). With no arguments, every finding's range of several commits, the
culprit recorded with the finding; by hand, one range and benchmark. The answers on stdout,
progress on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import click

from fwdasv.analysis.commands.common import (
    analysis_command,
    case_option,
    progress,
    show_bench_option,
)
from fwdasv.analysis.rules.confirm import MAX_PROCESSES
from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import project_machine
from fwdasv.core.clitools import CliError, config_option, finding, machine_option, path_option
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.core.files import check_output_path, write_atomic


@analysis_command("bisect", extra_args=True)  # two commits for GOOD..BAD: said so
@click.argument("commit_range", metavar="[GOOD..BAD]", required=False)
@click.argument("bench", metavar="[BENCH]", required=False)
@case_option("The case (parameter) to follow, e.g. decode_bs8 (with GOOD..BAD BENCH).")
@config_option()
@machine_option(
    "Only this machine's findings; by hand, the machine whose history is the prior "
    "[default: the project's machine (`fwdasv init` records it; another box is refused), "
    "else the only one with results]."
)
@click.option(
    "--max-processes",
    type=click.IntRange(min=1),
    default=MAX_PROCESSES,
    show_default=True,
    help="Bench processes per commit at most (the ends and each probe; looked at 1 or 3, "
    "then 3 more at a time while undecided).",
)
@click.option(
    "--again",
    is_flag=True,
    help="Measure afresh, not going on with the processes an earlier bisect of the range kept "
    "(.fwdasv-bisect/); without GOOD..BAD, also bisect ranges that have a culprit recorded.",
)
@show_bench_option
@path_option(
    "--json",
    "json_path",
    help="Also write the results (every probe) as JSON to this file.",
)
def bisect_command(
    commit_range: str | None,
    bench: str | None,
    case: str | None,
    config: Path,
    machine: str | None,
    max_processes: int,
    again: bool,
    show_bench: bool,
    json_path: Path | None,
) -> None:
    """Find the first commit of a step: every finding's range, or GOOD..BAD for BENCH.

    With no arguments, every `regression` or `confirmed` finding whose range spans
    more than one commit (after `asv run --steps N`, the commits between two
    measured ones) is bisected, one search for all the series that stepped in the
    same range, and the culprit is recorded with the finding (the verdicts file):
    `fwdasv regressions` shows it (a column; "culprit" in its JSON).

    GOOD and BAD are measured first, interleaved, and judged by confirm's rule on
    process medians, with the series' noise from its stored history as the floor
    (the run's own spread without one); then each probe is measured (one process
    for a step beyond what one odd process can fake, else three; more, with GOOD
    and BAD beside it, while undecided) and placed against both ends, its floor
    half the step. Each bench process measures every case that stepped. A commit
    a compiled vLLM base cannot serve is skipped unmeasured. It names the first
    bad commit, or says "not reproducible" (the ends do not differ by the step)
    or "undecided" (with the reason), never a commit the processes did not place.
    Each range's processes are kept in .fwdasv-bisect/ beside asv.conf.json: a
    bisect cut short (a time limit) goes on where it stopped (--again: afresh).
    Exits 0 when every commit asked for is named (or nothing is to bisect), 1 when
    one is not named, 2 on bad input (a range whose ends are untestable, an
    existing environment).
    """
    extra = click.get_current_context().args
    if extra:
        if commit_range is not None and ".." not in commit_range and bench is not None:
            raise CliError(
                f"GOOD..BAD is one argument, not two commits: write {commit_range}..{bench} "
                f"{extra[0]}",
                EXIT_USAGE,
            )
        raise CliError(
            f"unexpected argument {extra[0]!r}: bisect takes [GOOD..BAD BENCH]", EXIT_USAGE
        )
    if commit_range is not None:
        good, sep, bad = commit_range.partition("..")
        if not sep or not good or not bad or bad.startswith("."):
            raise CliError(f"{commit_range!r}: write the range as GOOD..BAD", EXIT_USAGE)
        if bench is None:
            raise CliError("GOOD..BAD needs BENCH (e.g. forward.MyModel.track_latency)", EXIT_USAGE)
    elif case is not None:
        raise CliError("--case goes with GOOD..BAD BENCH", EXIT_USAGE)
    if json_path is not None:
        # Before anything is measured: a path that cannot be written costs no measurement.
        check_output_path(json_path, what="--json")
    project = AsvProject.load(config)
    if json_path is not None:
        project.check_output(json_path, what="--json")  # not over the verdicts file
    machine = project_machine(project, machine)
    bench_echo = progress if show_bench else None
    if commit_range is not None and bench is not None:
        from fwdasv.analysis.bisect.driver import bisect

        result = bisect(
            project,
            good,
            bad,
            bench,
            machine or project.only_machine(),
            case,
            max_processes=max_processes,
            echo=progress,
            bench_echo=bench_echo,
            fresh=again,
        )
        click.echo(result.summary())
        document: object = result.to_json()
        named = result.found
    else:
        from fwdasv.analysis import triage

        _, done = triage.bisect(
            project,
            triage.read(project, machine=machine),
            again=again,
            echo=progress,
            bench_echo=bench_echo,
            max_processes=max_processes,
        )
        results = [r for d in done for r in d.results]
        for result in results:
            click.echo(result.summary())
        for d in done:
            if d.error:
                click.echo(f"cannot bisect {d.group.good[:8]}..{d.group.bad[:8]}: {d.error}")
        if not done:
            click.echo("nothing to bisect")
        document = [r.to_json() for r in results]
        named = all(r.found for r in results) and not any(d.error for d in done)
    if json_path is not None:
        write_atomic(
            json_path, json.dumps(document, indent=2) + "\n", make_parents=False, what="--json"
        )
    finding(not named)
