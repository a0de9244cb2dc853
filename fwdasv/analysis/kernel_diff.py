"""The GOOD -> BAD diff of one case's kernel (GPU) or op (CPU) profiles, told apart from noise.

Inputs: kernel summaries (`fwdasv.core.kernels`) of one case, one per profiled bench
process a side (several: `explain_commits` interleaves them; one: two files). Output: a
`KernelDiff`: one `KernelDelta` per kernel (op) name, matched by name (a name missing
from a process is 0 us and 0 calls there), with the medians per forward, the noise band
(the larger side's spread) and what changed; one total that adds up (slower + faster +
within the noise); and a verdict, worse / improved / unchanged, that follows only the
rows that stand out. `mark_changed` marks the rows whose source line is in a file the
commit changed. Pure: no files, no processes. How each row and the verdict are decided:
docs/verdicts.md ("explain").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fwdasv.analysis.status import Status
from fwdasv.core.kernels import KernelRow, KernelSummary, ProfileError, SourceFrame

TOP_EXPLAINED = 5
NEW, VANISHED, BOTH = "new", "vanished", "both"
# What a row's change is (`KernelDelta.change`).
CALLS, SHAPES = "calls", "shapes"
SLOWER, FASTER, NOISE, UNJUDGED, SAME = "slower", "faster", "noise", "unjudged", "same"
STRUCTURAL = (NEW, VANISHED, CALLS, SHAPES)
NOISE_FACTOR = 2.0  # a time-only change stands out beyond this many times its noise band
MIN_ROW_PCT = 0.5  # ... and when it is at least this % of GOOD's op time
DEFAULT_ROUNDS = 3  # profiled processes a side


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

    def to_json(self) -> dict[str, Any]:
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


@dataclass(frozen=True)
class KernelDiff:
    """GOOD -> BAD for one case: the rows by |delta|, the total and its split, the verdict."""

    kernels: tuple[KernelDelta, ...]
    total_delta_us: float
    total_delta_pct: float
    explained_top5_pct: float
    top5: tuple[str, ...]
    unit: str  # "kernel" (GPU), "op" (CPU), "op (GPU)" (GPU kernels under their aten op)
    span_before_us: float
    span_after_us: float
    busy_before_us: float
    busy_after_us: float
    activities_before: int
    activities_after: int
    before_source: str = ""
    after_source: str = ""
    slower_us: float = 0.0
    faster_us: float = 0.0
    noise_sum_us: float = 0.0
    net_noise_us: float | None = None
    rounds_before: int = 1
    rounds_after: int = 1
    verdict: Status = Status.UNCHANGED
    notes: tuple[str, ...] = ()
    change_link: str | None = None  # the commit's diff, where the project has a commit URL

    @property
    def slower(self) -> bool:
        """What stands out makes BAD slower than GOOD, beyond its noise."""
        return self.verdict == Status.WORSE

    @property
    def net_us(self) -> float:
        """The change that stands out: slower_us + faster_us."""
        return round(self.slower_us + self.faster_us, 2)

    @property
    def stands_out(self) -> tuple[KernelDelta, ...]:
        return tuple(row for row in self.kernels if row.stands_out)

    @property
    def largest_structural(self) -> KernelDelta | None:
        """The row whose structure changed (new, vanished, calls, shapes) by most time."""
        rows = [row for row in self.kernels if row.structural]
        return min(rows, key=lambda r: (-abs(r.delta_us), r.name)) if rows else None

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "kernels": [row.to_json() for row in self.kernels],
            "total_delta_us": self.total_delta_us,
            "total_delta_pct": self.total_delta_pct,
            "slower_us": self.slower_us,
            "faster_us": self.faster_us,
            "noise_sum_us": self.noise_sum_us,
            "net_us": self.net_us,
            "net_noise_us": self.net_noise_us,
            "explained_top5_pct": self.explained_top5_pct,
            "top5": list(self.top5),
            "verdict": self.verdict,
            "slower": self.slower,
            "stands_out": [row.name for row in self.stands_out],
            "rounds_before": self.rounds_before,
            "rounds_after": self.rounds_after,
            "span_before_us": self.span_before_us,
            "span_after_us": self.span_after_us,
            "busy_before_us": self.busy_before_us,
            "busy_after_us": self.busy_after_us,
            "activities_before": self.activities_before,
            "activities_after": self.activities_after,
            "notes": list(self.notes),
            "change_link": self.change_link,
            "before": self.before_source,
            "after": self.after_source,
        }


def _status(before: bool, after: bool) -> str:
    if not before:
        return NEW
    return VANISHED if not after else BOTH


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _spread(values: Sequence[float]) -> float:
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
class _Side:
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


def _delta_row(name: str, good: _Side, bad: _Side, floor: float) -> KernelDelta:
    a, b = good.values, bad.values
    before, after = round(_median(a), 2), round(_median(b), 2)
    delta = after - before
    single = len(a) < 2 or len(b) < 2
    noise = None if single else round(max(_spread(a), _spread(b)), 2)
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


def _sides(
    goods: Sequence[Sequence[KernelRow]], bads: Sequence[Sequence[KernelRow]]
) -> dict[str, tuple[_Side, _Side]]:
    maps_good = [{row.name: row for row in rows} for rows in goods]
    maps_bad = [{row.name: row for row in rows} for rows in bads]
    names = {name for rows in (*maps_good, *maps_bad) for name in rows}
    return {
        name: (
            _Side(tuple(m.get(name) for m in maps_good)),
            _Side(tuple(m.get(name) for m in maps_bad)),
        )
        for name in names
    }


def _rows_of(summary: KernelSummary, by_op: bool) -> tuple[KernelRow, ...]:
    return (summary.ops or ()) if by_op else summary.kernels


def _notes(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary], by_op: bool) -> list[str]:
    notes = []
    if len(goods) < 2 or len(bads) < 2:
        notes.append(
            "one profile a side: no noise band, so a change of time only is 'unjudged' and "
            "never stands out; fwdasv explain GOOD BAD BENCH profiles each side "
            f"{DEFAULT_ROUNDS} times, interleaved"
        )
    first = bads[0]
    attributed = any(row.sources or row.op for s in (*goods, *bads) for row in s.kernels)
    if first.is_cpu:
        if not attributed:
            notes.append(_no_source(first))
    elif not by_op and not attributed:
        if all(s.device is None and s.attribution is None for s in (*goods, *bads)):
            notes.append(
                "vLLM's profile has kernels only: it traces CUDA graph replays, which launch no "
                "aten op, and records no Python stack, so no kernel can be put under its op or "
                "named by its source line here (fwdasv explain runs vLLM's bench with an eager "
                "pass that does)"
            )
        else:
            notes.append(_no_source(first) + "; kernels are not under their ops")
    notes += _unmatched_notes(goods, bads)
    return notes


def _unmatched_notes(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary]) -> list[str]:
    """What the graph and the eager pass did not both launch, per side (its first profile)."""
    notes = []
    for label, side in (("GOOD", goods), ("BAD", bads)):
        unmatched = next((s.unmatched for s in side if s.unmatched), None)
        if not unmatched:
            continue
        parts = []
        for rows, what in (
            (unmatched.graph, "the graph launched and the eager pass did not"),
            (unmatched.eager, "the eager pass launched and the graph did not"),
        ):
            if rows:
                listed = ", ".join(f"{name} x{calls}" for name, calls in rows[:4])
                more = f", {len(rows) - 4} more" if len(rows) > 4 else ""
                parts.append(f"{what}: {listed}{more}")
        notes.append(f"{label} unmatched ({'; '.join(parts)}): shown with no op or line")
    return notes


def _no_source(summary: KernelSummary) -> str:
    why = summary.attribution or "this profile was written before fwdasv named sources"
    return f"no source lines ({why})"


def _check_one_device(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary]) -> None:
    """ProfileError unless every profile is of one device (all CPU ops or all GPU kernels)."""
    if not goods or not bads:
        raise ProfileError("explain needs at least one profile of GOOD and one of BAD")
    devices = {s.is_cpu for s in (*goods, *bads)}
    if len(devices) > 1:
        good = next(s for s in (*goods, *bads) if s.is_cpu == goods[0].is_cpu)
        bad = next(s for s in (*goods, *bads) if s.is_cpu != goods[0].is_cpu)
        kinds = {True: "a CPU op profile", False: "a GPU kernel profile"}
        raise ProfileError(
            f"Cannot compare {good.source or 'GOOD'} ({kinds[good.is_cpu]}) with "
            f"{bad.source or 'BAD'} ({kinds[bad.is_cpu]}); profile both on one device"
        )


def _delta_rows(
    sides: dict[str, tuple[_Side, _Side]], by_op: bool, floor: float
) -> list[KernelDelta]:
    """One row per name (by op: each op's kernels matched under it), shares not yet set."""
    rows = []
    for name, (good, bad) in sides.items():
        row = _delta_row(name, good, bad, floor)
        if by_op:
            under = _sides(
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


def _with_shares(rows: list[KernelDelta], slower: float, faster: float) -> list[KernelDelta]:
    """Each row that stands out with its share of the slowdown (speed-up), the rows that
    stand out first, then by |delta|."""
    shared = [
        replace(
            r,
            share_pct=round(100 * r.delta_us / (slower if r.delta_us > 0 else faster), 2)
            if r.stands_out and r.delta_us
            else 0.0,
        )
        for r in rows
    ]
    shared.sort(key=lambda r: (not r.stands_out, -abs(r.delta_us), r.name))
    return shared


def _verdict(
    rows: Sequence[KernelDelta],
    sides: dict[str, tuple[_Side, _Side]],
    net: float,
    rounds: tuple[int, int],
) -> tuple[Status, float | None]:
    """The rows that stand out, summed per process: a slowdown when every BAD process spends
    more on them than every GOOD one (the other way round: a speed-up); and the larger
    spread of those sums (None with one process a side)."""
    standing = [r.name for r in rows if r.stands_out]
    per_good = [sum(sides[n][0].values[i] for n in standing) for i in range(rounds[0])]
    per_bad = [sum(sides[n][1].values[j] for n in standing) for j in range(rounds[1])]
    single = rounds[0] < 2 or rounds[1] < 2
    net_noise = None if single else round(max(_spread(per_good), _spread(per_bad)), 2)
    verdict = Status.UNCHANGED
    if standing and net > 0 and min(per_bad) > max(per_good):
        verdict = Status.WORSE
    elif standing and net < 0 and max(per_bad) < min(per_good):
        verdict = Status.IMPROVED
    return verdict, net_noise


def diff_rounds(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary]) -> KernelDiff:
    """GOOD's and BAD's profiles (one per process) diffed; see the module docstring."""
    _check_one_device(goods, bads)
    by_op = all(s.ops for s in (*goods, *bads))
    sums_good = [sum(row.us for row in _rows_of(s, by_op)) for s in goods]
    sums_bad = [sum(row.us for row in _rows_of(s, by_op)) for s in bads]
    sides = _sides([_rows_of(s, by_op) for s in goods], [_rows_of(s, by_op) for s in bads])
    busy_before = sum(_median(g.values) for g, _ in sides.values())
    unshared = _delta_rows(sides, by_op, MIN_ROW_PCT / 100 * busy_before)
    slower = sum(r.delta_us for r in unshared if r.stands_out and r.delta_us > 0)
    faster = sum(r.delta_us for r in unshared if r.stands_out and r.delta_us < 0)
    rows = _with_shares(unshared, slower, faster)
    total = round(sum(r.delta_us for r in rows), 2)
    net = slower + faster
    verdict, net_noise = _verdict(rows, sides, net, (len(goods), len(bads)))
    side = [r for r in rows if r.stands_out and r.delta_us * net > 0]
    side.sort(key=lambda r: (-abs(r.delta_us), r.name))
    top5 = tuple(r.name for r in side[:TOP_EXPLAINED])
    explained = round(sum(r.share_pct for r in side[:TOP_EXPLAINED]), 2) if side else 0.0
    busy_after = sum(_median(b.values) for _, b in sides.values())
    good0, bad0 = goods[0], bads[0]
    return KernelDiff(
        kernels=tuple(rows),
        total_delta_us=total,
        total_delta_pct=round(100 * total / busy_before, 2) if busy_before > 0 else 0.0,
        explained_top5_pct=min(explained, 100.0),
        top5=top5,
        unit="op (GPU)" if by_op else good0.unit,
        span_before_us=round(_median([s.span_us for s in goods]), 2),
        span_after_us=round(_median([s.span_us for s in bads]), 2),
        busy_before_us=round(busy_before, 2),
        busy_after_us=round(busy_after, 2),
        activities_before=int(statistics.median_low([s.activities for s in goods])),
        activities_after=int(statistics.median_low([s.activities for s in bads])),
        before_source=good0.source if len(goods) == 1 else f"{len(goods)} profiles",
        after_source=bad0.source if len(bads) == 1 else f"{len(bads)} profiles",
        slower_us=round(slower, 2),
        faster_us=round(faster, 2),
        noise_sum_us=round(total - slower - faster, 2),
        net_noise_us=net_noise,
        rounds_before=len(goods),
        rounds_after=len(bads),
        verdict=verdict,
        notes=tuple(_notes(goods, bads, by_op)) + _spreads(sums_good, sums_bad),
    )


def _spreads(sums_good: Sequence[float], sums_bad: Sequence[float]) -> tuple[str, ...]:
    if len(sums_good) < 2 or len(sums_bad) < 2:
        return ()
    return (
        f"op time per process: GOOD {min(sums_good):.1f}-{max(sums_good):.1f} us, "
        f"BAD {min(sums_bad):.1f}-{max(sums_bad):.1f} us",
    )


def diff_summaries(good: KernelSummary, bad: KernelSummary) -> KernelDiff:
    """One profile a side (`diff_rounds` of one each)."""
    return diff_rounds([good], [bad])


def with_note(diff: KernelDiff, note: str) -> KernelDiff:
    """The diff with one more note (first), e.g. that confirm left the step undecided."""
    return replace(diff, notes=(note, *diff.notes))


def in_changed_file(file: str, changed: Sequence[str]) -> bool:
    """Whether a source file (named as installed: `vllm/...`, `model.py`, `tinylm/x.py`) is
    one of the repository's `changed` paths, or the tail of one (`src/tinylm/x.py`)."""
    return any(path == file or path.endswith("/" + file) for path in changed)


def mark_changed(diff: KernelDiff, changed: Sequence[str], link: str | None = None) -> KernelDiff:
    """The diff with each row that stands out (and kernel under it) whose source line is in a
    file the commit changed (`changed`: `git diff --name-only GOOD BAD`) marked
    `changed_here`; `link`: the commit's diff, where the project has a commit URL."""

    def marked(row: KernelDelta) -> KernelDelta:
        source = row.source
        return replace(
            row,
            changed_here=row.stands_out
            and source is not None
            and in_changed_file(source.file, changed),
            kernels=tuple(marked(kernel) for kernel in row.kernels),
        )

    return replace(diff, kernels=tuple(marked(row) for row in diff.kernels), change_link=link)
