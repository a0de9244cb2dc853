"""Findings: the regressions in asv's stored results, each series judged by its own noise.

The results directory is read directly (`fwdasv.asv.history`), no publish
needed. A *series* is one latency benchmark (unit seconds) and case on one
machine and environment (a paced suite's `track_relative`, the forward's time
over fwdasv's fixed workload, in place of its case's latency: `judged_series`);
its commits are put in the branch's first-parent order (commit date when the
repository is not on disk). For each series `fwdasv.analysis.noise`
estimates the run-to-run noise from its own history and
`fwdasv.analysis.detect` finds the upward steps that noise cannot explain.
A finding's status:

    regression       detected, not (yet) re-measured
    suspected        at the history's edge (its newest 1-3 commits, or after 2-3 at a
                     series' start), shown by too few commits to exclude outliers;
                     or a large step of two settled levels that the history's noise
                     is too uncertain to decide (a busy box); re-measured at once by
                     `nightly` and `regressions --confirm`
    improvement      a downward step (faster), listed with `--improvements`; never gates
    confirmed        an A/B re-measure on one machine reproduced it (`fwdasv confirm`)
    not-reproduced   the re-measure ruled it out
    drift            the machine changed, not the code: the environment canary
                     (a suite whose class name starts with `Canary`) stepped at the
                     same commit (+-1), the GPU's SM clock fell there, or the
                     machine's recorded environment (torch, driver, CUDA) differs
                     between the step's two commits

Confirmations are kept in `<results_dir>/fwdasv-verdicts.jsonl`
(`fwdasv.analysis.verdict_file`: its line and its rules); the newest verdict
about a finding, or about a wider range of its series that holds it, sets its
status.

`judge_series` is the decision, pure (series values in, findings out, as asv's
`step_detect` keeps its math apart from files); `find` is the I/O edge around
it: the results, the verdicts file and git.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fwdasv.analysis import detect
from fwdasv.analysis.gate import FINDINGS
from fwdasv.analysis.noise import Noise, commit_medians, estimate_noise
from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import (
    VERDICTS_FILE,
    ConfirmationRecord,
    ExplainRecord,
    FindingIdent,
    FindingVerdict,
    StoredVerdicts,
    append_verdict,
    now_utc,
    read_verdicts,
)
from fwdasv.asv.history import History, Problem, Record
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.errors import UserError
from fwdasv.core.tables import human_value, markdown_table, text_table

LATENCY_UNIT = "seconds"
# A paced suite's series (`reference = True`, fwdasv.asv.suite): the forward's time over
# fwdasv's fixed workload timed beside it. Where a case has it, it is judged in place of
# the case's latency: the machine's own changes of speed cancel in it, and they do not in
# the latency (a busy box's latency series steps with its neighbours).
RELATIVE_METRIC = "track_relative"
RELATIVE_UNIT = "ratio"
LATENCY_METRIC = "track_latency"
CANARY_PREFIX = "Canary"
# The suite's GPU clock series (fwdasv.asv.suite): a clock that fell explains a slower step.
CLOCK_METRIC = "track_sm_clock_mhz"
FORMATS = ("table", "json", "markdown")


class FindingsError(UserError):
    """The results cannot be read, or a filter names nothing."""


@dataclass(frozen=True)
class SeriesKey:
    machine: str
    env_name: str | None  # None only where a result file names no environment
    benchmark: str  # "forward.TinyLM.track_latency"
    case: str  # the parameter label ("" for a benchmark without parameters)

    @property
    def suite(self) -> str:
        return self.benchmark.rpartition(".")[0]

    @property
    def suite_class(self) -> str:
        return self.suite.rpartition(".")[2]

    @property
    def metric(self) -> str:
        return self.benchmark.rpartition(".")[2]

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark


@dataclass
class Series:
    """One series over the commit order: each commit's samples (empty: not measured/failed)."""

    key: SeriesKey
    unit: str | None
    params: dict[str, str]
    history: list[list[float]]
    # Per commit, the machine's recorded environment (torch, driver, CUDA); None: unknown.
    environments: list[tuple[object, ...] | None] = field(default_factory=list)

    def medians(self) -> list[float | None]:
        return commit_medians(self.history)


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str | None = None


