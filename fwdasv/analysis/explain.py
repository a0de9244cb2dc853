"""Which kernels (GPU) or ops (CPU) made a forward slower, told apart from timing noise.

The inputs are kernel summaries of one case (`fwdasv.core.kernels`), one per
profiled bench process: GOOD's (before) and BAD's (after), several a side when
fwdasv measured them (`explain_commits` profiles GOOD and BAD interleaved, A B
A B ..., `rounds` each), one a side for two files (`--files`, vLLM's or
fwdasv's). Rows are matched by name (on a GPU with fwdasv's `ops`: by aten
op, each op's kernels matched under it); a name missing from a process counts
as 0 us and 0 calls there.

Per row (per forward, in us), with a_i GOOD's and b_j BAD's values over the
processes:

- before_us, after_us: the medians; delta_us = after_us - before_us;
- noise_us: the larger side's spread, max(max a - min a, max b - min b); None
  with one process a side (no band can be told);
- what changed: `new` or `vanished` (on one side only), `calls` (the median
  number of calls moved), `shapes` (other input shapes) are structural: the
  code runs something else, whatever the timing. Otherwise the change is
  time-only and `slower` or `faster` only when it stands out: every process of
  one side beyond every process of the other, by more than NOISE_FACTOR times
  noise_us, and at least MIN_ROW_PCT % of GOOD's op time; else `noise`. With one
  process a side a time-only change is `unjudged`: it never stands out.

One total that adds up: total_delta_us = sum of all rows' deltas = op time
after - op time before (`busy_*_us`, the sums of the rows' medians; the span is
reported beside it, and on a CPU also holds the Python between ops). It splits
into slower_us (the rows that stand out and got slower), faster_us (those that
stand out and got faster, negative) and noise_us_sum (the rest). A row that
stands out has share_pct: its part of slower_us (or of faster_us), so the
slower rows' shares add to 100 and the faster rows' to 100; the others 0.
top5 are the largest shares on the side of the net change that stands out
(slower_us + faster_us) and explained_top5_pct the part of that side they make.

The verdict (and explain's exit status) follows only what stands out: `worse`
when the net change that stands out is a slowdown and every BAD process spends
more time on the rows that stand out than every GOOD process (net_noise_us:
the larger spread of those per-process sums), `improved` the other way round,
`unchanged` otherwise; the headline then says that no change stands out (or
that what changed in structure costs no time beyond the noise).

Pure functions first, then the loader edge, then formatting (table, JSON,
Markdown), as `compare.py` does.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import ExplainRecord
from fwdasv.asv.project import AsvProject
from fwdasv.core.kernels import (
    KernelRow,
    KernelSummary,
    ProfileError,
    SourceFrame,
    load_summary,
    profile_paths,
    safe_case_name,
)
from fwdasv.core.tables import markdown_cell, markdown_table, text_table

__all__ = [
    "FORMATS",
    "TOP_EXPLAINED",
    "KernelDelta",
    "KernelDiff",
    "ProfileError",
    "diff_files",
    "diff_rounds",
    "diff_summaries",
    "format_diff",
    "load_summary",
]

FORMATS = ("table", "json", "markdown")
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
    changed; `kernels`: an op's kernels (GPU), matched under it."""

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


def _delta_row(name: str, good: _Side, bad: _Side, floor: float, sub: bool = False) -> KernelDelta:
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
    if first.is_cpu:
        if not any(row.sources for s in (*goods, *bads) for row in s.kernels):
            notes.append(_no_source(first))
    elif not by_op:
        if all(s.device is None for s in (*goods, *bads)):
            notes.append(
                "vLLM's profile has kernels only: it traces CUDA graph replays, which launch no "
                "aten op, and records no Python stack, so no kernel can be put under its op or "
                "named by its source line here"
            )
        else:
            notes.append(_no_source(first) + "; kernels are not under their ops")
    return notes


def _no_source(summary: KernelSummary) -> str:
    why = summary.attribution or "this profile was written before fwdasv named sources"
    return f"no source lines ({why})"


