"""The GOOD -> BAD diff of one case's kernel (GPU) or op (CPU) profiles, told apart from noise.

Inputs: kernel summaries (`fwdasv.core.kernels`) of one case, one per profiled bench
process a side (several: `explain_commits` interleaves them; one: two files). Output: a
`KernelDiff`: one `KernelDelta` per kernel (op) name (`fwdasv.analysis.explain.kernel_delta`:
its medians per forward, noise band and what changed), each that stands out with its
share; one total that adds up (slower + faster + within the noise); and a verdict,
worse / improved / unchanged, that follows only the rows that stand out, summed per
process. `mark_changed` marks the rows whose call the commit changed, by line (`Changes`:
the first frame of the call's stack on a changed line names it). Pure: no files, no
processes. How each row and the verdict are decided: docs/verdicts.md ("explain").
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from fwdasv.analysis.explain.kernel_delta import (
    KernelDelta,
    Side,
    delta_rows,
    match_by_name,
    median,
    spread,
)
from fwdasv.analysis.rules.status import CompareStatus
from fwdasv.core.kernels import KernelRow, KernelSummary, ProfileError, SourceFrame

TOP_EXPLAINED = 5
MIN_ROW_PCT = 0.5  # a time-only change stands out when it is at least this % of GOOD's op time
DEFAULT_ROUNDS = 3  # profiled processes a side


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
    verdict: CompareStatus = CompareStatus.UNCHANGED
    notes: tuple[str, ...] = ()
    change_link: str | None = None  # the commit's diff, where the project has a commit URL

    @property
    def slower(self) -> bool:
        """What stands out makes BAD slower than GOOD, beyond its noise."""
        return self.verdict == CompareStatus.WORSE

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

    def to_json(self) -> dict[str, object]:
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
    sides: dict[str, tuple[Side, Side]],
    net: float,
    rounds: tuple[int, int],
) -> tuple[CompareStatus, float | None]:
    """The rows that stand out, summed per process: a slowdown when every BAD process spends
    more on them than every GOOD one (the other way round: a speed-up); and the larger
    spread of those sums (None with one process a side)."""
    standing = [r.name for r in rows if r.stands_out]
    per_good = [sum(sides[n][0].values[i] for n in standing) for i in range(rounds[0])]
    per_bad = [sum(sides[n][1].values[j] for n in standing) for j in range(rounds[1])]
    single = rounds[0] < 2 or rounds[1] < 2
    net_noise = None if single else round(max(spread(per_good), spread(per_bad)), 2)
    verdict = CompareStatus.UNCHANGED
    if standing and net > 0 and min(per_bad) > max(per_good):
        verdict = CompareStatus.WORSE
    elif standing and net < 0 and max(per_bad) < min(per_good):
        verdict = CompareStatus.IMPROVED
    return verdict, net_noise


def diff_rounds(goods: Sequence[KernelSummary], bads: Sequence[KernelSummary]) -> KernelDiff:
    """GOOD's and BAD's profiles (one per process) diffed; see the module docstring."""
    _check_one_device(goods, bads)
    by_op = all(s.ops for s in (*goods, *bads))
    sums_good = [sum(row.us for row in _rows_of(s, by_op)) for s in goods]
    sums_bad = [sum(row.us for row in _rows_of(s, by_op)) for s in bads]
    sides = match_by_name([_rows_of(s, by_op) for s in goods], [_rows_of(s, by_op) for s in bads])
    busy_before = sum(median(g.values) for g, _ in sides.values())
    unshared = delta_rows(sides, by_op, MIN_ROW_PCT / 100 * busy_before)
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
    busy_after = sum(median(b.values) for _, b in sides.values())
    good0, bad0 = goods[0], bads[0]
    return KernelDiff(
        kernels=tuple(rows),
        total_delta_us=total,
        total_delta_pct=round(100 * total / busy_before, 2) if busy_before > 0 else 0.0,
        explained_top5_pct=min(explained, 100.0),
        top5=top5,
        unit="op (GPU)" if by_op else good0.unit,
        span_before_us=round(median([s.span_us for s in goods]), 2),
        span_after_us=round(median([s.span_us for s in bads]), 2),
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


def in_changed_file(file: str, changed: Iterable[str]) -> bool:
    """Whether a source file (named as installed: `vllm/...`, `model.py`, `tinylm/x.py`) is
    one of the repository's `changed` paths, or the tail of one (`src/tinylm/x.py`)."""
    return any(path == file or path.endswith("/" + file) for path in changed)