@dataclass(frozen=True)
class Finding:
    """One upward step of one series, with its status."""

    key: SeriesKey
    unit: str | None
    params: dict[str, str]
    step: detect.Step
    noise: Noise
    before_commit: str  # the last commit at the old level
    after_commit: str  # the first commit at the new level
    latest: float | None
    status: Status = Status.REGRESSION  # one of FINDING_STATUSES
    commits: tuple[Commit, ...] = ()  # the range's commits (after before_commit), oldest first
    verdict: FindingVerdict | None = None  # the stored confirmation (and explain) of this finding
    min_effect_pct: float = detect.MIN_EFFECT_PCT
    graph_params: dict[str, object] = field(default_factory=dict)  # see `graph_params`

    @property
    def percent(self) -> float:
        return self.step.percent

    @property
    def showing_commits(self) -> int:
        """How many commits show the step: its new level's (its old level's at a series' start)."""
        return (
            self.step.commits_before if self.step.edge == detect.START else self.step.commits_after
        )

    @property
    def gating(self) -> bool:
        """Whether it fails the findings' check (`fwdasv.analysis.gate.FINDINGS`)."""
        return FINDINGS.fails(self.status)

    @property
    def ident(self) -> FindingIdent:
        """What identifies a finding in the verdicts file."""
        k = self.key
        return FindingIdent(k.machine, k.env_name, k.benchmark, k.case, self.after_commit)

    @property
    def range_label(self) -> str:
        return f"{self.before_commit[:8]}..{self.after_commit[:8]}"

    def commit_range(self) -> tuple[str, str]:
        return self.before_commit, self.after_commit

    @property
    def best(self) -> float:
        """The best value since the step (asv's `best`): the old level, or the latest if lower."""
        return self.step.before if self.latest is None else min(self.step.before, self.latest)

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.key.benchmark,
            "entry": self.key.name,
            "params": dict(self.params),
            "case": self.key.case,
            "machine": self.key.machine,
            "env_name": self.key.env_name,
            "graph_params": dict(self.graph_params),
            "graph_path": graph_file_path(self.graph_params, self.key.benchmark) + ".json",
            "before_commit": self.before_commit,
            "after_commit": self.after_commit,
            "single_commit": len(self.commits) <= 1,
            "commits": [{"hash": c.hash, "subject": c.subject} for c in self.commits],
            "before": self.step.before,
            "after": self.step.after,
            "percent": self.percent,
            "latest": self.latest,
            "best": self.best,
            "unit": self.unit,
            "status": self.status,
            "noise_pct": self.noise.noise_pct,
            "noise": self.noise.to_json(),
            "z": self.step.z,
            "z_threshold": self.step.z_threshold,
            "commits_before": self.step.commits_before,
            "commits_after": self.step.commits_after,
            "edge": self.step.edge,
            "showing_commits": self.showing_commits,
            "threshold_pct": self.min_effect_pct,
            "above_threshold": self.gating,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "re_measured": self.re_measured(),
        }

    def re_measured(self) -> dict[str, str] | None:
        """The pair the confirmation measured (A, B), why those, and its outcome; None
        before a confirmation. A and B may be wider than the finding's own pair."""
        record = self.verdict.confirmation if self.verdict is not None else None
        if record is None:
            return None
        return {
            "a_commit": record.a_commit,
            "b_commit": record.b_commit,
            "pair": record.pair,
            "finding_pair": self.range_label,
            "why": record.pair_reason or "(not recorded: a line older than the reason)",
            "outcome": record.figures.label,
        }


# --- the series ------------------------------------------------------------------------


