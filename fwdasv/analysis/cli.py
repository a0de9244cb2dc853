"""The analysis commands: `fwdasv regressions`, `compare`, `bisect`, `export`, `publish`.

Exit statuses are part of the interface (CI gates on them; which statuses fail is
`fwdasv.analysis.gate`):

    regressions  0 none above threshold, 1 some above threshold, 2 cannot read / bad input,
                 or a result file unreadable (without --skip-unreadable)
    confirm      as regressions, after the re-measure
    publish      0 published, 2 bad input or a result file unreadable (without
                 --skip-unreadable; the site is still written)
    compare      0 nothing worse,         1 something worse (or newly failing), 2 bad input
    explain      0 nothing slower stands out, 1 a slowdown stands out of the noise, 2 bad input
    bisect       0 found (every probe decided by the samples),
                 1 found but uncertain (a probe decided by the closer median, or an
                   unmeasurable commit next to the step), 2 cannot bisect / bad input
    export       0 written, 1 a result file was unreadable under --strict, 2 bad input

A user error is one `Error: ...` line and status 2 (`AnalysisCommand`), so "a
regression was found" and "the command could not run" never look alike to CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from fwdasv.analysis import compare, confirm, explain, export, findings
from fwdasv.analysis.bisect import driver as bisect_driver
from fwdasv.analysis.bisect import rules as bisect_rules
from fwdasv.analysis.gate import COMPARISON, FINDINGS, Gate, findings_gate
from fwdasv.analysis.judgment import DEFAULT_ALPHA
from fwdasv.asv.history import History, parse_commit_filter
from fwdasv.asv.project import AsvError, AsvProject, site_hint
from fwdasv.core.clitools import (
    CONTEXT,
    AnalysisCommand,
    CliError,
    alpha_option,
    bench_option,
    config_option,
    end,
    factor_option,
    finding,
    format_option,
    machine_option,
    skip_unreadable_option,
    warn_unreadable,
)
from fwdasv.core.errors import EXIT_FINDING, EXIT_USAGE
from fwdasv.core.files import check_output_path, write_atomic
from fwdasv.core.verdicts import MIN_EFFECT_PCT, PROBE_FLOOR_PCT, VerdictSettings


@click.command("regressions", cls=AnalysisCommand, context_settings=CONTEXT)
@config_option()
@format_option(
    findings.FORMATS,
    "table: for a terminal; json: for scripts; markdown: for a pull-request comment.",
)
@machine_option("Only this machine's results [default: every machine].")
@bench_option
@click.option(
    "--min-effect",
    "--threshold",
    "min_effect",
    type=click.FloatRange(min=0),
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
    show. A commit never measured is no problem.
    """
    project = AsvProject.load(config)
    warn_environments(project, machine)
    found = findings.scan(
        project, machine=machine, bench=bench, min_effect_pct=min_effect, improvements=improvements
    )
    if run_confirm:
        found = _confirm(project, found.findings, machine, bench, min_effect, improvements)
    _gate(found, fmt, skip_unreadable, findings_gate(fail_on_suspected))


def _gate(found: findings.Found, fmt: str, skip_unreadable: bool, gate: Gate = FINDINGS) -> None:
    """Print the findings, name the unreadable files, exit by the findings' gate."""
    unreadable = warn_unreadable(found.unreadable, skip_unreadable)
    click.echo(findings.format_findings(found.findings, fmt, found.unreadable))
    end(gate.exit_status((f.status for f in found.findings), unreadable))


def warn_environments(project: AsvProject, machine: str | None = None) -> None:
    """Warn (stderr) about results labelled with another environment than the one that ran
    (`fwdasv.asv.ranenv`): the machine entry was rewritten under them."""
    from fwdasv.asv import ranenv

    found = ranenv.disagreements(project.results_dir, [machine] if machine else None)
    for line in ranenv.warning_lines(found):
        click.echo(line, err=True)


def _confirm(project, found, machine, bench, min_effect, improvements=False, **options):
    from fwdasv.analysis.reproduce import confirm_findings

    def progress(line: str) -> None:
        click.echo(line, err=True)

    confirm_findings(project, found, echo=progress, **options)
    return findings.scan(
        project, machine=machine, bench=bench, min_effect_pct=min_effect, improvements=improvements
    )