def diff_rounds(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary]) -> KernelDiff:
    """GOOD's and BAD's profiles (one per process) diffed; see the module docstring."""
    if not goods or not bads:
        raise ProfileError("explain needs at least one profile of GOOD and one of BAD")
    devices = {s.is_cpu for s in (*goods, *bads)}
    if len(devices) > 1:
        good = next(s for s in (*goods, *bads) if s.is_cpu == goods[0].is_cpu)
        bad = next(s for s in (*goods, *bads) if s.is_cpu != goods[0].is_cpu)
        sides = {True: "a CPU op profile", False: "a GPU kernel profile"}
        raise ProfileError(
            f"Cannot compare {good.source or 'GOOD'} ({sides[good.is_cpu]}) with "
            f"{bad.source or 'BAD'} ({sides[bad.is_cpu]}); profile both on one device"
        )
    by_op = all(s.ops for s in (*goods, *bads))
    sums_good = [sum(row.us for row in _rows_of(s, by_op)) for s in goods]
    sums_bad = [sum(row.us for row in _rows_of(s, by_op)) for s in bads]
    sides = _sides([_rows_of(s, by_op) for s in goods], [_rows_of(s, by_op) for s in bads])
    busy_before = sum(_median(g.values) for g, _ in sides.values())
    floor = MIN_ROW_PCT / 100 * busy_before
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
    slower = sum(r.delta_us for r in rows if r.stands_out and r.delta_us > 0)
    faster = sum(r.delta_us for r in rows if r.stands_out and r.delta_us < 0)
    rows = [
        replace(
            r,
            share_pct=round(100 * r.delta_us / (slower if r.delta_us > 0 else faster), 2)
            if r.stands_out and r.delta_us
            else 0.0,
        )
        for r in rows
    ]
    rows.sort(key=lambda r: (not r.stands_out, -abs(r.delta_us), r.name))
    total = round(sum(r.delta_us for r in rows), 2)
    net = slower + faster
    single = len(goods) < 2 or len(bads) < 2
    # The rows that stand out, summed per process: a slowdown when every BAD process
    # spends more on them than every GOOD one (the other way round: a speed-up).
    standing = [name for name in (r.name for r in rows if r.stands_out)]
    per_good = [sum(sides[n][0].values[i] for n in standing) for i in range(len(goods))]
    per_bad = [sum(sides[n][1].values[j] for n in standing) for j in range(len(bads))]
    net_noise = None if single else round(max(_spread(per_good), _spread(per_bad)), 2)
    verdict = Status.UNCHANGED
    if standing and net > 0 and min(per_bad) > max(per_good):
        verdict = Status.WORSE
    elif standing and net < 0 and max(per_bad) < min(per_good):
        verdict = Status.IMPROVED
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


# --- I/O edge -------------------------------------------------------------------------


def diff_files(good: str | os.PathLike[str], bad: str | os.PathLike[str]) -> KernelDiff:
    """Load two kernels.json files (ProfileError naming a bad one) and diff them."""
    return diff_summaries(load_summary(good), load_summary(bad))


# --- formatting -----------------------------------------------------------------------

HEADERS = ("delta us", "noise ±", "share", "GOOD us", "BAD us", "calls", "change", "name", "source")


def _source_cell(row: KernelDelta) -> str:
    source = row.source
    if source is None:
        return ""
    return source.label


def _change_cell(row: KernelDelta) -> str:
    if row.change == SAME:
        return ""
    if row.change == NOISE:
        return "within noise"
    return row.change


def _row_cells(row: KernelDelta, indent: str = "") -> list[str]:
    return [
        f"{row.delta_us:+.2f}",
        "" if row.noise_us is None else f"{row.noise_us:.2f}",
        f"{row.share_pct:.1f}%" if row.stands_out and row.delta_us else "",
        f"{row.before_us:.2f}",
        f"{row.after_us:.2f}",
        f"{row.calls_before}->{row.calls_after}",
        _change_cell(row),
        indent + row.name,
        "" if indent else _source_cell(row),
    ]


def _rounds(diff: KernelDiff) -> str:
    if diff.rounds_before == diff.rounds_after:
        n = diff.rounds_before
        return f"{n} profile{'s' if n != 1 else ''} a side" + (", interleaved" if n > 1 else "")
    return f"{diff.rounds_before} profiles of GOOD, {diff.rounds_after} of BAD"


def headline(diff: KernelDiff, good: str = "GOOD", bad: str = "BAD") -> str:
    """One line: what stands out (or that nothing does), then the one total and its split."""
    structural = [row for row in diff.kernels if row.structural]
    if diff.verdict == Status.WORSE:
        what = f"slower: {diff.net_us:+.2f} us per forward stands out"
    elif diff.verdict == Status.IMPROVED:
        what = f"faster: {diff.net_us:+.2f} us per forward stands out"
    elif structural:
        what = (
            f"no change of time stands out of the noise ({diff.net_us:+.2f} us"
            + (f", noise ±{diff.net_noise_us:.2f}" if diff.net_noise_us is not None else "")
            + f"); {len(structural)} {diff.unit.split()[0]} row"
            + ("s" if len(structural) != 1 else "")
            + " changed in structure"
        )
    else:
        what = "no change stands out of the noise"
    return (
        f"{good} -> {bad} ({_rounds(diff)}): {what}; {diff.unit} time per forward "
        f"{diff.busy_before_us:.1f} -> {diff.busy_after_us:.1f} us "
        f"({diff.total_delta_us:+.2f} us, {diff.total_delta_pct:+.1f}% = "
        f"{diff.slower_us:+.2f} slower {diff.faster_us:+.2f} faster "
        f"{diff.noise_sum_us:+.2f} {'within the noise' if diff.net_noise_us is not None else 'unjudged'}), span "
        f"{diff.span_before_us:.1f} -> {diff.span_after_us:.1f} us"
    )


