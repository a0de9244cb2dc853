"""Where a bisection stands: a pure value over the first-parent line GOOD..BAD.

`Search` holds the commits (GOOD first, BAD last), what each probed index was placed
as (good or bad), which were skipped (an untestable commit, a failed build, a probe
the processes could not place), and the probes in the order they were made. From
that alone it gives the final pair so far (`pair`: the last good index and the first
bad one after it), the next index to probe (`next_index`: nearest the middle, None
when done) and the skipped commits left inside the pair. Each step returns a new
`Search`; no git, no asv, no files (`fwdasv.analysis.bisect.driver` measures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from fwdasv.analysis.bisect.outcome import Probe
from fwdasv.analysis.bisect.rules import bounds, next_probe
from fwdasv.analysis.rules.status import BisectStatus


@dataclass(frozen=True)
class Search:
    """One bisection's state; `decisions` maps a probed index to good or bad (never mutated:
    each step builds a new mapping)."""

    commits: tuple[str, ...]
    decisions: Mapping[int, BisectStatus] = field(default_factory=dict)
    skipped: frozenset[int] = frozenset()
    probes: tuple[Probe, ...] = ()

    @property
    def pair(self) -> tuple[int, int]:
        """The final pair so far: after the last good index, up to the first bad one."""
        return bounds(dict(self.decisions), len(self.commits) - 1)

    @property
    def next_index(self) -> int | None:
        """The untried index between the pair nearest the middle; None when none is left."""
        lo, hi = self.pair
        return next_probe(lo, hi, self.skipped | set(self.decisions))

    @property
    def done(self) -> bool:
        return self.next_index is None

    def open(self, index: int) -> bool:
        """Whether `index` is still a candidate: inside the pair, neither placed nor skipped."""
        lo, hi = self.pair
        return lo < index < hi and index not in self.decisions and index not in self.skipped

    def placed(self, index: int, probe: Probe) -> Search:
        """With one more probe: decided when it is good or bad, else skipped (as `git bisect
        skip`: untestable, failed, or not placed by its processes)."""
        probes = (*self.probes, probe)
        if probe.verdict not in (BisectStatus.GOOD, BisectStatus.BAD):
            return replace(self, skipped=self.skipped | {index}, probes=probes)
        return replace(self, decisions={**self.decisions, index: probe.verdict}, probes=probes)

    def unskipped(self, index: int) -> Search:
        """With a skipped index open again (to be measured once more); its probe stays."""
        return replace(self, skipped=self.skipped - {index})

    @property
    def skipped_inside(self) -> tuple[str, ...]:
        """The skipped commits strictly between the pair: the step may be at one of them."""
        lo, hi = self.pair
        return tuple(self.commits[i] for i in sorted(self.skipped) if lo < i < hi)
