"""`fwdasv export`: asv's results as flat records, CSV, JSON lines or Markdown
(`fwdasv.analysis.export`), to stdout or a file written atomically."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.commands.common import analysis_command
from fwdasv.analysis.export import FORMATS, PROGRESS_MIN_FILES, export
from fwdasv.asv.commit_filter import parse_commit_filter
from fwdasv.asv.history import History
from fwdasv.asv.project import AsvError, AsvProject, results_owned
from fwdasv.core.clitools import (
    CliError,
    PathOption,
    bench_option,
    config_option,
    format_option,
    path_option,
)
from fwdasv.core.errors import EXIT_UNREADABLE
from fwdasv.core.files import Owned, check_output_path, check_outside


@analysis_command("export")
@click.argument("results_dir", required=False, type=PathOption(file_okay=False, path_type=Path))
@config_option("The asv configuration whose results_dir is exported (when no RESULTS_DIR).")
@format_option(
    FORMATS,
    "csv: one row per record; jsonl: one JSON object per line; markdown: a table to read.",
)
@click.option(
    "--output",
    "-o",
    type=PathOption(allow_dash=True),  # a directory: check_output_path's own words
    metavar="FILE",
    default="-",
    show_default=True,
    help="File to write (atomically: temp file + rename), or - for stdout.",
)
@click.option(
    "--machine",
    "-m",
    "machines",
    multiple=True,
    help="Only this machine (exact name, as in results/<machine>/); repeat for several.",
)
@bench_option
@click.option(
    "--commits",
    "-c",
    multiple=True,
    help="Hash prefixes (comma-separated) or a git range A..B (resolved with "
    "`git rev-list` in --repo); repeat to add more.",
)
@path_option(
    "--repo",
    kind="dir",
    help="The benchmarked project's git clone, to resolve --commits A..B. "
    "[default: --config's repository]",
)
@click.option(
    "--samples/--no-samples",
    default=False,
    show_default=True,
    help="Add a 'samples' column: the raw samples asv stored (--record-samples).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"Progress bar on stderr [default: when writing a file from a terminal, "
    f"{PROGRESS_MIN_FILES}+ result files].",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 2 when a result file could not be read (the others are still written).",
)
def export_command(
    results_dir: Path | None,
    config: Path,
    fmt: str,
    output: str,
    machines: tuple[str, ...],
    bench: tuple[str, ...],
    commits: tuple[str, ...],
    repo: Path | None,
    samples: bool,
    progress: bool | None,
    strict: bool,
) -> None:
    """Export asv results as flat records: RESULTS_DIR, else --config's results_dir.

    One record per commit, machine, environment, benchmark and case: median,
    99% CI, quartiles, sample count, the suite's spread and graph-vs-eager
    check, timing metadata. Results whose benchmark version differs from
    benchmarks.json are dropped, as `asv publish` drops them. An unreadable
    result file is reported on stderr and skipped (exit 2 with --strict).
    --format markdown lists the rows in the history's order (commit date).
    Exits 0 when written, 2 on bad input (a selection of no record included:
    nothing is written then).
    """
    owned: tuple[Owned, ...]
    if results_dir is None:
        try:
            project = AsvProject.load(config)
        except AsvError as error:
            raise AsvError(f"{error}, or give the results directory (RESULTS_DIR)") from None
        results_dir = project.results_dir
        owned = project.owned()
        if repo is None and commits:
            repo = project.local_repo
    else:
        owned = (results_owned(results_dir),)
    if output != "-":
        # Not over what is read: a CSV over benchmarks.json or a result file breaks asv.
        check_outside(output, owned, what="--output")
        check_output_path(output, what="--output")
    commit_filter = parse_commit_filter(commits, repo) if commits else None
    history = History(
        results_dir, machines=machines, bench=bench, commits=commit_filter, samples=samples
    )
    asked = [*(f"--machine {m}" for m in machines), *(f"--bench {b}" for b in bench)]
    asked += [f"--commits {c}" for c in commits]
    report = export(history, fmt, output, progress, selection=" ".join(asked))
    for line in report.lines():
        click.echo(line, err=True)
    if strict and report.problems:
        count = len(report.problems)
        raise CliError(
            f"{count} result file{'s' if count != 1 else ''} could not be read (--strict); "
            "the others were exported",
            EXIT_UNREADABLE,
        )