def _part(row: KernelDelta, code: Callable[[str], str]) -> str:
    change = f"{row.change}, " if row.change not in (SLOWER, FASTER) else ""
    where = f", {row.source.label}" if row.source is not None else ""
    calls = f"{row.calls_before}->{row.calls_after} calls"
    return (
        f"{code(row.name)} ({change}{row.delta_us:+.2f} us, {row.share_pct:.0f}%, {calls}{where})"
    )


def contributors(diff: KernelDiff, code: Callable[[str], str] = str) -> str:
    """The rows that stand out, slower ones then faster ones, largest first, with their share
    of the slowdown (speed-up) and where they are called; empty when none stands out."""
    lines = []
    for label, sign in (("slower", 1), ("faster", -1)):
        rows = [r for r in diff.kernels if r.stands_out and sign * r.delta_us > 0]
        if not rows:
            continue
        rows.sort(key=lambda r: (-abs(r.delta_us), r.name))
        total = diff.slower_us if sign > 0 else diff.faster_us
        shown = "; ".join(_part(row, code) for row in rows[:TOP_EXPLAINED])
        more = f"; {len(rows) - TOP_EXPLAINED} more" if len(rows) > TOP_EXPLAINED else ""
        lines.append(f"{label} ({total:+.2f} us): {shown}{more}")
    return "\n".join(lines)


def _code(name: str) -> str:
    """A Markdown code span: kernel names hold `<...>`, which would render as HTML tags."""
    fence = "``" if "`" in name else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{name}{pad}{fence}"


def _table_rows(diff: KernelDiff, shown: Sequence[KernelDelta], markdown: bool) -> list[list[str]]:
    rows = []
    for row in shown:
        cells = _row_cells(row)
        if markdown:
            cells[7] = _code(row.name)
            cells[8] = _code(cells[8]) if cells[8] else ""
        rows.append(cells)
        for kernel in row.kernels[:3] if row.stands_out else ():
            sub = _row_cells(kernel, indent="  └ ")
            if markdown:
                sub[7] = "└ " + _code(kernel.name)
            rows.append(sub)
    return rows


def format_diff(
    diff: KernelDiff, fmt: str = "table", *, top: int = 20, good: str = "GOOD", bad: str = "BAD"
) -> str:
    """`table` for a terminal, `json` (the stable contract), `markdown` for a PR comment."""
    if fmt == "json":
        return json.dumps({"good": good, "bad": bad, **diff.to_json()}, indent=2, allow_nan=False)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    shown: Sequence[KernelDelta] = diff.kernels[:top] if top > 0 else diff.kernels
    hidden = len(diff.kernels) - len(shown)
    more = f"{hidden} more rows with smaller changes" if hidden else ""
    headers = (*HEADERS[:3], f"{good} us", f"{bad} us", *HEADERS[5:7], diff.unit, HEADERS[8])
    # No source column where no row has one (vLLM's profiles).
    width = len(headers) if any(row.source for row in diff.kernels) else len(headers) - 1
    headers = headers[:width]
    lead = contributors(diff, _code if fmt == "markdown" else str)
    if fmt == "markdown":
        rows = [r[:width] for r in _table_rows(diff, shown, markdown=True)]
        lines = [
            f"### Where the time went: {markdown_cell(good)} -> {markdown_cell(bad)}",
            "",
            headline(diff, good, bad) + ".",
            "",
        ]
        if lead:
            lines += [f"- {line}." for line in lead.splitlines()] + [""]
        lines += [f"_Note: {note}._" for note in diff.notes]
        lines += [""] if diff.notes else []
        lines += [markdown_table(headers, rows) if rows else "No rows."]
        if more:
            lines += ["", f"_{more}._"]
        return "\n".join(lines)
    lines = [headline(diff, good, bad)]
    if lead:
        lines += lead.splitlines()
    lines += [f"note: {note}" for note in diff.notes]
    lines.append(text_table(headers, [r[:width] for r in _table_rows(diff, shown, markdown=False)]))
    if more:
        lines.append(f"({more})")
    return "\n".join(lines)


