"""Where a bisection stands: a pure value over the first-parent line GOOD..BAD.

`Search` holds the commits (GOOD first, BAD last), what each probed index was placed
as (good or bad), which were skipped unmeasured (a failed build, an untestable
commit), and the probes in the order they were made. From that alone it gives the
final pair so far (`pair`: the last good index and the first bad one after it), the
next index to probe (`next_index`: nearest the middle, None when done) and the
decisions to re-check when the pair does not differ. Each step returns a new
`Search`; no git, no asv, no files (`fwdasv.analysis.bisect.driver` measures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from fwdasv.analysis.bisect.outcome import Probe
from fwdasv.analysis.bisect.rules import bounds, next_probe, recheck_order
from fwdasv.analysis.status import Status


@dataclass(frozen=True)
class Search:
    """One bisection's state; `decisions` maps a probed index to good or bad (never mutated:
    each step builds a new mapping)."""

    commits: tuple[str, ...]
    decisions: Mapping[int, Status] = field(default_factory=dict)
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

    def placed(self, index: int, probe: Probe) -> Search:
        """With one more probe: skipped when it failed (as `git bisect skip`), else decided."""
        probes = (*self.probes, probe)
        if probe.verdict == Status.FAILED:
            return replace(self, skipped=self.skipped | {index}, probes=probes)
        return replace(self, decisions={**self.decisions, index: probe.verdict}, probes=probes)

    def rechecked(self, index: int, probe: Probe) -> Search:
        """With `probe` in place of the earlier probe of its commit, and its decision that
        probe's verdict."""
        position = next(k for k, p in enumerate(self.probes) if p.commit == probe.commit)
        probes = (*self.probes[:position], probe, *self.probes[position + 1 :])
        return replace(self, decisions={**self.decisions, index: probe.verdict}, probes=probes)

    def to_recheck(self, done: set[int]) -> list[int]:
        """The decisions that led to the pair, nearest it first, less those in `done`."""
        lo, hi = self.pair
        return [i for i in recheck_order(list(self.decisions), lo, hi) if i not in done]

    @property
    def skipped_inside(self) -> tuple[str, ...]:
        """The skipped commits strictly between the pair: the step may be at one of them."""
        lo, hi = self.pair
        return tuple(self.commits[i] for i in sorted(self.skipped) if lo < i < hi)
