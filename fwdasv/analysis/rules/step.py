"""The values step detection returns: a series' levels (`Segment`) and a step between two.

Indices are positions in the history given to detection (commit order, failed
commits count). A `Step` is upward (a regression) unless its status is
`improvement`; `edge` names the end of the history it was found at before a level
held (HEAD: its newest commits; START: a series' first), None for a step of two
levels that hold. How steps are decided: docs/verdicts.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fwdasv.analysis.rules.status import Status

HEAD, START = "head", "start"  # `Step.edge`: where a step no level holds yet was found


@dataclass(frozen=True)
class Segment:
    """Commits [start, stop) of the series (history indices) at one level."""

    start: int
    stop: int  # one past the last commit with data
    commits: int  # commits with data in it
    level: float  # exp(mean of winsorized ln medians): a robust geometric mean


@dataclass(frozen=True)
class Step:
    """An upward step: the level moved between `before_index` and `after_index`.

    Indices are positions in the history given to `detect` (failed commits
    count). `before_index` is the last commit at the old level, `after_index`
    the first at the new one; commits between them (failed) are in the range.
    """

    before_index: int
    after_index: int
    before: float  # old level (the series' unit)
    after: float  # new level
    percent: float  # 100 * (after / before - 1)
    z: float  # (ln after - ln before) / (sigma * sqrt(1/n_before + 1/n_after))
    z_threshold: float  # what z had to reach (Studentized)
    noise_pct: float
    commits_before: int
    commits_after: int
    status: Status = Status.REGRESSION  # or SUSPECTED, IMPROVEMENT, DRIFT (mark_drift)
    edge: str | None = None  # HEAD or START: found by `edges` before a level held

    def to_json(self) -> dict[str, float | int | str | None]:
        return asdict(self)