def explain_record(
    diff: KernelDiff,
    good: str,
    bad: str,
    profile_dir: str | os.PathLike[str],
    *,
    with_commits: bool = False,
) -> ExplainRecord:
    """The diff as the verdicts file keeps it: headline and 15-row table (commits shown by
    8 characters), the top contributors, the profiles; `with_commits`: GOOD and BAD too."""
    return ExplainRecord(
        headline=headline(diff, good[:8], bad[:8]),
        table=format_diff(diff, "table", top=15, good=good[:8], bad=bad[:8]),
        top5=diff.top5,
        explained_top5_pct=diff.explained_top5_pct,
        total_delta_us=diff.total_delta_us,
        profile_dir=str(Path(profile_dir)),
        commits=(good, bad) if with_commits else None,
    )


# --- measuring both commits ---------------------------------------------------------------


@dataclass(frozen=True)
class Explained:
    """A diff measured by fwdasv: which suite case, at which commits, where the profiles are."""

    suite: str
    case: str
    good: str
    bad: str
    profile_dir: str
    diff: KernelDiff


def explain_commits(
    project: AsvProject,
    good: str,
    bad: str,
    bench: str,
    case: str | None,
    profile_dir: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] | None = None,
    bench_echo: Callable[[str], None] | None = None,
    rounds: int = DEFAULT_ROUNDS,
) -> Explained:
    """Profile one suite case at GOOD and at BAD, `rounds` bench processes each, interleaved
    (GOOD BAD GOOD BAD ...), each in asv's environment for that commit, and diff them.

    The profiled runs are runs of their own (the engine's or vLLM's
    `--profile-dir`, after the timed replays of that process); no tracked
    latency ever comes from them. Interleaving puts both commits in the same
    minutes of this machine, and the spread of each side's processes is the
    noise band each row's change is judged against (`diff_rounds`). When the
    verdicts file says confirm left this step undecided, the diff says the step
    is not established.
    """
    from fwdasv.analysis.remeasure import Remeasurer, resolve, resolve_commits

    if rounds < 1:
        raise ProfileError(f"rounds must be at least 1, got {rounds}")
    target = resolve(project, bench, case)
    good_hash, bad_hash = resolve_commits(project, good, bad)
    root = (
        Path(profile_dir)
        if profile_dir is not None
        else (
            project.results_dir.parent
            / ".fwdasv-explain"
            / f"{good_hash[:8]}-{bad_hash[:8]}-{target.suite}-{safe_case_name(target.case)}"
        )
    )
    measurer = Remeasurer(project, target, root, echo=echo, bench_echo=bench_echo)
    paths: dict[str, list[Path]] = {"good": [], "bad": []}
    for number in range(1, rounds + 1):
        for label, commit in (("good", good_hash), ("bad", bad_hash)):
            name = f"{label}-{commit[:8]}" + (f"-{number}" if rounds > 1 else "")
            directory = root / name
            if echo is not None:
                echo(
                    f"profiling {target.suite}({target.case}) at {label.upper()} {commit[:8]}"
                    + (f" ({number}/{rounds})" if rounds > 1 else "")
                )
            measurer.run(commit, name, extra=("--profile-dir", str(directory)))
            paths[label].append(profile_paths(directory, target.case)[0])
    diff = diff_rounds(
        [load_summary(path) for path in paths["good"]],
        [load_summary(path) for path in paths["bad"]],
    )
    note = undecided_note(project, target.suite, target.case, good_hash, bad_hash)
    if note:
        diff = with_note(diff, note)
    return Explained(target.suite, target.case, good_hash, bad_hash, str(root), diff)


def undecided_note(project: AsvProject, suite: str, case: str, good: str, bad: str) -> str:
    """What to say when the newest confirmation of a step holding GOOD..BAD is undecided."""
    from fwdasv.analysis.verdict_file import VERDICTS_FILE, VerdictFileError, read_verdicts

    try:
        stored = read_verdicts(project.results_dir / VERDICTS_FILE)
    except (VerdictFileError, OSError):
        return ""
    newest = None
    for verdict in stored.by_finding.values():
        ident = verdict.ident
        if not ident.benchmark.startswith(suite) or ident.case != case:
            continue
        record = verdict.confirmation
        commits = {verdict.before_commit, *verdict.range_commits}
        if record is not None:
            commits |= {record.a_commit, record.b_commit}
        if bad not in commits and good not in commits:
            continue
        if newest is None or verdict.recorded_at >= newest.recorded_at:
            newest = verdict
    if newest is None or newest.confirmation is None:
        return ""
    record = newest.confirmation
    if record.figures.status != Status.UNDECIDED:
        return ""
    return (
        f"the step is not established: confirm left {record.a_commit[:8]}..{record.b_commit[:8]} "
        f"undecided ({record.summary}); this diff says what runs differently, not that the "
        "step is real"
    )
