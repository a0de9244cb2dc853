"""What one bisection's steps share: the range, the followed series and their processes.

`Session` holds the first-parent line GOOD..BAD, one `Track` per followed series (its
ends' verdict, direction, change and `Search`), the `ProcessPool` every bench process
lands in, and the settings the rules take (max_processes, alpha, min_effect_pct). It
reads: a commit's process medians per series, the series' noise floor, a probe judged
by confirm's rule (`rules.judge_probe`). The steps that measure are `ends`, `probes`
and `final_pair`; `driver.Bisector` opens a session and runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fwdasv.analysis.bisect.outcome import Answer
from fwdasv.analysis.bisect.rules import ProbeJudgment, judge_probe, run_noise
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed
from fwdasv.analysis.confirm.processes import ProcessPool
from fwdasv.analysis.rules.confirm import ALPHA, MAX_PROCESSES, Confirmation
from fwdasv.analysis.rules.noise import Noise
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.tables import human_value
from fwdasv.core.verdicts import MIN_EFFECT_PCT


@dataclass
class Track:
    """Where one followed series stands: its ends' verdict, direction, change and search."""

    followed: Followed
    search: Search
    direction: int = 1
    change_pct: float = 0.0  # the step's size as a slowdown (`magnitude_pct`), after the ends
    ends: Confirmation | None = None
    answer: Answer | None = None  # set when the series is done before its search ends
    reason: str = ""

    @property
    def active(self) -> bool:
        return self.answer is None


@dataclass
class Session:
    """One search over `line` (GOOD, then each first-parent commit up to BAD) for `tracks`."""

    project: AsvProject
    machine: str
    line: tuple[str, ...]
    tracks: list[Track]
    pool: ProcessPool
    refusal: Callable[[str], str | None] | None
    max_processes: int = MAX_PROCESSES
    alpha: float = ALPHA
    min_effect_pct: float = MIN_EFFECT_PCT
    echo: Callable[[str], None] | None = print
    subjects: dict[str, str | None] = field(default_factory=dict)

    @property
    def good(self) -> str:
        return self.line[0]

    @property
    def bad(self) -> str:
        return self.line[-1]

    def say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def subject(self, commit: str) -> str | None:
        if commit not in self.subjects:
            try:
                self.subjects[commit] = self.project.subject(commit)
            except AsvError:
                self.subjects[commit] = None
        return self.subjects[commit]

    def values(self, commit: str, track: Track) -> list[float]:
        return self.pool.values(commit, track.followed.ref)

    def noise(self, track: Track) -> Noise | None:
        """The floor: the history's noise per process, else this run's own spread."""
        if track.followed.prior is not None:
            return track.followed.prior
        groups = [self.values(c, track) for c in self.pool.processes]
        return run_noise([g for g in groups if len(g) >= 2])

    def shown(self, value: float, track: Track) -> str:
        return human_value(value, track.followed.unit)

    def judge(
        self,
        probe: Sequence[float],
        track: Track,
        *,
        good: Sequence[float] | None = None,
        bad: Sequence[float] | None = None,
    ) -> ProbeJudgment:
        """A probe's process medians `probe` between GOOD's and BAD's (all of each end's,
        unless `good` or `bad` is given), by confirm's rule."""
        noise = self.noise(track)
        assert noise is not None, "the ends were judged with a floor"
        return judge_probe(
            self.values(self.good, track) if good is None else good,
            probe,
            self.values(self.bad, track) if bad is None else bad,
            noise,
            track.direction,
            change_pct=track.change_pct,
            min_effect_pct=self.min_effect_pct,
            alpha=self.alpha,
        )
