"""Findings: the steps in asv's stored results, each series judged by its own noise.

`judge_series` is the decision, pure (series in, findings out, as asv's
`step_detect` keeps its math apart from files): each latency series (a paced case's
`track_relative` in its place) gets its noise from its own history
(`fwdasv.analysis.rules.noise`), its steps from `fwdasv.analysis.rules.detect`, and status
`drift` where its machine's canary, its GPU clock or its recorded environment moved
with a step (`fwdasv.analysis.rules.drift`). `find` (and `scan`, which also returns the
result files it could not read) is the I/O edge around it: the results
(`fwdasv.analysis.findings.series`), the verdicts file (`fwdasv.analysis.findings.verdicts`),
the graph parameters and each range's commits from git. What each status means:
docs/verdicts.md, "Statuses".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict

from fwdasv.analysis.findings.dark import DarkSuite, dark_suites
from fwdasv.analysis.findings.finding import (
    Commit,
    Finding,
)
from fwdasv.analysis.findings.format import (
    format_findings as format_findings,
)
from fwdasv.analysis.findings.format import (
    summary_line as summary_line,
)
from fwdasv.analysis.findings.format import (
    unreadable_line as unreadable_line,
)
from fwdasv.analysis.findings.graph_paths import graph_params
from fwdasv.analysis.findings.series import (
    CANARY_PREFIX,
    CLOCK_METRIC,
    LATENCY_METRIC,
    LATENCY_UNIT,
    RELATIVE_METRIC,
    RELATIVE_UNIT,
    FindingsError,
    Series,
    SeriesKey,
    read_series,
)
from fwdasv.analysis.findings.untouched import hold_back_untouched
from fwdasv.analysis.findings.verdict_file import (
    VERDICTS_FILE as VERDICTS_FILE,
)
from fwdasv.analysis.findings.verdict_file import read_verdicts
from fwdasv.analysis.findings.verdicts import apply_verdict, verdicts_path
from fwdasv.analysis.findings.verdicts import (
    record_verdict as record_verdict,
)
from fwdasv.analysis.remeasure import process_sizes
from fwdasv.analysis.rules.commit_processes import quiet_history
from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.drift import mark_drift, mark_environment_drift
from fwdasv.analysis.rules.noise import Noise, commit_medians, estimate_noise
from fwdasv.asv.history import Problem
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.clitools import bench_regexes, refuse_unmatched_bench
from fwdasv.core.verdicts import MIN_EFFECT_PCT

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _latency(series: Series) -> bool:
    return series.unit == LATENCY_UNIT


def _relative(series: Series) -> bool:
    return series.unit == RELATIVE_UNIT and series.key.metric == RELATIVE_METRIC


def judged_series(all_series: Mapping[SeriesKey, Series]) -> list[SeriesKey]:
    """The series whose steps are findings: every latency series (unit seconds) but the
    canaries', and each paced case's `track_relative` in place of its `track_latency`."""
    paced = {
        (key.machine, key.env_name, key.suite, key.case)
        for key, series in all_series.items()
        if _relative(series)
    }
    out = []
    for key, series in all_series.items():
        if key.suite_class.startswith(CANARY_PREFIX):
            continue
        if _relative(series):
            out.append(key)
        elif _latency(series):
            replaced = key.metric == LATENCY_METRIC and (
                (key.machine, key.env_name, key.suite, key.case) in paced
            )
            if not replaced:
                out.append(key)
    return sorted(out, key=_sort_key)


def _sort_key(key: SeriesKey) -> tuple[str, str | None, str, str]:
    return (key.machine, key.env_name, key.benchmark, key.case)


def _drift_series(
    key: SeriesKey, all_series: Mapping[SeriesKey, Series]
) -> list[tuple[list[float | None], Noise]]:
    """What can show the machine changed under `key`: its canaries' latencies, and its own
    case's SM clock inverted (a clock down by x% reads as a latency up by x%).

    A paced series (`track_relative`) has the machine's speed divided out: a canary's
    latency stepping with the load says nothing of it (a regression landing as a
    neighbour starts would be hidden as drift). Its comparator is the canary's own
    `track_relative` (a paced project's canary is paced too): that moves only where the
    load slows the forward and the workload unequally, which the ratio does not cancel.
    """
    relative = key.metric == RELATIVE_METRIC
    out = []
    for other, series in all_series.items():
        if other.machine != key.machine or other.env_name != key.env_name:
            continue
        canary = other.suite_class.startswith(CANARY_PREFIX)
        if canary and (_relative(series) if relative else _latency(series)):
            out.append((series.medians(), estimate_noise(series.history)))
        elif (other.suite, other.case) == (key.suite, key.case) and other.benchmark.endswith(
            "." + CLOCK_METRIC
        ):
            inverted = [[1 / v for v in commit if v > 0] for commit in series.history]
            out.append((commit_medians(inverted), estimate_noise(inverted)))
    return out


def judge_series(
    order: Sequence[str],
    all_series: Mapping[SeriesKey, Series],
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    include: Callable[[SeriesKey], bool] | None = None,
    improvements: bool = False,
    process_sizes: Mapping[str, int] | None = None,
) -> list[Finding]:
    """The findings of a set of series, before any stored verdict: pure, no files, no git.

    Parameters
    ----------
    order
        The commits (hashes), oldest first; every series' history is in this order.
    all_series
        Every series of the results: the latency series (unit seconds) are judged,
        and a paced case's `track_relative` in place of its latency (`judged_series`);
        a canary (`Canary*` suite) and the GPU clock only tell drift.
    min_effect_pct
        The smallest step reported, in percent (`fwdasv.analysis.rules.detect.detect`).
    include
        Which latency series to judge (all when None).
    improvements
        Whether downward steps are findings too (status `improvement`).
    process_sizes
        Samples per bench process, by benchmark: a commit with several processes is
        judged by its quietest (`fwdasv.analysis.rules.commit_processes`).

    Returns
    -------
    One `Finding` per upward step (`detect` on the series' own noise,
    `estimate_noise`; at the history's edges `suspected` or `regression` by how
    many commits show it, see `fwdasv.analysis.rules.edges`), status `drift` where the
    canary or the clock stepped with it (`mark_drift`) or the recorded environment
    changed (`mark_environment_drift`), sorted by machine, environment, benchmark and
    case, then oldest step first; commits, graph parameters and verdicts not yet
    attached (`find` does).
    """
    out: list[Finding] = []
    for key in judged_series(all_series):
        series = all_series[key]
        if include is not None and not include(key):
            continue
        quiet = quiet_history(series.history, (process_sizes or {}).get(key.benchmark), order)
        noise = estimate_noise(quiet.history)
        medians = commit_medians(quiet.history)
        steps = detect(
            medians,
            noise,
            min_effect_pct=min_effect_pct,
            improvements=improvements,
            samples=quiet.history,
        )
        for canary_medians, canary_noise in _drift_series(key, all_series):
            steps = mark_drift(steps, canary_medians, canary_noise)
        steps = mark_environment_drift(steps, series.environments)
        latest = next((m for m in reversed(medians) if m is not None), None)
        out.extend(
            Finding(
                key=key,
                unit=series.unit,
                params=series.params,
                step=step,
                noise=noise,
                before_commit=order[step.before_index],
                after_commit=order[step.after_index],
                latest=latest,
                status=step.status,
                min_effect_pct=min_effect_pct,
                processes=quiet.summary(),
            )
            for step in steps
        )
    return out


@dataclass(frozen=True)
class Found:
    """The findings of one read of the results, and the files it could not read.

    An unreadable file is a commit's results missing from every series it holds,
    so a step there can go unseen: the commands that gate name and count them
    (`fwdasv.analysis.rules.gate.Gate.exit_status`). A commit never measured has no file
    and is not one of them.
    """

    findings: tuple[Finding, ...]
    unreadable: tuple[Problem, ...] = ()
    # What the read could not do, for the commands to show (the repository gone: the
    # commits' subjects unknown).
    warnings: tuple[str, ...] = ()
    # The read itself, for the steps after it (confirm, bisect): the commit order, every
    # series, and the findings before any stored verdict (`with_verdicts`).
    order: tuple[str, ...] = ()
    series: Mapping[SeriesKey, Series] = field(default_factory=dict)
    judged: tuple[Finding, ...] = ()
    # The judged suites with no value in any case at their newest commit: a step there is
    # invisible, so the commands that gate count them as they count unreadable files.
    dark: tuple[DarkSuite, ...] = ()

    def with_verdicts(self, project: AsvProject) -> Found:
        """The same read with the verdicts file's newest lines applied: what a re-measure or
        a bisect recorded since, without reading the results again."""
        verdicts = read_verdicts(verdicts_path(project))
        return replace(self, findings=tuple(apply_verdict(f, verdicts) for f in self.judged))

    def steps(self) -> list[tuple[str, str, list[str]]]:
        """Each finding as `fwdasv.analysis.rules.gate.inside_steps` reads it: a label, its
        machine and its range's commits."""
        return [
            (
                f"{f.key.name} {f.range_label} ({f.status})",
                f.key.machine,
                [c.hash for c in f.commits],
            )
            for f in self.findings
        ]


class ScanOptions(TypedDict, total=False):
    """`scan`'s keywords, which `find` passes on."""

    machine: str | None
    bench: Sequence[str]
    min_effect_pct: float | None
    subjects: bool
    improvements: bool


def find(project: AsvProject, **options: Unpack[ScanOptions]) -> list[Finding]:
    """The findings of `project`'s results (every machine, or `machine`), newest status applied.

    The I/O edge of `judge_series`: reads the results, the verdicts file and the
    graph parameters asv publishes under, and (`subjects`) each range's commits
    from git. `min_effect_pct` None: the configuration's (`VerdictSettings`).
    `improvements`: downward steps too (status `improvement`).
    Unreadable files are dropped here; `scan` returns them too.
    """
    return list(scan(project, **options).findings)


def scan(
    project: AsvProject,
    *,
    machine: str | None = None,
    bench: Sequence[str] = (),
    min_effect_pct: float | None = None,
    subjects: bool = True,
    improvements: bool = False,
) -> Found:
    """`find`, with the result files that could not be read. `bench` regexes that keep no
    judged series are a FindingsError (`refuse_unmatched_bench`), never "no findings"."""
    patterns = bench_regexes(bench, FindingsError)
    if min_effect_pct is None:
        min_effect_pct = project.verdict_settings().min_effect_pct
    if min_effect_pct < 0:
        raise FindingsError(f"--min-effect {min_effect_pct}: must be >= 0 (percent)")
    order, all_series, unreadable = read_series(project, machine)

    def selected(key: SeriesKey) -> bool:
        return not patterns or any(p.search(key.benchmark) or p.search(key.name) for p in patterns)

    # A regex of nothing would list no finding and pass the gate: a typo in a CI filter.
    warnings = refuse_unmatched_bench(
        patterns,
        (n for k in judged_series(all_series) for n in (k.benchmark, k.name)),
        f"judged in {project.results_dir}" + (f" on machine {machine}" if machine else ""),
        FindingsError,
    )

    judged = judge_series(
        order,
        all_series,
        min_effect_pct=min_effect_pct,
        include=selected,
        improvements=improvements,
        process_sizes=_process_sizes(project, all_series),
    )
    # A host-timed regression whose commits change nothing its bench imported waits for
    # confirm (`suspected`), before a stored verdict applies.
    judged = hold_back_untouched(project, judged)
    graphs: dict[tuple[str, str | None], dict[str, object]] = {}
    out = []
    for finding in judged:
        where = (finding.key.machine, finding.key.env_name)
        if where not in graphs:
            graphs[where] = graph_params(project, *where)
        out.append(replace(finding, graph_params=graphs[where]))
    if subjects:
        out = attach_commits(out, project, warnings.append)
    dark = dark_suites(order, all_series, filter(selected, judged_series(all_series)))
    read = Found((), unreadable, tuple(warnings), tuple(order), all_series, tuple(out), dark)
    return read.with_verdicts(project)


def _process_sizes(project: AsvProject, all_series: Mapping[SeriesKey, Series]) -> dict[str, int]:
    """Samples per bench process of the fwdasv suites whose series hold a commit of
    several processes (`asv run --append-samples`, or re-measures kept beside)."""
    sizes = process_sizes(project, {k.benchmark for k in all_series})
    return {
        name: size
        for name, size in sizes.items()
        if any(
            len(commit) >= 2 * size
            for k, series in all_series.items()
            if k.benchmark == name
            for commit in series.history
        )
    }


def attach_commits(
    findings: Sequence[Finding],
    project: AsvProject,
    warn: Callable[[str], None] = lambda line: None,
) -> list[Finding]:
    """Each range's commits (first-parent, after the old level's commit) with their subjects;
    where git cannot list them (the repository moved away), the first commit at the new
    level without a subject, and one line to `warn`."""
    cache: dict[tuple[str, str], tuple[Commit, ...]] = {}
    failed: list[str] = []
    out = []
    for finding in findings:
        span = (finding.before_commit, finding.after_commit)
        if span not in cache:
            try:
                listed = project.git(
                    "log",
                    "--first-parent",
                    "--reverse",
                    "--format=%H%x00%s",
                    f"{span[0]}..{span[1]}",
                )
                commits = [Commit(*line.split("\x00", 1)) for line in listed.splitlines()]
            except AsvError as error:
                failed.append(str(error))
                commits = [Commit(span[1])]
            cache[span] = tuple(commits) or (Commit(span[1]),)
        out.append(replace(finding, commits=cache[span]))
    if failed:
        warn(
            f"commit subjects not shown: {failed[0]} (the repository in {project.config_path}'s "
            '"repo"; move it back or edit "repo")'
        )
    return out