def commit_order(project: AsvProject, records: Iterable[Record]) -> list[str]:
    """The commits with results, oldest first: the branches' first-parent order when the
    repository is on disk (as `asv publish` plots them), else commit dates."""
    dated: dict[str, float] = {}
    for record in records:
        dated.setdefault(record.commit_hash, _date_key(record.commit_date))
    order: list[str] = []
    try:
        for branch in project.branches:
            for commit in project.git("rev-list", "--first-parent", "--reverse", branch).split():
                if commit in dated and commit not in order:
                    order.append(commit)
    except AsvError:
        order = []
    if not order:
        order = sorted(dated, key=lambda c: (dated[c], c))
    return order


def _date_key(value: str | None) -> float:
    if value is None:
        return math.inf
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def load_series(
    project: AsvProject, machine: str | None = None
) -> tuple[list[str], dict[SeriesKey, Series]]:
    """Every series of the results (all benchmarks: canaries and clocks judge drift)."""
    order, series, _ = read_series(project, machine)
    return order, series


def read_series(
    project: AsvProject, machine: str | None = None
) -> tuple[list[str], dict[SeriesKey, Series], tuple[Problem, ...]]:
    """`load_series`, and the files that could not be read (each one may hide a step)."""
    try:
        history = History(project.results_dir, machines=[machine] if machine else (), samples=True)
    except UserError as error:
        raise FindingsError(str(error)) from None
    records = list(history.records())
    order = commit_order(project, records)
    position = {commit: i for i, commit in enumerate(order)}
    series: dict[SeriesKey, Series] = {}
    for record in records:
        index = position.get(record.commit_hash)
        if index is None:
            continue  # not on the branch: asv publish leaves it out too
        key = SeriesKey(record.machine, record.env_name, record.benchmark, record.case)
        entry = series.get(key)
        if entry is None:
            entry = series[key] = Series(
                key, record.unit, dict(record.params), [[] for _ in order], [None] * len(order)
            )
        entry.environments[index] = environment(record)
        if record.status != "ok":
            continue
        samples = record.sample_values()
        if not samples and record.median is not None:
            samples = [float(record.median)]
        entry.history[index].extend(samples)
    return order, series, tuple(history.report.problems)


def environment(record: Record) -> tuple[object, ...]:
    """What a record says of the machine's software under the code: torch, driver, CUDA."""
    return (record.torch, record.driver, record.cuda)


def mark_environment_drift(
    steps: Sequence[detect.Step], environments: Sequence[tuple[object, ...] | None]
) -> list[detect.Step]:
    """`steps` with status `drift` where the machine's recorded environment differs between
    the step's last old commit and its first new one (another torch or driver moves a
    series however good the code: asv splits such a series; fwdasv keeps it whole and
    does not count the step)."""
    out = []
    for step in steps:
        before = environments[step.before_index] if step.before_index < len(environments) else None
        after = environments[step.after_index] if step.after_index < len(environments) else None
        changed = before is not None and after is not None and before != after
        out.append(replace(step, status=Status.DRIFT) if changed else step)
    return out


