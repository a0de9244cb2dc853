"""`fwdasv explain GOOD BAD BENCH`: what got slower between two commits, told apart from
timing noise (`fwdasv.analysis.explain.explain`); `--files` diffs two kernels.json files."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.commands.common import (
    analysis_command,
    case_option,
    measuring_machine_option,
    progress,
    refuse_bad_pair,
    show_bench_option,
)
from fwdasv.analysis.explain.explain import diff_files, explain_commits
from fwdasv.analysis.explain.kernel_diff import DEFAULT_ROUNDS
from fwdasv.analysis.explain.kernel_diff_format import FORMATS, format_diff
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import project_machine
from fwdasv.core.clitools import CliError, config_option, finding, format_option, path_option
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.core.files import check_output_dir


@analysis_command("explain")
@click.argument("good", metavar="GOOD")
@click.argument("bad", metavar="BAD")
@click.argument("bench", metavar="BENCH", required=False)
@case_option("The case (parameter) to profile, e.g. decode_bs8.")
@config_option()
@measuring_machine_option
@format_option(FORMATS, "table: for a terminal; json: for scripts; markdown: for a PR comment.")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Rows to show in table and markdown (json, the contract, lists every row).",
)
@path_option(
    "--profile-dir",
    kind="dir",
    help="Where the profiles go: a directory, made when missing (its parent must exist) "
    "[default: .fwdasv-explain/<GOOD>-<BAD>-<suite>-<case> beside the results directory].",
)
@click.option(
    "--files",
    is_flag=True,
    help="GOOD and BAD are two kernels.json files (fwdasv's or vLLM's --profile-dir) to diff; "
    "nothing is measured.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1, max=20),
    default=DEFAULT_ROUNDS,
    show_default=True,
    help="Profiled bench processes per commit, interleaved GOOD BAD GOOD BAD ...; their spread "
    "is each row's noise band (1: no band, a change of time only is never judged).",
)
@show_bench_option
def explain_command(
    good: str,
    bad: str,
    bench: str | None,
    case: str | None,
    config: Path,
    machine: str | None,
    fmt: str,
    top: int,
    profile_dir: Path | None,
    files: bool,
    rounds: int,
    show_bench: bool,
) -> None:
    """Say what got slower between GOOD and BAD, told apart from timing noise.

    Profiles BENCH's --case at both commits, --rounds bench processes each,
    interleaved, on this machine, each in asv's environment for that commit
    (profiled runs of their own: tracked latencies never come from them), then
    diffs the kernel (GPU) or op (CPU) summaries. Each row: its change per
    forward with its noise band (the spread of the processes), what changed
    (new, vanished, calls or shapes: the code runs something else; slower or
    faster: time only, beyond the noise; else within noise), its share of the
    slowdown (speed-up), and the source line of the code under test that calls
    it, marked "changed here" where the commit changed that file; on a GPU,
    kernels sit under the aten op that launched them (a vLLM suite: one eager
    forward more in each bench process names them). The headline (with the
    largest structural change's op and line) and the exit status follow only
    what stands out; the time each part took is printed. With --files, GOOD and
    BAD are two kernels.json files (one profile a side: no noise band). Exits 1
    when a slowdown stands out, 0 when not, 2 on bad input.
    """

    if files:
        if bench is not None:
            raise CliError("--files takes two kernels.json files and no BENCH", EXIT_USAGE)
        diff = diff_files(good, bad)
        label_good, label_bad = Path(good).name, Path(bad).name
    else:
        if bench is None:
            raise CliError(
                "give BENCH (e.g. forward.TinyLM.track_latency), or --files A B", EXIT_USAGE
            )
        project = AsvProject.load(config)
        project_machine(project, machine)  # this box must be the project's machine, or named
        refuse_bad_pair(project, good, bad, "GOOD and BAD", "explain")
        if profile_dir is not None:  # before anything is installed or profiled
            project.check_output(profile_dir, what="--profile-dir")
            check_output_dir(profile_dir, what="--profile-dir")
        done = explain_commits(
            project,
            good,
            bad,
            bench,
            case,
            profile_dir,
            echo=progress,
            bench_echo=progress if show_bench else None,
            rounds=rounds,
        )
        diff = done.diff
        label_good, label_bad = done.good[:8], done.bad[:8]
        progress(f"profiles in {done.profile_dir}")
        if done.timings is not None:
            progress(done.timings.line())
    click.echo(format_diff(diff, fmt, top=top, good=label_good, bad=label_bad))
    finding(COMPARISON.exit_status([diff.verdict]) != 0)