@dataclass(frozen=True)
class Changes:
    """What a commit changed, by line: per repository path, BAD's lines it added or changed
    (`after`) and GOOD's it removed or changed (`before`), from `git diff -U0 GOOD BAD`."""

    after: Mapping[str, frozenset[int]]
    before: Mapping[str, frozenset[int]]

    @classmethod
    def parse(cls, diff_text: str) -> Changes:
        """`git diff -U0`'s hunks; a hunk that only removes lines marks the lines either
        side of where they were."""
        after: dict[str, set[int]] = {}
        before: dict[str, set[int]] = {}
        old_path = new_path = ""
        for line in diff_text.splitlines():
            if line.startswith("--- "):
                old_path = line[4:].removeprefix("a/")
            elif line.startswith("+++ "):
                new_path = line[4:].removeprefix("b/")
            elif line.startswith("@@"):
                match = _HUNK.match(line)
                if match is None:
                    continue
                old_at, old_n, new_at, new_n = (
                    int(g) if g is not None else 1 for g in match.groups()
                )
                before.setdefault(old_path, set()).update(_span(old_at, old_n))
                after.setdefault(new_path, set()).update(_span(new_at, new_n))
        return cls(
            {k: frozenset(v) for k, v in after.items()},
            {k: frozenset(v) for k, v in before.items()},
        )


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _span(at: int, count: int) -> range:
    """The lines a hunk side covers; none (a removal's other side): the lines around it."""
    return range(at, at + count) if count else range(max(at, 1), at + 2)


def _on_changed_line(frame: SourceFrame, side: Mapping[str, frozenset[int]]) -> bool:
    """Whether `frame` (its file named as installed) is on a changed line of `side`."""
    return any(
        frame.line in lines
        for path, lines in side.items()
        if path == frame.file or path.endswith("/" + frame.file)
    )


def _changed_frame(source: SourceFrame, side: Mapping[str, frozenset[int]]) -> SourceFrame | None:
    """The first frame from the call site outwards (its `stack`) on a changed line: where a
    commit added a call to an unchanged helper, the caller's line, not the helper's."""
    for depth, frame in enumerate((source, *source.stack)):
        if _on_changed_line(frame, side):
            return replace(frame, calls=source.calls, stack=source.stack[depth:])
    return None


def mark_changed(
    diff: KernelDiff, changed: Sequence[str] | Changes, link: str | None = None
) -> KernelDiff:
    """The diff with each row that stands out (and kernel under it) marked `changed_here`
    where the commit changed its call: with `Changes` (by line), the first frame of its
    call stack on a changed line becomes its source; with paths only (`git diff
    --name-only`), a source in a changed file. `link`: the commit's diff, where the project
    has a commit URL."""

    def marked(row: KernelDelta) -> KernelDelta:
        kernels = tuple(marked(kernel) for kernel in row.kernels)
        source = row.source
        if not row.stands_out or source is None:
            return replace(row, changed_here=False, kernels=kernels)
        if not isinstance(changed, Changes):
            here = in_changed_file(source.file, changed)
            return replace(row, changed_here=here, kernels=kernels)
        after = row.source_after is not None
        frame = _changed_frame(source, changed.after if after else changed.before)
        if frame is None:
            return replace(row, changed_here=False, kernels=kernels)
        if after:
            return replace(row, changed_here=True, kernels=kernels, source_after=frame)
        return replace(row, changed_here=True, kernels=kernels, source_before=frame)

    return replace(diff, kernels=tuple(marked(row) for row in diff.kernels), change_link=link)