@click.command("confirm", cls=AnalysisCommand, context_settings=CONTEXT)
@config_option()
@machine_option("Only this machine's findings [default: every machine with results].")
@bench_option
@format_option(findings.FORMATS, "How the findings are listed after the re-measure.")
@click.option(
    "--max-processes",
    type=click.IntRange(min=1),
    default=confirm.MAX_PROCESSES,
    show_default=True,
    help="Bench processes per side at most (measured 3 at a time while undecided).",
)
@click.option(
    "--explain/--no-explain",
    default=True,
    show_default=True,
    help="Profile a confirmed regression at both commits and keep the kernel diff.",
)
@click.option("--show-bench", is_flag=True, help="Echo the bench processes' output (to stderr).")
@skip_unreadable_option
def confirm_command(
    config: Path,
    machine: str | None,
    bench: tuple[str, ...],
    fmt: str,
    max_processes: int,
    explain: bool,
    show_bench: bool,
    skip_unreadable: bool,
) -> None:
    """Re-measure every regression found: A and B interleaved on this machine, then explain.

    For each finding with status `regression` or `suspected`, the commit before its step (A)
    and the one after (B) are installed in turn into asv's environment and
    measured one bench process at a time, A B A B ..., at least 3 processes a
    side (more while undecided). The verdict is on the process-level medians,
    so the variance between processes counts: `confirmed` or `not-reproduced`,
    appended to <results_dir>/fwdasv-verdicts.jsonl. A confirmed regression is
    explained (a kernel or op diff of A and B). Exits 1 when a regression or a
    confirmed one remains, 0 otherwise, 2 on bad input or an unreadable result
    file (named on stderr; --skip-unreadable to pass anyway).
    """

    def progress(line: str) -> None:
        click.echo(line, err=True)

    from fwdasv.analysis.reproduce import confirm_findings

    project = AsvProject.load(config)
    found = findings.find(project, machine=machine, bench=bench)
    confirm_findings(
        project,
        found,
        max_processes=max_processes,
        run_explain=explain,
        echo=progress,
        bench_echo=progress if show_bench else None,
    )
    _gate(findings.scan(project, machine=machine, bench=bench), fmt, skip_unreadable)


