"""One row of a kernel diff: a kernel (op) name's medians at GOOD and BAD, and what changed.

Inputs: the rows (`fwdasv.core.kernels.KernelRow`) of each side's profiled processes,
matched by name (`match_by_name`: a name missing from a process is 0 us and 0 calls
there). Output: a `KernelDelta` per name (`delta_rows`; by op, each op's kernels
matched under it) with the medians per forward, the noise band (the larger side's
spread) and its `change`: new, vanished, calls, shapes, or for a change of time only
slower / faster beyond NOISE_FACTOR times the band (and the floor), else noise. Pure.
The diff over all rows and its verdict: `fwdasv.analysis.explain.kernel_diff`; how each row is
decided: docs/verdicts.md ("explain").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fwdasv.core.kernels import KernelRow, SourceFrame

NEW, VANISHED, BOTH = "new", "vanished", "both"
# What a row's change is (`KernelDelta.change`).
CALLS, SHAPES = "calls", "shapes"
SLOWER, FASTER, NOISE, UNJUDGED, SAME = "slower", "faster", "noise", "unjudged", "same"
STRUCTURAL = (NEW, VANISHED, CALLS, SHAPES)
NOISE_FACTOR = 2.0  # a time-only change stands out beyond this many times its noise band


@dataclass(frozen=True)
class KernelDelta:
    """One kernel (op) at GOOD and at BAD: medians over the processes, the noise band, what
    changed; `kernels`: an op's kernels (GPU), matched under it; `op`: a kernel's launching
    aten op; `unmatched`: its launches a forward that the eager pass did not make (no op or
    line for them); `changed_here`: its source line is in a file the commit changed."""

    name: str
    before_us: float
    after_us: float
    calls_before: int
    calls_after: int
    share_pct: float
    status: str  # "new", "vanished" or "both"
    example: str = ""
    change: str = SAME  # new, vanished, calls, shapes, slower, faster, noise, unjudged, same
    noise_us: float | None = None
    source_before: SourceFrame | None = None
    source_after: SourceFrame | None = None
    shapes_before: tuple[str, ...] = ()
    shapes_after: tuple[str, ...] = ()
    kernels: tuple[KernelDelta, ...] = ()
    op: str = ""
    unmatched: int = 0
    changed_here: bool = False

    @property
    def delta_us(self) -> float:
        return round(self.after_us - self.before_us, 2)

    @property
    def structural(self) -> bool:
        return self.change in STRUCTURAL

    @property
    def stands_out(self) -> bool:
        return self.structural or self.change in (SLOWER, FASTER)

    @property
    def source(self) -> SourceFrame | None:
        """Where BAD calls it (GOOD, for a row that vanished)."""
        return self.source_after or self.source_before

    def to_json(self) -> dict[str, object]:
        source = self.source
        return {
            "name": self.name,
            "before_us": self.before_us,
            "after_us": self.after_us,
            "delta_us": self.delta_us,
            "noise_us": self.noise_us,
            "share_pct": self.share_pct,
            "calls_before": self.calls_before,
            "calls_after": self.calls_after,
            "status": self.status,
            "change": self.change,
            "structural": self.structural,
            "stands_out": self.stands_out,
            "source": None if source is None else source.to_json(),
            "source_before": None if self.source_before is None else self.source_before.to_json(),
            "shapes_before": list(self.shapes_before),
            "shapes_after": list(self.shapes_after),
            "example": self.example,
            "op": self.op,
            "unmatched": self.unmatched,
            "changed_here": self.changed_here,
            "kernels": [row.to_json() for row in self.kernels],
        }


def _status(before: bool, after: bool) -> str:
    if not before:
        return NEW
    return VANISHED if not after else BOTH


def median(values: Sequence[float]) -> float:
    """The median, 0 for no values (a side with no process)."""
    return float(statistics.median(values)) if values else 0.0


def spread(values: Sequence[float]) -> float:
    """The range max - min: a side's noise band (0 for no values)."""
    return max(values) - min(values) if values else 0.0


