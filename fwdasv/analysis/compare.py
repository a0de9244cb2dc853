"""Two commits' stored asv results compared, with an exit status for CI.

By default each series (benchmark, case, machine, environment) is judged by
its own run-to-run noise, estimated from its whole stored history
(`fwdasv.analysis.noise`: robust to outlier commits and to steps, never below
the in-run standard error, a conservative prior for a short history): the
change of medians is significant when |ln(B / A)| exceeds the Student t
quantile (two-sided alpha) times sigma * sqrt(2), and it counts only beyond
`factor`, a floor: the configuration's `min_effect_pct` as a ratio (0.3% by
default: 1.003; `fwdasv.core.verdicts`), the smallest change worth reporting
that the findings use too. Mann-Whitney on one process's samples
sees none of the variance a new process, capture or clock state adds: on
histories with H200-like noise it raised a false alarm in most step-free
pairs at 1%.

`--method mann-whitney` is asv's rule (`asv.commands.compare._is_result_better`):
two-sided Mann-Whitney U on the samples asv stored with `--record-samples`
(different when p < alpha; `fwdasv.core.stats`, cross-checked against asv's
`_stats`), else 99% confidence intervals that do not overlap (`ci-overlap`),
and beyond `factor`. A result with neither usable samples nor a finite CI is
*unknown*, never a regression. Unlike `asv compare`, which always exits 0
(asv#884), `fwdasv compare` exits 1 when anything got worse.

Verdicts (`fwdasv.analysis.status`): improved, worse, unchanged (significant,
but within the factor), not-significant (the noise or the samples cannot tell
the change from none, whatever its ratio: the note says why and what would
decide it), unknown, failed (succeeded at A, fails at B: counted as worse, as
asv's `!`), fixed (failed at A, succeeds at B). What fails the check:
`fwdasv.analysis.gate.COMPARISON`.

Only latency counts: a series whose unit is seconds (the suites' track_latency,
asv's time_* benchmarks, and any benchmark of yours given `unit = "seconds"`), and
a paced suite's track_relative (unit ratio: the forward's time over fwdasv's fixed
workload timed beside it, lower is faster).
Telemetry (the GPU clock, power- and thermal-capped time, sample spread,
graph-vs-eager error, clock uncertainty: any other unit) is shown with what it
did (`telemetry`, the note saying "moved" or "steady"), never counted worse or
better, and never decides the exit status.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fwdasv.analysis.findings import LATENCY_UNIT, RELATIVE_UNIT
from fwdasv.analysis.judgment import (
    DEFAULT_ALPHA,
    ProcessSpread,
    ProcessTest,
    check_rule,
    pooled_spread,
    process_medians,
    process_test,
    sample_test,
)
from fwdasv.analysis.noise import Noise, t_sf
from fwdasv.analysis.status import COMPARISON_STATUSES, Status
from fwdasv.asv.history import CommitFilter, History, Record, RecordStatus
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.errors import UserError
from fwdasv.core.tables import human_value, markdown_table, text_table
from fwdasv.core.verdicts import VerdictSettings

# A floor under the noise test: changes below the default min_effect_pct (0.3%) are real
# but too small to chase. A project's own setting gives `default_factor(project)`.
DEFAULT_FACTOR = VerdictSettings().min_effect_factor
NOISE, MANN_WHITNEY = "noise", "mann-whitney"
METHODS = (NOISE, MANN_WHITNEY)

FORMATS = ("table", "json", "markdown")

_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


def counted(unit: str | None) -> bool:
    """Whether a series of this unit may be worse or improved (latency, or a paced suite's
    forward over the workload), or is telemetry: the units the findings judge."""
    return unit in (LATENCY_UNIT, RELATIVE_UNIT)


class CompareError(UserError):
    """The commits cannot be resolved or have no stored results."""


@dataclass(frozen=True)
class Measurement:
    """One stored result of one benchmark case at one commit."""

    commit: str
    status: RecordStatus  # "ok", "failed" (asv stored null), "skipped" (NaN)
    median: float | None
    ci_99_a: float | None = None
    ci_99_b: float | None = None
    samples: tuple[float, ...] = ()

    @classmethod
    def from_record(cls, record: Record) -> Measurement:
        return cls(
            commit=record.commit_hash,
            status=record.status,
            median=record.median,
            ci_99_a=record.ci_99_a,
            ci_99_b=record.ci_99_b,
            samples=tuple(record.sample_values()),
        )

    @property
    def has_ci(self) -> bool:
        return (
            self.ci_99_a is not None
            and self.ci_99_b is not None
            and math.isfinite(self.ci_99_a)
            and math.isfinite(self.ci_99_b)
        )


@dataclass(frozen=True)
class Judgement:
    """What the samples say about before -> after."""

    verdict: Status  # one of COMPARISON_STATUSES
    ratio: float | None = None  # after / before, medians
    p_value: float | None = None  # Mann-Whitney, when the samples were tested
    method: str = "none"  # "mann-whitney", "ci-overlap", "none"
    reason: str = ""


def judge(
    before: Measurement,
    after: Measurement,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    noise: Noise | None = None,
    process_size: int | None = None,
) -> Judgement:
    """One pair: different, and beyond `factor`.

    With the series' `noise` (the default of `compare_commits`): different
    when |ln(after / before)| exceeds the Student t quantile (two-sided
    `alpha`, the noise's degrees of freedom) times the noise of a difference
    of two commit medians (sigma * sqrt 2): the run-to-run variance a new
    process, capture and clock state add counts, which Mann-Whitney on one
    process's samples never sees. A history too short to estimate the noise
    (the prior alone) uses the prior's 1% as known. Without `noise`, asv's
    rule: Mann-Whitney on the stored samples, else non-overlapping 99% CIs.

    With `process_size` (samples per bench process, `remeasure.process_layout`)
    and two processes at one commit at least, a change the noise calls
    different must also be different by process-level variation
    (`judgment.process_test`: process medians against the variance between
    the processes of these two commits, floored at the series' noise): one
    unusually fast process at a commit is not a step.
    """
    if before.status == "failed" or after.status == "failed":
        if before.status == "failed" and after.status == "failed":
            return Judgement(Status.UNKNOWN, reason="failed at both commits")
        if after.status == "failed":
            return Judgement(Status.FAILED, reason="fails at the second commit")
        return Judgement(Status.FIXED, reason="failed at the first commit")
    if before.median is None or after.median is None:
        return Judgement(Status.UNKNOWN, reason="skipped (no value)")
    ratio = after.median / before.median if before.median else math.inf
    different: bool | None = None
    p_value = None
    method = "none"
    if noise is not None and before.median > 0 and after.median > 0:
        t_value = math.log(ratio) / (noise.sigma * math.sqrt(2))
        # A history too short to estimate anything gives the prior alone: a noise chosen
        # high (1%), taken as known; an estimate counts with its degrees of freedom.
        dof = math.inf if noise.source == "prior" else noise.dof
        p_value = min(1.0, 2 * t_sf(abs(t_value), dof))
        different = p_value < alpha
        method = "noise"
        if different:
            by_process = _process_level(before, after, process_size, noise)
            if by_process is not None and not by_process.different(alpha):
                return Judgement(
                    Status.UNCHANGED,
                    ratio,
                    by_process.p_value,
                    "noise+processes",
                    f"processes disagree: {by_process.processes[0]}+"
                    f"{by_process.processes[1]} process medians do not differ "
                    f"(p={by_process.p_value:.2g})",
                )
    elif before.samples and after.samples:
        tested = sample_test(before.samples, after.samples, alpha)
        different, p_value = tested.different, tested.p_value
        if different is not None:
            method = "mann-whitney"
    if different is None and before.has_ci and after.has_ci:
        assert before.ci_99_a is not None and before.ci_99_b is not None
        assert after.ci_99_a is not None and after.ci_99_b is not None
        overlap = before.ci_99_b >= after.ci_99_a and before.ci_99_a <= after.ci_99_b
        different = not overlap
        method = "ci-overlap"
    if different is None:
        if not before.samples and not after.samples:
            reason = "no samples and no finite CI (one value each): not judged"
        else:
            counts = f"{len(before.samples)} vs {len(after.samples)} samples"
            reason = f"too few samples to test ({counts}) and no finite CI"
        return Judgement(Status.UNKNOWN, ratio, reason=reason)
    if not different:
        reason = _not_significant(ratio, p_value, alpha, method, factor, noise)
        return Judgement(Status.NOT_SIGNIFICANT, ratio, p_value, method, reason)
    if before.median < after.median / factor:
        return Judgement(Status.WORSE, ratio, p_value, method)
    if after.median < before.median / factor:
        return Judgement(Status.IMPROVED, ratio, p_value, method)
    return Judgement(Status.UNCHANGED, ratio, p_value, method, "significant but within the factor")


def _not_significant(
    ratio: float, p_value: float | None, alpha: float, method: str, factor: float, noise
) -> str:
    """Why a pair was not called different, and (for a large ratio) what would decide it."""
    if method == "noise" and noise is not None:
        why = f"p {p_value:.2g} >= alpha {alpha:g} at the series' noise {noise.noise_pct:.2f}%"
        if noise.source == "prior":
            why += " (a prior: too short a history to estimate it)"
    elif method == "ci-overlap":
        why = "the 99% CIs overlap"
    else:
        why = f"p {p_value:.2g} >= alpha {alpha:g} on the stored samples"
    if math.isfinite(ratio) and ratio > 0 and max(ratio, 1 / ratio) > factor:
        return (
            f"not significant: {why}; a {ratio:.3g}x change cannot be told from none here; "
            "measure both commits again (`asv run --append-samples`) to decide"
        )
    return f"not significant: {why}"


def _process_level(
    before: Measurement, after: Measurement, size: int | None, noise: Noise
) -> ProcessTest | None:
    """The process-level test of before -> after, when both split into processes and one
    side has two at least."""
    xs, ys = process_medians(before.samples, size), process_medians(after.samples, size)
    if not xs or not ys:
        return None
    spread = pooled_spread([xs, ys])
    if spread is None:
        return None
    dof = math.inf if noise.source == "prior" else noise.dof
    return process_test(xs, ys, spread, floor=ProcessSpread(noise.sigma, dof))


@dataclass(frozen=True)
class Comparison:
    """One benchmark case at A and at B, and the judgement."""

    benchmark: str
    case: str
    params: dict[str, str]
    machine: str
    env_name: str | None
    unit: str | None
    before: Measurement | None
    after: Measurement | None
    judgement: Judgement = field(default_factory=lambda: Judgement(Status.UNKNOWN))
    noise: Noise | None = None  # the series' noise, when judged by it

    @property
    def verdict(self) -> Status:
        return self.judgement.verdict

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark

    def to_json(self) -> dict[str, Any]:
        def side(m: Measurement | None) -> dict[str, Any] | None:
            if m is None:
                return None
            return {
                "commit": m.commit,
                "status": m.status,
                "median": m.median,
                # Strict JSON: an unbounded CI (one sample) is null, not Infinity.
                "ci_99": [_finite(m.ci_99_a), _finite(m.ci_99_b)],
                "sample_count": len(m.samples),
            }

        return {
            "benchmark": self.benchmark,
            "case": self.case,
            "params": dict(self.params),
            "machine": self.machine,
            "env_name": self.env_name,
            "unit": self.unit,
            "verdict": self.verdict,
            "ratio": _finite(self.judgement.ratio),
            "p_value": self.judgement.p_value,
            "method": self.judgement.method,
            "noise_pct": None if self.noise is None else self.noise.noise_pct,
            "reason": self.judgement.reason,
            "counted": counted(self.unit),
            "before": side(self.before),
            "after": side(self.after),
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


SeriesId = tuple[str, str | None, str, str]  # (machine, env_name, benchmark, case)


def pair(
    records_a: Iterable[Record],
    records_b: Iterable[Record],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    noises: Mapping[SeriesId, Noise] | None = None,
    process_sizes: Mapping[str, int] | None = None,
) -> list[Comparison]:
    """Pair history records by (machine, env, benchmark, case) and judge each pair.

    `noises` (by that key) makes `judge` use each series' noise; a series
    missing from it is judged by asv's rule. `process_sizes` (samples per process,
    by benchmark) adds the process-level check. A case present at one commit only
    is `unknown` ("not measured at ...").
    """

    def key(record: Record) -> SeriesId:
        return (record.machine, record.env_name, record.benchmark, record.case)

    side_a = {key(r): r for r in records_a}
    side_b = {key(r): r for r in records_b}
    out = []
    for k in sorted(side_a.keys() | side_b.keys()):
        ra, rb = side_a.get(k), side_b.get(k)
        template = ra or rb
        assert template is not None
        before = Measurement.from_record(ra) if ra else None
        after = Measurement.from_record(rb) if rb else None
        if before is None or after is None:
            where = "the first commit" if before is None else "the second commit"
            judgement = Judgement(Status.UNKNOWN, reason=f"not measured at {where}")
        else:
            judgement = judge(
                before,
                after,
                factor,
                alpha,
                (noises or {}).get(k),
                (process_sizes or {}).get(template.benchmark),
            )
        if not counted(template.unit):
            judgement = _as_telemetry(judgement, template.unit)
        out.append(
            Comparison(
                benchmark=template.benchmark,
                case=template.case,
                params=dict(template.params),
                machine=template.machine,
                env_name=template.env_name,
                unit=template.unit,
                before=before,
                after=after,
                judgement=judgement,
                noise=(noises or {}).get(k),
            )
        )
    return out


def _as_telemetry(judgement: Judgement, unit: str | None) -> Judgement:
    """A telemetry series' judgement: what it did, in the note; never worse or better."""
    did = {
        Status.WORSE: "moved up",
        Status.IMPROVED: "moved down",
        Status.FAILED: "failed at the second commit",
        Status.FIXED: "failed at the first commit",
    }.get(judgement.verdict, "steady" if judgement.verdict != Status.UNKNOWN else "unknown")
    detail = f"; {judgement.reason}" if judgement.reason else ""
    return replace(
        judgement,
        verdict=Status.TELEMETRY,
        reason=f"telemetry ({unit or 'no unit'}), not counted: {did}{detail}",
    )


def counts(comparisons: Iterable[Comparison]) -> dict[Status, int]:
    tally = dict.fromkeys(COMPARISON_STATUSES, 0)
    for comparison in comparisons:
        tally[comparison.verdict] += 1
    return tally


# --- I/O edges ------------------------------------------------------------------------


def default_factor(project: AsvProject) -> float:
    """The floor `--factor` defaults to: the configuration's min_effect_pct as a ratio."""
    return project.verdict_settings().min_effect_factor


def resolve_commit(project: AsvProject, rev: str) -> str:
    """A full hash through git in the asv repository; a bare hash prefix when git cannot."""
    try:
        return project.resolve(rev)
    except AsvError as error:
        if _HEX.match(rev):
            return rev.lower()
        raise CompareError(str(error)) from None


def _in_repo(project: AsvProject, rev: str) -> bool | None:
    """Whether git knows `rev`; None when the repository is not on disk to ask."""
    repo = project.local_repo
    if repo is None or not repo.is_dir():
        return None
    try:
        project.resolve(rev)
    except AsvError:
        return False
    return True


def load_records(
    project: AsvProject,
    commits: Sequence[str],
    machine: str | None = None,
    bench: Sequence[str] = (),
) -> dict[str, list[Record]]:
    """History records (with samples) of each commit (full hash or prefix), by commit."""
    history = History(
        project.results_dir,
        machines=[machine] if machine else (),
        bench=list(bench),
        commits=CommitFilter(frozenset(commits)),
        samples=True,
    )
    by_commit: dict[str, list[Record]] = {c: [] for c in commits}
    files = history.files()
    for record in history.records(files):
        for commit in commits:
            if record.commit_hash.startswith(commit.lower()):
                by_commit[commit].append(record)
    # A result file that may hold one of the commits and cannot be read would
    # otherwise read as "no stored results", or silently drop its results.
    names = {str(f.path) for f in files}
    unreadable = [p for p in history.report.problems if p.path in names]
    if unreadable:
        more = f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
        raise CompareError(
            f"result file {unreadable[0].line()}{more}; fix or remove it (or run `asv run` "
            "for that commit again), then compare"
        )
    return by_commit


def compare_commits(
    project: AsvProject,
    a: str,
    b: str,
    machine: str | None = None,
    *,
    factor: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    bench: Sequence[str] = (),
    method: str = NOISE,
) -> list[Comparison]:
    """Compare commit `a` (before) with `b` (after) on `project`'s stored results.

    `method` "noise" judges each series by its run-to-run noise, estimated from
    its whole stored history (`fwdasv.analysis.noise`); "mann-whitney" is asv's rule.
    `factor` None: `default_factor(project)`.
    """
    if factor is None:
        factor = default_factor(project)
    check_rule(factor, alpha)
    if method not in METHODS:
        raise CompareError(f"--method {method!r}: one of {', '.join(METHODS)}")
    hash_a, hash_b = resolve_commit(project, a), resolve_commit(project, b)
    records = load_records(project, [hash_a, hash_b], machine, bench)
    machines = sorted({r.machine for rs in records.values() for r in rs})
    if machine is None and len(machines) > 1:
        raise CompareError(
            f"results for several machines ({', '.join(machines)}): pick one with --machine"
        )
    for rev, commit in ((a, hash_a), (b, hash_b)):
        if not records[commit]:
            if _in_repo(project, rev) is False:
                raise CompareError(
                    f"{rev!r} is not a commit of {project.local_repo}, and no stored result "
                    "has that hash: give a commit (hash, branch or tag) of the benchmarked "
                    "repository"
                )
            where = f" on machine {machine}" if machine else ""
            filtered = " matching --bench" if bench else ""
            raise CompareError(
                f"no stored results{filtered} for {rev} ({commit[:8]}){where} in "
                f"{project.results_dir}: run `asv run` for it first"
            )
        hashes = {r.commit_hash for r in records[commit]}
        if len(hashes) > 1:
            raise CompareError(
                f"{rev} matches results of several commits ({', '.join(sorted(hashes))}): "
                "give more of the hash"
            )
    noises = series_noise(project, machine) if method == NOISE else None
    sizes = process_sizes(project, {r.benchmark for rs in records.values() for r in rs})
    return pair(records[hash_a], records[hash_b], factor, alpha, noises, sizes)


def process_sizes(project: AsvProject, benchmarks: Iterable[str]) -> dict[str, int]:
    """Samples per bench process of each benchmark that is a fwdasv suite's."""
    from fwdasv.analysis.remeasure import process_layout

    out = {}
    for name in sorted(benchmarks):
        layout = process_layout(project, name)
        if layout is not None:
            out[name] = layout.samples
    return out


def series_noise(project: AsvProject, machine: str | None = None) -> dict[SeriesId, Noise]:
    """Each series' noise from its whole stored history."""
    from fwdasv.analysis.findings import load_series
    from fwdasv.analysis.noise import estimate_noise

    _, series = load_series(project, machine)
    return {
        (k.machine, k.env_name, k.benchmark, k.case): estimate_noise(s.history)
        for k, s in series.items()
    }


# --- formatting -----------------------------------------------------------------------

HEADERS = ("verdict", "before", "after", "ratio", "p-value", "n", "benchmark", "machine", "note")


def _row(c: Comparison) -> list[str]:
    j = c.judgement
    n = "/".join(str(len(m.samples)) if m else "-" for m in (c.before, c.after))
    p = f"{j.p_value:.2g}" if j.p_value is not None else ("ci" if j.method == "ci-overlap" else "")
    if j.method == "noise" and c.noise is not None:
        p += f" (noise {c.noise.noise_pct:.2f}%)"
    return [
        j.verdict,
        human_value(c.before.median if c.before else None, c.unit),
        human_value(c.after.median if c.after else None, c.unit),
        f"{j.ratio:.3f}" if j.ratio is not None else "",
        p,
        n,
        c.name,
        c.machine,
        j.reason,
    ]


def _ordered(comparisons: Sequence[Comparison], only_changed: bool) -> list[Comparison]:
    hidden = (Status.UNCHANGED, Status.NOT_SIGNIFICANT, Status.UNKNOWN, Status.TELEMETRY)
    shown = [c for c in comparisons if not only_changed or c.verdict not in hidden]
    return sorted(shown, key=lambda c: (COMPARISON_STATUSES.index(c.verdict), c.name, c.machine))


def summary(comparisons: Sequence[Comparison]) -> str:
    tally = counts(comparisons)
    return ", ".join(f"{n} {verdict}" for verdict, n in tally.items() if n) or "nothing compared"


def format_comparisons(
    comparisons: Sequence[Comparison],
    fmt: str,
    *,
    a: str = "A",
    b: str = "B",
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    only_changed: bool = False,
) -> str:
    shown = _ordered(comparisons, only_changed)
    rule = f"factor {factor}, alpha {alpha}"
    if fmt == "json":
        return json.dumps(
            {
                "a": a,
                "b": b,
                "factor": factor,
                "alpha": alpha,
                "counts": counts(comparisons),
                "comparisons": [c.to_json() for c in shown],
            },
            indent=2,
            default=str,
            allow_nan=False,
        )
    rows = [_row(c) for c in shown]
    if fmt == "markdown":
        title = f"### Benchmarks: `{a[:8]}` -> `{b[:8]}` ({summary(comparisons)})\n\n"
        body = markdown_table(HEADERS, rows) if rows else "Nothing to show."
        methods = sorted({c.judgement.method for c in shown} - {"none"})
        how = (
            "each series' run-to-run noise from its stored history"
            if methods == ["noise"]
            else "Mann-Whitney U on asv's stored samples"
            if methods == ["mann-whitney"]
            else ", ".join(methods) or "no test"
        )
        return title + body + f"\n\nJudged by {how}, {rule}.\n"
    if fmt == "table":
        head = f"{a[:8]} -> {b[:8]} ({rule})"
        body = text_table(HEADERS, rows) if rows else "(nothing to show)"
        return f"{head}\n{body}\n\n{summary(comparisons)}"
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
