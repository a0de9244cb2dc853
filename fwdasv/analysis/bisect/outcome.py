"""What bisect found for one series: each probe and the answer, as text and as JSON.

The answer (`Answer`) is one of three: `found` (the first bad commit is named), `not
reproducible` (GOOD and BAD, re-measured interleaved, do not differ by the step), or
`undecided` (the processes could not say, or the step may be at a commit that could
not be measured); `reason` says why in one sentence. `evidence` is what the verdicts
file keeps beside a named culprit.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwdasv.analysis.findings.verdict_file import CulpritRecord
from fwdasv.analysis.rules.status import BisectStatus, StatusWord
from fwdasv.core import stats
from fwdasv.core.tables import human_value


class Answer(StatusWord):
    FOUND = "found"
    NOT_REPRODUCIBLE = "not reproducible"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Probe:
    commit: str
    subject: str | None
    verdict: (
        BisectStatus  # good / bad; failed (skipped: untestable or failed); unknown (not placed)
    )
    processes: int = 0  # this commit's processes judged
    median: float | None = None  # the median of its process medians
    text: str = ""  # the two comparisons behind the verdict, or why it was skipped
    decided_by: str = "processes"  # processes / untestable / failed / undecided


@dataclass(frozen=True)
class BisectResult:
    """One series' bisection over GOOD..BAD (first-parent), on this machine."""

    benchmark: str
    case: str | None
    machine: str
    unit: str | None
    good: str
    bad: str
    range_size: int  # commits after GOOD up to BAD, first-parent
    direction: int  # +1: BAD is slower
    answer: Answer
    reason: str
    last_good: str  # the final pair's good end (GOOD when nothing was placed good)
    first_bad: str  # the final pair's bad end; named only when `found`
    subject: str | None
    before_median: float  # GOOD's and BAD's process medians, their medians
    after_median: float
    ends: str  # the ends' comparison, one line
    bench_runs: int  # rounds of bench processes of the bisection (all its series)
    bench_processes: int
    probes: tuple[Probe, ...] = ()
    skipped: tuple[str, ...] = ()  # commits inside the final pair that could not be placed
    resumed: int = 0  # processes an earlier search of this range kept, not launched again

    @property
    def found(self) -> bool:
        return self.answer == Answer.FOUND

    @property
    def reproducible(self) -> bool:
        """Whether a commit is named (the name earlier callers used)."""
        return self.found

    @property
    def certain(self) -> bool:
        return self.found

    @property
    def culprit(self) -> str | None:
        return self.first_bad if self.found else None

    @property
    def percent(self) -> float:
        return 100 * (self.after_median / self.before_median - 1)

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark

    def cost(self) -> str:
        return (
            f"{self.bench_runs} bench run{'s' if self.bench_runs != 1 else ''}, "
            f"{self.bench_processes} bench process{'es' if self.bench_processes != 1 else ''}"
            f"{f' ({self.resumed} kept from an earlier search)' if self.resumed else ''}"
            f" over {self.range_size} commit{'s' if self.range_size != 1 else ''}"
        )

    def evidence(self) -> str:
        """One line of why the named commit is the culprit (the verdicts file keeps it)."""
        placed = [p for p in self.probes if p.verdict in (BisectStatus.GOOD, BisectStatus.BAD)]
        return (
            f"GOOD {self.good[:8]} -> BAD {self.bad[:8]}: {self.ends}; last good "
            f"{self.last_good[:8]}, first bad {self.first_bad[:8]}; {len(placed)} probe(s) "
            f"placed by process medians; {self.cost()}"
        )

    def culprit_record(self) -> CulpritRecord:
        """What the verdicts file keeps of this search: the culprit, or none and why."""
        return CulpritRecord(
            self.culprit,
            self.subject,
            self.evidence() if self.found else self.reason,
            str(self.answer),
            self.good,
            self.bad,
        )

    def summary(self) -> str:
        if not self.found:
            return f"{self.answer}: {self.name}: {self.reason}; {self.cost()}"
        label = self.first_bad[:8] + (f" {self.subject}" if self.subject else "")
        # An improvement's bisect finds where it got faster: its "bad" side is the faster one.
        first = "first bad commit" if self.direction > 0 else "first faster commit"
        return (
            f"{first}: {label}: {self.name} {human_value(self.before_median, self.unit)} -> "
            f"{human_value(self.after_median, self.unit)} ({self.percent:+.1f}%); {self.cost()}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "benchmark": self.benchmark,
            "case": self.case,
            "machine": self.machine,
            "good": self.good,
            "bad": self.bad,
            "range_size": self.range_size,
            "direction": "slower" if self.direction > 0 else "faster",
            "answer": self.answer,
            "reason": self.reason,
            "first_bad": self.culprit,
            # The first bad commit's subject: as unnamed as the commit when not found.
            "subject": self.subject if self.found else None,
            "last_good": self.last_good,
            "before_median": self.before_median,
            "after_median": self.after_median,
            "percent": self.percent,
            "ends": self.ends,
            "bench_runs": self.bench_runs,
            "bench_processes": self.bench_processes,
            "resumed_processes": self.resumed,
            "skipped": list(self.skipped),
            "probes": [
                {
                    "commit": p.commit,
                    "subject": p.subject,
                    "verdict": p.verdict,
                    "processes": p.processes,
                    "median": p.median,
                    "text": p.text,
                    "decided_by": p.decided_by,
                }
                for p in self.probes
            ],
        }


def level(values: list[float]) -> float:
    """A side's level: the median of its process medians."""
    return stats.median(values)
