"""A finding: one step of one series, with its status and what is recorded about it.

`Finding` is the value every command reads: the series (`SeriesKey`), the step
(`Step`: its commits, levels, z), the series' `Noise`, the status (one of
`FINDING_STATUSES`), the range's commits and the stored verdict once attached
(`fwdasv.analysis.findings.findings.find`). `to_json` is what `fwdasv regressions --format
json` and the published site show of it; `gating` says whether it fails the
findings' gate (`fwdasv.analysis.rules.gate.FINDINGS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwdasv.analysis.findings.graph_paths import graph_file_path
from fwdasv.analysis.findings.series import SeriesKey
from fwdasv.analysis.findings.verdict_file import (
    ConfirmationRecord,
    CulpritRecord,
    ExplainRecord,
    FindingIdent,
    FindingVerdict,
    TriageRecord,
)
from fwdasv.analysis.rules.gate import FINDINGS
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import RE_MEASURED, TO_CONFIRM, Status
from fwdasv.analysis.rules.step import START, Step
from fwdasv.core.verdicts import MIN_EFFECT_PCT


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
    step: Step
    noise: Noise
    before_commit: str  # the last commit at the old level
    after_commit: str  # the first commit at the new level
    latest: float | None
    status: Status = Status.REGRESSION  # one of FINDING_STATUSES
    commits: tuple[Commit, ...] = ()  # the range's commits (after before_commit), oldest first
    verdict: FindingVerdict | None = None  # the stored confirmation (and explain) of this finding
    min_effect_pct: float = MIN_EFFECT_PCT
    graph_params: dict[str, object] = field(default_factory=dict)  # see `graph_params`
    # Why the status is lower than the history's rules gave, when a later rule lowered it
    # (`fwdasv.analysis.findings.untouched.NOTE`).
    note: str | None = None
    # Commits judged by their quietest processes (`fwdasv.analysis.rules.commit_processes`).
    processes: str | None = None

    @property
    def percent(self) -> float:
        return self.step.percent

    @property
    def showing_commits(self) -> int:
        """How many commits show the step: its new level's (its old level's at a series' start)."""
        return self.step.commits_before if self.step.edge == START else self.step.commits_after

    @property
    def gating(self) -> bool:
        """Whether it fails the findings' check (`fwdasv.analysis.rules.gate.FINDINGS`)."""
        return FINDINGS.fails(self.status)

    @property
    def confirmation_record(self) -> ConfirmationRecord | None:
        """The stored verdict's re-measure of the finding's pair; None before one."""
        return None if self.verdict is None else self.verdict.confirmation

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
    def explain_record(self) -> ExplainRecord | None:
        """The stored kernel diff of the confirmed pair; None before one."""
        return None if self.verdict is None else self.verdict.explain

    @property
    def best(self) -> float:
        """The best value since the step (asv's `best`): the old level, or the latest if lower."""
        return self.step.before if self.latest is None else min(self.step.before, self.latest)

    def to_json(self) -> dict[str, object]:
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
            "note": self.note,
            "processes": self.processes,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "re_measured": self.re_measured(),
            "culprit": self.culprit(),
            "triage": None if self.triage_record is None else self.triage_record.to_json(),
        }

    @property
    def triage_record(self) -> TriageRecord | None:
        """What a person recorded of the finding; None when nobody did."""
        return None if self.verdict is None else self.verdict.triage

    @property
    def triage(self) -> str | None:
        """What a person said of it (`TriageState`: acknowledged, accepted, fixed-by,
        invalid, open); None when nobody triaged it."""
        record = self.triage_record
        return None if record is None else record.state

    @property
    def culprit_record(self) -> CulpritRecord | None:
        """What the stored bisect of the range said; None before one."""
        return None if self.verdict is None else self.verdict.culprit

    def culprit(self) -> dict[str, str | None] | None:
        """What bisect said of the range: the first bad commit (full hash; None when it named
        none, `answer` says why), its subject and the evidence; None before a bisect."""
        record = self.culprit_record
        if record is None:
            return None
        return {
            "commit": record.commit,
            "subject": record.subject,
            "evidence": record.evidence,
            "answer": record.answer,
            "range": f"{record.good[:8]}..{record.bad[:8]}",
        }

    def re_measured(self) -> dict[str, str] | None:
        """The pair the confirmation measured (A, B), why those, and its outcome; None
        before a confirmation. A and B may be wider than the finding's own pair."""
        record = self.confirmation_record
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


def to_re_measure(finding: Finding, *, improvements: bool = True) -> bool:
    """Whether confirm's A/B re-measures `finding`: a slowdown not yet re-measured
    (`TO_CONFIRM`), or, with `improvements`, a speed-up no re-measure has decided yet (it
    stays `improvement` once confirmed, so its stored verdict says whether it was)."""
    if finding.status in TO_CONFIRM:
        return True
    if not improvements or finding.status != Status.IMPROVEMENT:
        return False
    stored = None if finding.verdict is None else finding.verdict.status
    return stored not in RE_MEASURED