@click.command("compare", cls=AnalysisCommand, context_settings=CONTEXT)
@click.argument("a")
@click.argument("b")
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
    type=click.Choice(compare.METHODS),
    default=compare.NOISE,
    show_default=True,
    help="noise: each series' run-to-run noise from its history; mann-whitney: asv's rule "
    "(the stored samples of the two commits only).",
)
@bench_option
@format_option(compare.FORMATS, "table, json or markdown.")
@click.option(
    "--only-changed",
    is_flag=True,
    help="Hide unchanged, not-significant, unknown and telemetry results.",
)
def compare_command(
    a: str,
    b: str,
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

    A and B are hashes (or prefixes), branches or tags of the asv repository.
    A change is significant when it exceeds what the series' own run-to-run
    noise (estimated from its stored history) explains, at --alpha, and counts
    beyond --factor, a floor. --method mann-whitney is asv's rule instead.
    Not-significant: the noise cannot tell the change from none, whatever its
    ratio (the note says why). Unknown: too few samples and no finite CI, or
    measured at one commit only. Only latency (unit seconds, and a paced suite's
    track_relative, unit ratio) counts: telemetry
    (clocks, power, spread, graph-vs-eager, clock uncertainty) is shown as
    `telemetry`, never worse or better. Exits 1 when a latency got worse (asv
    compare always exits 0, asv#884).
    """
    project = AsvProject.load(config)
    warn_environments(project, machine)
    if factor is None:
        factor = compare.default_factor(project)
    found = compare.compare_commits(
        project, a, b, machine, factor=factor, alpha=alpha, bench=bench, method=method
    )
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
    finding(COMPARISON.exit_status(c.verdict for c in found) != 0)


@click.command("bisect", cls=AnalysisCommand, context_settings=CONTEXT)
@click.argument("commit_range", metavar="GOOD..BAD")
@click.argument("bench", metavar="BENCH")
@click.option(
    "--case", metavar="NAME", default=None, help="The case (parameter) to follow, e.g. decode_bs8."
)
@config_option()
@machine_option()
@factor_option(
    "A probe's step counts only beyond this ratio of medians [default: "
    f"{bisect_rules.DEFAULT_PROBE_FACTOR:g} ({PROBE_FLOOR_PCT:g}%: above the run-to-run offsets one "
    "run's samples do not see), or 1 + asv.conf.json's fwdasv.min_effect_pct / 100 when larger]."
)
@alpha_option(DEFAULT_ALPHA, "Significance level of the Mann-Whitney test.")
@click.option(
    "--max-remeasure",
    type=click.IntRange(min=0),
    default=bisect_rules.DEFAULT_MAX_REMEASURE,
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

    def progress(line: str) -> None:
        click.echo(line, err=True)

    project = AsvProject.load(config)
    result = bisect_driver.bisect(
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


@click.command("export", cls=AnalysisCommand, context_settings=CONTEXT)
@click.argument("results_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@config_option("The asv configuration whose results_dir is exported (when no RESULTS_DIR).")
@format_option(
    export.FORMATS,
    "csv: one row per record; jsonl: one JSON object per line; markdown: a table to read.",
)
@click.option(
    "--output",
    "-o",
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
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
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
    f"{export.PROGRESS_MIN_FILES}+ result files].",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when a result file could not be read (the others are still written).",
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
    result file is reported on stderr and skipped (exit 1 with --strict).
    --format markdown lists the rows in the history's order (commit date).
    Exits 0 when written, 2 on bad input.
    """
    if results_dir is None:
        try:
            project = AsvProject.load(config)
        except AsvError as error:
            raise AsvError(f"{error}, or give the results directory (RESULTS_DIR)") from None
        results_dir = project.results_dir
        if repo is None and commits:
            repo = project.local_repo
    if output != "-":
        check_output_path(output, what="--output")
    commit_filter = parse_commit_filter(commits, repo) if commits else None
    history = History(
        results_dir, machines=machines, bench=bench, commits=commit_filter, samples=samples
    )
    report = export.export(history, fmt, output, progress)
    for line in report.lines():
        click.echo(line, err=True)
    if strict and report.problems:
        count = len(report.problems)
        raise CliError(
            f"{count} result file{'s' if count != 1 else ''} could not be read (--strict); "
            "the others were exported",
            EXIT_FINDING,
        )


@click.command("publish", cls=AnalysisCommand, context_settings=CONTEXT)
@config_option("asv configuration.")
@skip_unreadable_option
def publish_command(config: Path, skip_unreadable: bool) -> None:
    """`asv publish`, with fwdasv's findings in the site, working without the internet.

    asv's Regressions page and Atom feed list fwdasv's findings (each series
    judged by its own noise) with their status; a Findings page, linked from
    the navigation bar, adds the noise, the confirmation and the kernel diff.
    asv's page loads its JavaScript libraries from CDNs; fwdasv points it at
    the copies it ships, so the site opens on a closed network too. Series no
    timer measured (graph vs eager under the host timer) are left out. Prints
    where the site is and how to open it. A result file that cannot be read is
    named on stderr and fails the command (2; the site is still written) unless
    --skip-unreadable.
    """
    from fwdasv.analysis.publish import publish

    project = AsvProject.load(config)
    found = publish(project, echo=click.echo)
    unreadable = warn_unreadable(found.unreadable, skip_unreadable)
    if found.findings:
        click.echo(findings.summary_line(found.findings))
    else:
        where = "readable" if found.unreadable else "stored"
        click.echo(f"no regressions in the {where} results")
    if found.unreadable:
        click.echo(findings.unreadable_line(found.unreadable))
    for line in site_hint(project):
        click.echo(line)
    end(FINDINGS.exit_status((), unreadable))


@click.command("explain", cls=AnalysisCommand, context_settings=CONTEXT)
@click.argument("good", metavar="GOOD")
@click.argument("bad", metavar="BAD")
@click.argument("bench", metavar="BENCH", required=False)
@click.option(
    "--case", metavar="NAME", default=None, help="The case (parameter) to profile, e.g. decode_bs8."
)
@config_option()
@format_option(
    explain.FORMATS, "table: for a terminal; json: for scripts; markdown: for a PR comment."
)
@click.option(
    "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to show."
)
@click.option(
    "--profile-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the profiles go [default: .fwdasv-explain/<GOOD>-<BAD>-<suite>-<case> beside "
    "the results directory].",
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
    default=explain.DEFAULT_ROUNDS,
    show_default=True,
    help="Profiled bench processes per commit, interleaved GOOD BAD GOOD BAD ...; their spread "
    "is each row's noise band (1: no band, a change of time only is never judged).",
)
@click.option("--show-bench", is_flag=True, help="Echo the bench processes' output (to stderr).")
def explain_command(
    good: str,
    bad: str,
    bench: str | None,
    case: str | None,
    config: Path,
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
    slowdown (speed-up), and the source line in your repository that calls it;
    on a GPU, kernels sit under the aten op that launched them. The headline
    and the exit status follow only what stands out. With --files, GOOD and
    BAD are two kernels.json files (one profile a side: no noise band). Exits 1
    when a slowdown stands out, 0 when not, 2 on bad input.
    """

    def progress(line: str) -> None:
        click.echo(line, err=True)

    if files:
        if bench is not None:
            raise CliError("--files takes two kernels.json files and no BENCH", EXIT_USAGE)
        diff = explain.diff_files(good, bad)
        label_good, label_bad = Path(good).name, Path(bad).name
    else:
        if bench is None:
            raise CliError(
                "give BENCH (e.g. forward.TinyLM.track_latency), or --files A B", EXIT_USAGE
            )
        project = AsvProject.load(config)
        done = explain.explain_commits(
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
    click.echo(explain.format_diff(diff, fmt, top=top, good=label_good, bad=label_bad))
    finding(COMPARISON.exit_status([diff.verdict]) != 0)


COMMANDS = (
    regressions_command,
    confirm_command,
    compare_command,
    bisect_command,
    export_command,
    publish_command,
    explain_command,
)
