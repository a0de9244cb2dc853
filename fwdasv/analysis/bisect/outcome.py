"""What bisect found: each probe and the result, as text and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fwdasv.analysis.bisect.rules import Classification, StepTest
from fwdasv.analysis.status import Status
from fwdasv.core import stats
from fwdasv.core.tables import human_value


@dataclass(frozen=True)
class Probe:
    commit: str
    subject: str | None
    verdict: Status  # good / bad / failed
    median: float | None
    sample_count: int
    from_good: StepTest | None = None
    to_bad: StepTest | None = None
    remeasures: int = 0
    # samples / re-check (changed when the final pair was re-checked) / closer-median and
    # unconfirmed (its runs never agreed): uncertain / failed / untestable (skipped unmeasured)
    decided_by: str = "samples"

    @classmethod
    def placed(
        cls,
        commit: str,
        subject: str | None,
        verdict: Status,
        samples: Sequence[float],
        decision: Classification,
        remeasures: int,
        decided_by: str,
    ) -> Probe:
        """A probe the samples placed: their median and count, and both comparisons."""
        return cls(
            commit,
            subject,
            verdict,
            stats.median(samples),
            len(samples),
            decision.from_good,
            decision.to_bad,
            remeasures,
            decided_by,
        )


UNCERTAIN = ("closer-median", "unconfirmed")


@dataclass(frozen=True)
class BisectResult:
    benchmark: str
    case: str | None
    machine: str
    env_name: str
    unit: str | None
    good: str
    bad: str
    range_size: int  # commits after GOOD up to BAD, first-parent
    direction: int  # +1: BAD is slower
    last_good: str
    first_bad: str
    subject: str | None
    before_median: float
    after_median: float
    p_value: float | None
    asv_runs: int
    remeasures: int
    probes: tuple[Probe, ...] = ()
    skipped: tuple[str, ...] = ()  # candidates between last_good and first_bad that failed
    # Whether the final pair (last good, first bad) differs significantly: if not, no
    # commit is named (the step did not reproduce where the probes put it).
    reproducible: bool = True
    final_step: StepTest | None = None

    @property
    def percent(self) -> float:
        return 100 * (self.after_median - self.before_median) / self.before_median

    @property
    def certain(self) -> bool:
        return (
            self.reproducible
            and not self.skipped
            and all(p.decided_by not in UNCERTAIN for p in self.probes)
        )

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark

    def summary(self) -> str:
        runs = (
            f"{self.asv_runs} asv run{'s' if self.asv_runs != 1 else ''} "
            f"({self.remeasures} re-measure{'s' if self.remeasures != 1 else ''}) "
            f"over {self.range_size} commits"
        )
        if not self.reproducible:
            step = self.final_step
            moved = f"{100 * (step.ratio - 1):+.1f}%" if step and step.ratio else "no change"
            return (
                f"not reproducible: {self.name} did not step significantly between the last "
                f"good and the first bad commit the probes left ({self.last_good[:8]} -> "
                f"{self.first_bad[:8]}: {moved}, {step.outcome if step else 'unknown'}); no "
                f"commit is named; {runs}. Measure on a quieter machine or with more samples."
            )
        p = f", p={self.p_value:.2g}" if self.p_value is not None else ""
        label = self.first_bad[:8] + (f" {self.subject}" if self.subject else "")
        # An improvement's bisect finds where it got faster: its "bad" side is the faster one.
        first = "first bad commit" if self.direction > 0 else "first faster commit"
        line = (
            f"{first}: {label}: {self.name} "
            f"{human_value(self.before_median, self.unit)} -> "
            f"{human_value(self.after_median, self.unit)} ({self.percent:+.1f}%{p}); {runs}"
        )
        if self.skipped:
            untestable = {p.commit for p in self.probes if p.decided_by == "untestable"}
            line += (
                f"; could not measure {', '.join(c[:8] for c in self.skipped)}"
                + (" (untestable over the compiled base)" if untestable & set(self.skipped) else "")
                + ": the step may be there"
            )
        if not self.certain:
            line += (
                " (uncertain: some probes were decided by the closer median, or by runs "
                "that disagree)"
            )
        return line

    def to_json(self) -> dict[str, Any]:
        def step(s: StepTest | None) -> dict[str, Any] | None:
            return None if s is None else {"outcome": s.outcome, "ratio": s.ratio, "p": s.p_value}

        return {
            "benchmark": self.benchmark,
            "case": self.case,
            "machine": self.machine,
            "env_name": self.env_name,
            "good": self.good,
            "bad": self.bad,
            "range_size": self.range_size,
            "direction": "slower" if self.direction > 0 else "faster",
            "first_bad": self.first_bad if self.reproducible else None,
            "reproducible": self.reproducible,
            "last_good": self.last_good,
            # The first bad commit's subject: as unnamed as the commit when not reproducible.
            "subject": self.subject if self.reproducible else None,
            "before_median": self.before_median,
            "after_median": self.after_median,
            "percent": self.percent,
            "p_value": self.p_value,
            "asv_runs": self.asv_runs,
            "remeasures": self.remeasures,
            "certain": self.certain,
            "skipped": list(self.skipped),
            "probes": [
                {
                    "commit": p.commit,
                    "subject": p.subject,
                    "verdict": p.verdict,
                    "median": p.median,
                    "sample_count": p.sample_count,
                    "from_good": step(p.from_good),
                    "to_bad": step(p.to_bad),
                    "remeasures": p.remeasures,
                    "decided_by": p.decided_by,
                }
                for p in self.probes
            ],
        }