# --- findings -------------------------------------------------------------------------------


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
    min_effect_pct: float = detect.MIN_EFFECT_PCT,
    include: Callable[[SeriesKey], bool] | None = None,
    improvements: bool = False,
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
        The smallest step reported, in percent (`detect.detect`).
    include
        Which latency series to judge (all when None).
    improvements
        Whether downward steps are findings too (status `improvement`).

    Returns
    -------
    One `Finding` per upward step (`detect.detect` on the series' own noise,
    `estimate_noise`; at the history's edges `suspected` or `regression` by how
    many commits show it, see `detect.edges`), status `drift` where the canary or the clock stepped with
    it (`detect.mark_drift`), sorted by machine, environment, benchmark and case,
    then oldest step first; commits, graph parameters and verdicts not yet
    attached (`find` does).
    """
    out: list[Finding] = []
    for key in judged_series(all_series):
        series = all_series[key]
        if include is not None and not include(key):
            continue
        noise = estimate_noise(series.history)
        medians = series.medians()
        steps = detect.detect(
            medians, noise, min_effect_pct=min_effect_pct, improvements=improvements
        )
        for canary_medians, canary_noise in _drift_series(key, all_series):
            steps = detect.mark_drift(steps, canary_medians, canary_noise)
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
            )
            for step in steps
        )
    return out


@dataclass(frozen=True)
class Found:
    """The findings of one read of the results, and the files it could not read.

    An unreadable file is a commit's results missing from every series it holds,
    so a step there can go unseen: the commands that gate name and count them
    (`fwdasv.analysis.gate.Gate.exit_status`). A commit never measured has no file
    and is not one of them.
    """

    findings: tuple[Finding, ...]
    unreadable: tuple[Problem, ...] = ()


def find(
    project: AsvProject,
    *,
    machine: str | None = None,
    bench: Sequence[str] = (),
    min_effect_pct: float | None = None,
    subjects: bool = True,
    improvements: bool = False,
) -> list[Finding]:
    """The findings of `project`'s results (every machine, or `machine`), newest status applied.

    The I/O edge of `judge_series`: reads the results, the verdicts file and the
    graph parameters asv publishes under, and (`subjects`) each range's commits
    from git. `min_effect_pct` None: the configuration's (`VerdictSettings`).
    `improvements`: downward steps too (status `improvement`).
    Unreadable files are dropped here; `scan` returns them too.
    """
    return list(
        scan(
            project,
            machine=machine,
            bench=bench,
            min_effect_pct=min_effect_pct,
            subjects=subjects,
            improvements=improvements,
        ).findings
    )


def scan(
    project: AsvProject,
    *,
    machine: str | None = None,
    bench: Sequence[str] = (),
    min_effect_pct: float | None = None,
    subjects: bool = True,
    improvements: bool = False,
) -> Found:
    """`find`, with the result files that could not be read."""
    try:
        patterns = [re.compile(p) for p in bench]
    except re.error as error:
        raise FindingsError(f"--bench: bad regular expression: {error}") from None
    if min_effect_pct is None:
        min_effect_pct = project.verdict_settings().min_effect_pct
    if min_effect_pct < 0:
        raise FindingsError(f"--min-effect {min_effect_pct}: must be >= 0 (percent)")
    order, all_series, unreadable = read_series(project, machine)
    verdicts = read_verdicts(verdicts_path(project))

    def selected(key: SeriesKey) -> bool:
        return not patterns or any(p.search(key.benchmark) or p.search(key.name) for p in patterns)

    judged = judge_series(
        order,
        all_series,
        min_effect_pct=min_effect_pct,
        include=selected,
        improvements=improvements,
    )
    graphs: dict[tuple[str, str | None], dict[str, object]] = {}
    out = []
    for finding in judged:
        where = (finding.key.machine, finding.key.env_name)
        if where not in graphs:
            graphs[where] = graph_params(project, *where)
        out.append(apply_verdict(replace(finding, graph_params=graphs[where]), verdicts))
    if subjects:
        out = attach_commits(out, project)
    return Found(tuple(out), unreadable)


def graph_params(project: AsvProject, machine: str, env_name: str | None) -> dict[str, object]:
    """The parameters `asv publish` files this machine's and environment's graphs under: a
    result file's params and environment variables, and the branch (the first configured).

    asv also fills in, as null, keys that only other result files have: where results
    of different machines or environments have different keys, the published graph
    path has those too.
    """
    params: dict[str, object] = {"machine": machine}
    for path in sorted((project.results_dir / machine).glob(f"*-{env_name}.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("params"), dict):
            params = {k: "" if v is None else v for k, v in data["params"].items()}
            params.update({f"env-{k}": v for k, v in (data.get("env_vars") or {}).items()})
            break
    params["branch"] = project.branches[0] if project.branches else None
    return params


def graph_file_path(params: Mapping[str, object], benchmark: str) -> str:
    """asv's `Graph.get_file_path` (the JS frontend's graph_to_path): where `asv publish`
    writes the graph of `benchmark` under these graph parameters."""
    parts = []
    for key, value in params.items():
        if value is None:
            part = f"{key}-null"
        elif value:
            part = f"{key}-{value}"
        else:
            part = key
        parts.append(_sanitize(part))
    parts.sort()
    return "/".join(["graphs", *parts, _sanitize(benchmark)])


def _sanitize(name: str) -> str:
    # asv.util.sanitize_filename, character for character (its class has no backslash).
    name = re.sub('[<>:"/\\^|?*\x00-\x1f]', "_", name)
    if re.fullmatch(r"CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9]", name.upper()):
        name += "_"
    return name


def _sort_key(key: SeriesKey) -> tuple[str, str, str, str]:
    return (key.machine, key.env_name, key.benchmark, key.case)


def attach_commits(findings: Sequence[Finding], project: AsvProject) -> list[Finding]:
    """Each range's commits (first-parent, after the old level's commit) with their subjects."""
    if project.local_repo is None:
        return list(findings)
    cache: dict[tuple[str, str], tuple[Commit, ...]] = {}
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
            except AsvError:
                commits = [Commit(span[1])]
            cache[span] = tuple(commits) or (Commit(span[1]),)
        out.append(replace(finding, commits=cache[span]))
    return out


# --- the verdicts file ---------------------------------------------------------------------

# The stored statuses that replace a detected one (an undecided re-measure leaves it).
RE_MEASURED = (Status.CONFIRMED, Status.NOT_REPRODUCED)


def verdicts_path(project: AsvProject) -> Path:
    return project.results_dir / VERDICTS_FILE


def apply_verdict(finding: Finding, verdicts: StoredVerdicts) -> Finding:
    """The finding with its stored verdict attached, and its status when the verdict
    re-measured it (confirmed, not-reproduced); drift is never overruled."""
    stored = verdicts.about(finding.ident, finding.before_commit)
    if stored is None or finding.status in (Status.DRIFT, Status.IMPROVEMENT):
        return finding
    status = stored.status
    return replace(
        finding,
        status=Status(status) if status in RE_MEASURED else finding.status,
        verdict=stored,
    )


def record_verdict(
    project: AsvProject,
    finding: Finding,
    *,
    status: Status,
    confirmation: ConfirmationRecord | None = None,
    explain: ExplainRecord | None = None,
) -> None:
    """Append one verdict line about `finding`: its status, and its re-measure or diff."""
    append_verdict(
        verdicts_path(project),
        FindingVerdict(
            ident=finding.ident,
            recorded_at=now_utc(),
            # The range it is about: it also holds for a narrower range found later.
            before_commit=finding.before_commit,
            range_commits=tuple(c.hash for c in finding.commits) or (finding.after_commit,),
            status=status,
            confirmation=confirmation,
            explain=explain,
        ),
    )


# --- formatting ---------------------------------------------------------------------------

HEADERS = (
    "status",
    "benchmark",
    "case",
    "machine",
    "commits",
    "before",
    "after",
    "change",
    "noise",
)


UNDECIDED_LABEL = "too noisy to decide"


def status_label(finding: Finding) -> str:
    """The status as tables show it: with how many commits show an edge's step, or why a
    settled step is only suspected."""
    status = str(finding.status)
    if finding.step.edge is not None and finding.status in (Status.SUSPECTED, Status.REGRESSION):
        shown = finding.showing_commits
        return f"{status} ({shown} commit{'s' if shown > 1 else ''})"
    if finding.step.edge is None and finding.status == Status.SUSPECTED:
        return f"{status} ({UNDECIDED_LABEL})"
    return status


def _row(finding: Finding) -> list[str]:
    if len(finding.commits) == 1:
        commits = finding.commits[0].hash[:8] + (
            f" {finding.commits[0].subject}" if finding.commits[0].subject else ""
        )
    elif finding.commits:
        commits = f"{finding.range_label} ({len(finding.commits)}): " + "; ".join(
            c.hash[:8] + (f" {c.subject}" if c.subject else "") for c in finding.commits
        )
    else:
        commits = finding.range_label
    return [
        status_label(finding),
        finding.key.benchmark,
        finding.key.case,
        finding.key.machine,
        commits,
        human_value(finding.step.before, finding.unit),
        human_value(finding.step.after, finding.unit),
        f"{finding.percent:+.2f}%",
        f"{finding.noise.noise_pct:.2f}%",
    ]


RE_MEASURED_HEADER = "re-measured"


def _re_measured_cell(finding: Finding) -> str:
    """The confirmation's pair and outcome (`A..B: undecided at this noise`), or ""."""
    shown = finding.re_measured()
    if shown is None:
        return ""
    same = shown["pair"] == shown["finding_pair"]
    return f"{shown['pair']}{'' if same else ' (widened)'}: {shown['outcome']}"