def _time_change(
    a: Sequence[float], b: Sequence[float], delta: float, noise: float | None, floor: float
) -> str:
    """`slower`, `faster`, `noise` or `unjudged` for a change of time only."""
    if noise is None:
        return UNJUDGED if delta else SAME
    if abs(delta) < floor or abs(delta) <= NOISE_FACTOR * noise:
        return NOISE if delta else SAME
    if delta > 0 and min(b) > max(a):
        return SLOWER
    if delta < 0 and max(b) < min(a):
        return FASTER
    return NOISE


@dataclass(frozen=True)
class Side:
    """One name's rows over one side's processes (None where a process lacks it)."""

    rows: tuple[KernelRow | None, ...]

    @property
    def present(self) -> bool:
        return any(row is not None for row in self.rows)

    @property
    def values(self) -> list[float]:
        return [row.us if row is not None else 0.0 for row in self.rows]

    @property
    def calls(self) -> int:
        return int(statistics.median_low([row.calls if row else 0 for row in self.rows]))

    def first(self) -> KernelRow | None:
        return next((row for row in self.rows if row is not None and row.sources), None) or next(
            (row for row in self.rows if row is not None), None
        )


def _delta_row(name: str, good: Side, bad: Side, floor: float) -> KernelDelta:
    a, b = good.values, bad.values
    before, after = round(median(a), 2), round(median(b), 2)
    delta = after - before
    single = len(a) < 2 or len(b) < 2
    noise = None if single else round(max(spread(a), spread(b)), 2)
    first_good, first_bad = good.first(), bad.first()
    shapes_before = first_good.shapes if first_good else ()
    shapes_after = first_bad.shapes if first_bad else ()
    status = _status(good.present, bad.present)
    if status != BOTH:
        change = status
    elif good.calls != bad.calls:
        change = CALLS
    elif shapes_before and shapes_after and set(shapes_before) != set(shapes_after):
        change = SHAPES
    else:
        change = _time_change(a, b, delta, noise, floor)
    either = first_bad or first_good
    source_after = first_bad.source if first_bad else None
    if change in (CALLS, SHAPES) and first_bad is not None and first_good is not None:
        # Name the call site BAD added (same file, function and code: the same site,
        # whatever moved above it), when there is one.
        known = {frame.identity for frame in first_good.sources}
        added = [frame for frame in first_bad.sources if frame.identity not in known]
        source_after = added[0] if added else source_after
    return KernelDelta(
        name=name,
        before_us=before,
        after_us=after,
        calls_before=good.calls,
        calls_after=bad.calls,
        share_pct=0.0,
        status=status,
        example=either.example if either else "",
        change=change,
        noise_us=noise,
        source_before=first_good.source if first_good else None,
        source_after=source_after,
        shapes_before=shapes_before,
        shapes_after=shapes_after,
        op=either.op if either else "",
        unmatched=max((row.unmatched for row in (*good.rows, *bad.rows) if row), default=0),
    )


def match_by_name(
    goods: Sequence[Sequence[KernelRow]], bads: Sequence[Sequence[KernelRow]]
) -> dict[str, tuple[Side, Side]]:
    """Each name any process has, with its rows over GOOD's and over BAD's processes."""
    maps_good = [{row.name: row for row in rows} for rows in goods]
    maps_bad = [{row.name: row for row in rows} for rows in bads]
    names = {name for rows in (*maps_good, *maps_bad) for name in rows}
    return {
        name: (
            Side(tuple(m.get(name) for m in maps_good)),
            Side(tuple(m.get(name) for m in maps_bad)),
        )
        for name in names
    }


def delta_rows(sides: dict[str, tuple[Side, Side]], by_op: bool, floor: float) -> list[KernelDelta]:
    """One row per name (by op: each op's kernels matched under it), shares not yet set."""
    rows = []
    for name, (good, bad) in sides.items():
        row = _delta_row(name, good, bad, floor)
        if by_op:
            under = match_by_name(
                [r.kernels if r is not None else () for r in good.rows],
                [r.kernels if r is not None else () for r in bad.rows],
            )
            kernels = sorted(
                (_delta_row(k, g, b, floor) for k, (g, b) in under.items()),
                key=lambda r: (-abs(r.delta_us), r.name),
            )
            row = replace(row, kernels=tuple(kernels))
        rows.append(row)
    return rows
