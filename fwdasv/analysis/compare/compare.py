"""Two commits' results of one series compared: the rule (`judge`) and the pairing (`pair`).

`judge` takes one series' `Measurement` at A (before) and at B (after) and gives a
`Judgement`: by default against the series' run-to-run noise from its history
(`fwdasv.analysis.rules.noise`), else asv's rule (Mann-Whitney on the stored samples, else
99% CIs that do not overlap); a change counts only beyond `factor`. `pair` matches two
commits' history records by series and judges each; only latency (`counted`) can be
worse or improved, the rest is telemetry. A `PairFinding` is the stored history's
finding between the two commits (`compare_stored.attach_findings`): one verdict per
pair. Verdicts: `fwdasv.analysis.rules.status`; what fails CI: `gate.COMPARISON`, and
`gate.FINDINGS` on the attached finding; how it decides: docs/verdicts.md ("compare"). DEFAULT_FACTOR: the configuration's default min_effect_pct (0.3%) as a
ratio, the smallest change the findings report too. Pure: the I/O edge is
`fwdasv.analysis.compare.stored`, the formatting `fwdasv.analysis.compare.format`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from fwdasv.analysis.findings.series import LATENCY_UNIT, RELATIVE_UNIT
from fwdasv.analysis.rules.judgment import (
    DEFAULT_ALPHA,
    ProcessSpread,
    ProcessTest,
    pooled_spread,
    process_medians,
    process_test,
    sample_test,
)
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import COMPARISON_STATUSES, CompareStatus, Status
from fwdasv.analysis.rules.student_t import t_sf
from fwdasv.asv.history import Record, RecordStatus
from fwdasv.core.numbers import finite_or_none
from fwdasv.core.verdicts import VerdictSettings

# A floor under the noise test: changes below the default min_effect_pct (0.3%) are real
# but too small to chase. A project's own setting: `compare_stored.default_factor(project)`.
DEFAULT_FACTOR = VerdictSettings().min_effect_factor
NOISE, MANN_WHITNEY = "noise", "mann-whitney"
METHODS = (NOISE, MANN_WHITNEY)


def counted(unit: str | None) -> bool:
    """Whether a series of this unit may be worse or improved (latency, or a paced suite's
    forward over the workload), or is telemetry: the units the findings judge."""
    return unit in (LATENCY_UNIT, RELATIVE_UNIT)


@dataclass(frozen=True)
class Measurement:
    """One stored result of one benchmark case at one commit."""

    commit: str
    status: RecordStatus  # "ok", "failed" (asv stored null), "skipped" (NaN)
    median: float | None
    ci_99_a: float | None = None
    ci_99_b: float | None = None
    samples: tuple[float, ...] = ()
    # The bench processes bisect or confirm kept (`compare.kept`): each sample is a
    # process median, no asv result is stored for the commit.
    remeasured: bool = False

    def to_json(self) -> dict[str, object]:
        """One side as `fwdasv compare --format json` shows it."""
        return {
            "commit": self.commit,
            "source": "re-measure" if self.remeasured else "asv",
            "status": self.status,
            "median": self.median,
            # Strict JSON: an unbounded CI (one sample) is null, not Infinity.
            "ci_99": [finite_or_none(self.ci_99_a), finite_or_none(self.ci_99_b)],
            "sample_count": len(self.samples),
        }

    @classmethod
    def from_record(cls, record: Record, remeasured: bool = False) -> Measurement:
        return cls(
            commit=record.commit_hash,
            status=record.status,
            median=record.median,
            ci_99_a=record.ci_99_a,
            ci_99_b=record.ci_99_b,
            samples=tuple(record.sample_values()),
            remeasured=remeasured,
        )

    @property
    def has_ci(self) -> bool:
        return finite_or_none(self.ci_99_a) is not None and finite_or_none(self.ci_99_b) is not None


@dataclass(frozen=True)
class Judgement:
    """What the samples say about before -> after."""

    verdict: CompareStatus  # one of COMPARISON_STATUSES
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
            return Judgement(CompareStatus.UNKNOWN, reason="failed at both commits")
        if after.status == "failed":
            return Judgement(CompareStatus.FAILED, reason="fails at the second commit")
        return Judgement(CompareStatus.FIXED, reason="failed at the first commit")
    if before.median is None or after.median is None:
        return Judgement(CompareStatus.UNKNOWN, reason="skipped (no value)")
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
                # Too few processes to reach alpha by their own spread is no evidence
                # that nothing changed: a 4x change is never `unchanged` for it.
                counts = f"{by_process.processes[0]}+{by_process.processes[1]}"
                reason = (
                    f"not significant by processes: {counts} process medians do not reach "
                    f"alpha {alpha:g} at their spread (p={by_process.p_value:.2g}), though "
                    f"the series' noise calls it different (p={p_value:.2g})"
                )
                if max(ratio, 1 / ratio) > factor:
                    reason += (
                        f"; a {ratio:.3g}x change: measure both commits again "
                        "(`asv run --append-samples`) to decide"
                    )
                return Judgement(
                    CompareStatus.NOT_SIGNIFICANT,
                    ratio,
                    by_process.p_value,
                    "noise+processes",
                    reason,
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
        return Judgement(CompareStatus.UNKNOWN, ratio, reason=reason)
    if not different:
        reason = _not_significant(ratio, p_value, alpha, method, factor, noise)
        return Judgement(CompareStatus.NOT_SIGNIFICANT, ratio, p_value, method, reason)
    if before.median < after.median / factor:
        return Judgement(CompareStatus.WORSE, ratio, p_value, method)
    if after.median < before.median / factor:
        return Judgement(CompareStatus.IMPROVED, ratio, p_value, method)
    return Judgement(
        CompareStatus.UNCHANGED, ratio, p_value, method, "significant but within the factor"
    )


def _not_significant(
    ratio: float,
    p_value: float | None,
    alpha: float,
    method: str,
    factor: float,
    noise: Noise | None,
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
class PairFinding:
    """A finding of the stored history whose pair lies between A and B, same series: the
    verdict `fwdasv regressions` gives that step, which compare reports beside its own."""

    status: Status
    percent: float
    before_commit: str
    after_commit: str
    gating: bool  # it fails the findings' check (`gate.FINDINGS`)
    confirmation: str | None = None  # the stored re-measure's one-line summary

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def label(self) -> str:
        """`regression +24.1% at 97dabcef` (with the confirmation's status where stored)."""
        return f"{self.status} {self.percent:+.1f}% at {self.after_commit[:8]}"


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
    judgement: Judgement = field(default_factory=lambda: Judgement(CompareStatus.UNKNOWN))
    noise: Noise | None = None  # the series' noise, when judged by it
    # The history's findings between A and B in this series (`PairFinding`).
    findings: tuple[PairFinding, ...] = ()

    @property
    def verdict(self) -> CompareStatus:
        return self.judgement.verdict

    @property
    def decided_by(self) -> str:
        """Which rule decides the pair's exit status: `finding` when the history holds a
        gating finding between A and B (one verdict per pair), else `pair`."""
        return "finding" if any(f.gating for f in self.findings) else "pair"

    @property
    def decision(self) -> Status | CompareStatus:
        """The pair's one verdict: the gating finding's status where the history holds one
        between A and B (`decided_by` "finding"), else the pair's own."""
        gating = [f.status for f in self.findings if f.gating]
        return gating[0] if gating else self.verdict

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark

    def to_json(self) -> dict[str, object]:
        return {
            "benchmark": self.benchmark,
            "case": self.case,
            "params": dict(self.params),
            "machine": self.machine,
            "env_name": self.env_name,
            "unit": self.unit,
            "verdict": self.verdict,
            "decision": self.decision,
            "ratio": finite_or_none(self.judgement.ratio),
            "p_value": self.judgement.p_value,
            "method": self.judgement.method,
            "noise_pct": None if self.noise is None else self.noise.noise_pct,
            "reason": self.judgement.reason,
            "counted": counted(self.unit),
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "decided_by": self.decided_by,
        }


SeriesId = tuple[str, str | None, str, str]  # (machine, env_name, benchmark, case)


def pair(
    records_a: Iterable[Record],
    records_b: Iterable[Record],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    noises: Mapping[SeriesId, Noise] | None = None,
    process_sizes: Mapping[str, int] | None = None,
    remeasured: frozenset[str] = frozenset(),
) -> list[Comparison]:
    """Pair history records by (machine, env, benchmark, case) and judge each pair.

    `noises` (by that key) makes `judge` use each series' noise; a series
    missing from it is judged by asv's rule. `process_sizes` (samples per process,
    by benchmark) adds the process-level check. A case present at one commit only
    is `unknown` ("not measured at ..."). Records of a commit in `remeasured` are kept
    bench processes (`compare.kept`), one process median a sample.
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
        before = Measurement.from_record(ra, ra.commit_hash in remeasured) if ra else None
        after = Measurement.from_record(rb, rb.commit_hash in remeasured) if rb else None
        if before is None or after is None:
            where = "the first commit" if before is None else "the second commit"
            judgement = Judgement(CompareStatus.UNKNOWN, reason=f"not measured at {where}")
        else:
            # Kept processes are samples of one process median each: the process-level
            # check needs one layout on both sides.
            size = (process_sizes or {}).get(template.benchmark)
            if before.remeasured or after.remeasured:
                size = 1 if before.remeasured and after.remeasured else None
            judgement = judge(before, after, factor, alpha, (noises or {}).get(k), size)
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
        CompareStatus.WORSE: "moved up",
        CompareStatus.IMPROVED: "moved down",
        CompareStatus.FAILED: "failed at the second commit",
        CompareStatus.FIXED: "failed at the first commit",
    }.get(judgement.verdict, "steady" if judgement.verdict != CompareStatus.UNKNOWN else "unknown")
    detail = f"; {judgement.reason}" if judgement.reason else ""
    return replace(
        judgement,
        verdict=CompareStatus.TELEMETRY,
        reason=f"telemetry ({unit or 'no unit'}), not counted: {did}{detail}",
    )


def counts(comparisons: Iterable[Comparison]) -> dict[CompareStatus, int]:
    tally = dict.fromkeys(COMPARISON_STATUSES, 0)
    for comparison in comparisons:
        tally[comparison.verdict] += 1
    return tally