def unreadable_line(unreadable: Sequence[Problem]) -> str:
    """The note under a listing that missed some results."""
    count = len(unreadable)
    files = "file" if count == 1 else "files"
    return (
        f"{count} result {files} could not be read (named on stderr): a regression at "
        f"{'its commit' if count == 1 else 'their commits'} would not show here"
    )


def format_findings(
    findings: Sequence[Finding], fmt: str, unreadable: Sequence[Problem] = ()
) -> str:
    gating = sum(f.gating for f in findings)
    if fmt == "json":
        return json.dumps(
            {
                "regressions": [f.to_json() for f in findings],
                "count": len(findings),
                "gating": gating,
                # Its name before the verdicts: findings that fail the check.
                "above_threshold": gating,
                "unreadable": [{"path": p.path, "error": p.message} for p in unreadable],
                "unreadable_count": len(unreadable),
            },
            indent=2,
            allow_nan=False,
            default=str,
        )
    rows = [_row(f) for f in findings]
    headers = HEADERS
    if any(f.re_measured() for f in findings):
        # Which pair the confirmation measured: A and B reach a commit past the finding's.
        headers = (*HEADERS, RE_MEASURED_HEADER)
        rows = [[*row, _re_measured_cell(f)] for row, f in zip(rows, findings, strict=True)]
    counts = defaultdict(int)
    for f in findings:
        counts[f.status] += 1
    tally = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"
    note = unreadable_line(unreadable) if unreadable else ""
    if fmt == "markdown":
        tail = f"\n**{note}.**\n" if note else ""
        if not findings:
            return "### Performance regressions\n\nNo regressions in the stored results.\n" + tail
        return (
            f"### Performance regressions: {tally}\n\n"
            + markdown_table(headers, rows)
            + "\n\nEach series judged by its own run-to-run noise (`noise`); `regression`: "
            "detected, `suspected`: at the history's edge, shown by too few commits to rule "
            "out outliers, or a large step too noisy for the history to decide, `confirmed`: reproduced by an A/B re-measure, `drift`: the machine "
            "changed, not the code, `improvement`: faster.\n" + tail
        )
    if fmt == "table":
        tail = f"\n{note}" if note else ""
        if not findings:
            where = "readable" if note else "stored"
            return f"No regressions in the {where} results." + tail
        out = text_table(headers, rows)
        if headers != HEADERS:
            out += (
                "\n\nre-measured: the pair the A/B confirmation measured; '(widened)': a "
                "commit past the finding's own pair each side, as its place is uncertain "
                "by about a commit"
            )
        return out + f"\n\n{len(findings)} finding(s): {tally}" + tail
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def summary_line(findings: Sequence[Finding]) -> str:
    return format_findings(findings, "table").splitlines()[-1]
