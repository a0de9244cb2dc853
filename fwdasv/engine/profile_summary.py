"""Per-forward kernel (GPU) and op (CPU) rows from a profiler's events: pure, no torch.

`summarize_gpu` takes a chrome trace's events of N graph replays and returns vLLM's
`KernelSummary` (mean per forward, each replay's first `skip` activities, the state
restore's copies, reported apart as `pre_forward_*`); `summarize_cpu` takes the labelled
eager forwards (`OpRun`) and returns median rows, since one preemption on a shared host
would move a mean by milliseconds. `with_cpu_sources` and `with_gpu_ops` add where each
row was called, from the attribution forward (`fwdasv.engine.attribute`): a graph's
kernels are matched to the eager forward's launches in order, the rest by kernel name, and
what only one side launched is reported unmatched (`match_launches`).
"""

from __future__ import annotations

import difflib
import statistics
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from fwdasv.core.errors import UserError
from fwdasv.core.kernels import DEVICE_CPU, DEVICE_CUDA, KernelRow, KernelSummary, Unmatched
from fwdasv.engine import attribute
from fwdasv.engine.attribute import Attributed, Call
from fwdasv.engine.kernel_names import short_name

# What vLLM counts as a forward's GPU activity (kernels, copies, memsets).
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
NO_OP = "(no aten op)"
# The op row of what the graph launched and the attribution's eager forward did not.
UNMATCHED = "(unmatched: not in the eager forward)"
# The longest full kernel name a row keeps as its `example`.
_EXAMPLE_CHARS = 300


class ProfileRunError(UserError, RuntimeError):
    """The profiler recorded nothing usable (e.g. another profiler holds CUPTI)."""


@dataclass
class _Total:
    us: float = 0.0
    calls: int = 0
    example: str = ""


class _Tally:
    """Per-name totals over several forwards, turned into per-forward rows."""

    def __init__(self) -> None:
        self.totals: dict[str, _Total] = {}

    def add(self, name: str, us: float, example: str) -> None:
        total = self.totals.setdefault(name, _Total())
        total.us += us
        total.calls += 1
        total.example = total.example or example[:_EXAMPLE_CHARS]

    def rows(self, forwards: int) -> tuple[KernelRow, ...]:
        """Mean time and (floored, as vLLM) calls per forward; pct of the summed time."""
        grand = sum(total.us for total in self.totals.values())
        rows = [
            KernelRow(
                name=name,
                us=round(total.us / forwards, 2),
                pct=round(100 * total.us / grand, 2) if grand > 0 else 0.0,
                calls=total.calls // forwards,
                example=total.example,
            )
            for name, total in self.totals.items()
        ]
        rows.sort(key=lambda row: (-row.us, row.name))
        return tuple(rows)


@dataclass(frozen=True)
class Activity:
    """One GPU activity of a chrome trace (a kernel, copy or memset): start and length in µs,
    the numbers as the trace has them."""

    name: str
    category: str
    ts: float
    dur: float


def gpu_activities(events: Iterable[Mapping[str, object]]) -> list[Activity]:
    """A chrome trace's GPU activities (kernels, copies, memsets), in time order."""
    found = []
    for event in events:
        if event.get("cat") in GPU_CATEGORIES and "dur" in event:
            ts, dur = event["ts"], event["dur"]
            assert isinstance(ts, (int, float)) and isinstance(dur, (int, float)), event
            found.append(Activity(str(event["name"]), str(event["cat"]), ts, dur))
    return sorted(found, key=lambda activity: activity.ts)


def activity_name(activity: Activity) -> str:
    """The row of a GPU activity: a kernel's short name, a copy's or memset's own name."""
    return short_name(activity.name) if activity.category == "kernel" else activity.name


def summarize_gpu(events: Iterable[Mapping[str, object]], replays: int, skip: int) -> KernelSummary:
    """Per-forward kernel rows from the chrome-trace events of `replays` graph replays.

    Each replay first runs `skip` activities that are not the forward (the
    state restore's copies); they go to `pre_forward_us` and
    `pre_forward_kernels`, not to the rows.
    """
    activities = gpu_activities(events)
    if not activities:
        raise ProfileRunError(
            "No GPU activity recorded. Another profiler (e.g. nsys) may hold CUPTI; "
            "don't combine --profile-dir with it"
        )
    if len(activities) % replays:
        raise ProfileRunError(
            f"{len(activities)} GPU activities don't split into {replays} replays: "
            "was other GPU work running in this process?"
        )
    per_replay = len(activities) // replays
    if per_replay <= skip:
        raise ProfileRunError(f"{per_replay} GPU activities per replay, {skip} to skip")
    forward_tally, restore_tally = _Tally(), _Tally()
    spans, busy, pre = [], [], []
    for index in range(replays):
        chunk = activities[index * per_replay : (index + 1) * per_replay]
        restore, forward = chunk[:skip], chunk[skip:]
        pre.append(sum(a.dur for a in restore))
        spans.append(max(a.ts + a.dur for a in forward) - min(a.ts for a in forward))
        busy.append(sum(a.dur for a in forward))
        for tally, part in ((restore_tally, restore), (forward_tally, forward)):
            for activity in part:
                tally.add(activity_name(activity), activity.dur, activity.name)
    return KernelSummary(
        replays=replays,
        # First to last forward activity; busy can exceed it when streams overlap.
        span_us=round(statistics.median(spans), 2),
        busy_us=round(statistics.median(busy), 2),
        pre_forward_us=round(statistics.median(pre), 2),
        activities=per_replay - skip,
        kernels=forward_tally.rows(replays),
        device=DEVICE_CUDA,
        restore_activities=skip,
        pre_forward_kernels=restore_tally.rows(replays),
    )


@dataclass(frozen=True)
class OpRun:
    """One profiled eager forward on CPU: its wall span, its restore, and every op inside it.

    `ops` and `restore_ops` are (aten op name, self CPU time in us), one per op
    event at any depth (self times add up without double counting).
    """

    span_us: float
    pre_forward_us: float
    ops: tuple[tuple[str, float], ...]
    restore_ops: tuple[tuple[str, float], ...] = ()


def summarize_cpu(runs: Sequence[OpRun]) -> KernelSummary:
    """Per-forward op rows (self CPU time) over eager forwards; the restores are left out.

    A row's `us` and `calls` are medians over the forwards of that op's per-forward
    total, not vLLM's mean: a CPU host is shared, and one preemption inside one op of
    one forward would otherwise move that op by milliseconds. `busy_us` is the median
    of the ops' summed self time; `span_us` the forward's wall time, which also holds
    the Python between ops.
    """
    if not runs:
        raise ValueError("no profiled forwards to summarize")
    per_run: list[dict[str, list[float]]] = []
    for run in runs:
        totals: dict[str, list[float]] = {}
        for name, us in run.ops:
            entry = totals.setdefault(name, [0.0, 0])
            entry[0] += us
            entry[1] += 1
        per_run.append(totals)
    names = {name for totals in per_run for name in totals}
    medians = {
        name: (
            statistics.median(t.get(name, [0.0, 0])[0] for t in per_run),
            statistics.median_low(int(t.get(name, [0.0, 0])[1]) for t in per_run),
        )
        for name in names
    }
    grand = sum(us for us, _ in medians.values())
    rows = sorted(
        (
            KernelRow(
                name, round(us, 2), round(100 * us / grand, 2) if grand > 0 else 0.0, calls, name
            )
            for name, (us, calls) in medians.items()
        ),
        key=lambda row: (-row.us, row.name),
    )
    restore_tally = _Tally()
    for run in runs:
        for name, us in run.restore_ops:
            restore_tally.add(name, us, name)
    return KernelSummary(
        replays=len(runs),
        span_us=round(statistics.median(run.span_us for run in runs), 2),
        busy_us=round(statistics.median(sum(us for _, us in run.ops) for run in runs), 2),
        pre_forward_us=round(statistics.median(run.pre_forward_us for run in runs), 2),
        activities=statistics.median_low(len(run.ops) for run in runs),
        kernels=tuple(rows),
        device=DEVICE_CPU,
        measure="self_cpu_time_total of aten ops, median over forwards",
        pre_forward_kernels=restore_tally.rows(len(runs)),
    )


def _memcpy_as_one(name: str) -> str:
    # A graph may run a memcpy node as a copy ("Memcpy DtoD") or as a kernel ("memcpy32_post").
    return "memcpy" if "memcpy" in name.lower() else name


def with_cpu_sources(
    summary: KernelSummary, found: Attributed, calls: Sequence[Call]
) -> KernelSummary:
    """The CPU rows with where they were called and on what shapes."""
    rows = tuple(
        replace(
            row,
            sources=attribute.frames_of(found.op_sources.get(row.name, {}), calls),
            shapes=attribute.top_shapes(found.op_shapes.get(row.name)),
        )
        for row in summary.kernels
    )
    attributed = sum(1 for row in rows if row.sources)
    return replace(
        summary,
        kernels=rows,
        attribution=f"eager forward: {attributed}/{len(rows)} ops with a source",
    )


Launch = tuple[str, int | None]  # the aten op that launched an activity, and its call


@dataclass(frozen=True)
class Matching:
    """Each of a replay's activities tied to an eager launch (None: the eager forward made
    no such launch), how, and what only one side launched."""

    launches: tuple[Launch | None, ...]
    how: str
    unmatched: Unmatched


def match_launches(names: Sequence[str], eager: Sequence[tuple[str, str, int | None]]) -> Matching:
    """Tie a replay's activities (`names`, in launch order) to the eager forward's launches
    (name, op, call): in order first (one stream: the graph replays what the eager forward
    launched), then, where the order differs, each left-over activity to the next left-over
    eager launch of the same kernel name. An activity with no such launch, and an eager
    launch left over, is unmatched: no op or line is guessed for it."""
    graph_keys = [_memcpy_as_one(n) for n in names]
    eager_keys = [_memcpy_as_one(e[0]) for e in eager]
    matcher = difflib.SequenceMatcher(a=graph_keys, b=eager_keys, autojunk=False)
    by_index: list[Launch | None] = [None] * len(names)
    used = [False] * len(eager)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            _, op, call = eager[block.b + k]
            by_index[block.a + k] = (op, call)
            used[block.b + k] = True
    in_order = sum(used)
    left: dict[str, deque[int]] = {}
    for j, key in enumerate(eager_keys):
        if not used[j]:
            left.setdefault(key, deque()).append(j)
    for i, key in enumerate(graph_keys):
        if by_index[i] is None and left.get(key):
            j = left[key].popleft()
            by_index[i] = (eager[j][1], eager[j][2])
            used[j] = True
    by_name = sum(used) - in_order
    only_graph = Counter(names[i] for i, entry in enumerate(by_index) if entry is None)
    only_eager = Counter(eager[j][0] for j in range(len(eager)) if not used[j])
    unmatched = Unmatched(
        tuple(sorted(only_graph.items(), key=lambda kv: (-kv[1], kv[0]))),
        tuple(sorted(only_eager.items(), key=lambda kv: (-kv[1], kv[0]))),
    )
    if in_order == len(names) == len(eager):
        how = "sequence"
    else:
        how = (
            f"partly by name: {in_order} of the graph's {len(names)} activities a forward "
            f"matched the eager forward's {len(eager)} in order, {by_name} by kernel name"
        )
        if unmatched:
            how += (
                f"; unmatched: {sum(only_graph.values())} the graph launched and the eager "
                f"forward did not, {sum(only_eager.values())} the reverse"
            )
    return Matching(tuple(by_index), how, unmatched)


def eager_launches(found: Attributed, calls: Sequence[Call]) -> list[tuple[str, str, int | None]]:
    """The attribution forward's GPU activities in order: (row name, op, call). The op is the
    one the code under test called (the dispatch mode's: `aten::_to_copy` for `.float()`),
    else the op event that launched it (kineto's External id: the innermost, `aten::copy_`)."""
    return [
        (
            activity_name(Activity(str(e["name"]), str(e["cat"]), 0.0, 0.0)),
            calls[call].op if call is not None and 0 <= call < len(calls) else op,
            call,
        )
        for e, op, call in found.gpu
    ]


def graph_replays(
    events: Iterable[Mapping[str, object]], replays: int, skip: int
) -> list[list[Activity]]:
    """Each replay's forward activities (its first `skip`, the restore's, left out)."""
    activities = gpu_activities(events)
    per_replay = len(activities) // replays
    return [activities[i * per_replay + skip : (i + 1) * per_replay] for i in range(replays)]


def with_gpu_ops(
    summary: KernelSummary,
    events: Iterable[Mapping[str, object]],
    skip: int,
    found: Attributed,
    calls: Sequence[Call],
) -> KernelSummary:
    """The kernel rows with their launching op and sources, and `ops`: each launching aten
    op with its kernels under it, from the graph replays' times and the eager forward's
    launches (`match_launches`); what only one side launched in `unmatched`."""
    graph = graph_replays(events, summary.replays, skip)
    matching = match_launches([activity_name(a) for a in graph[0]], eager_launches(found, calls))
    ops, kernel_weights, kernel_ops, unmatched_calls = _op_rows(
        graph, matching.launches, summary.replays, found, calls
    )
    rows = tuple(
        replace(
            row,
            sources=attribute.frames_of(kernel_weights.get(row.name, {}), calls),
            op=_heaviest(kernel_ops.get(row.name)),
            unmatched=unmatched_calls.get(row.name, 0),
        )
        for row in summary.kernels
    )
    return replace(
        summary, kernels=rows, ops=ops, attribution=matching.how, unmatched=matching.unmatched
    )


def _heaviest(weights: Mapping[str, float] | None) -> str:
    if not weights:
        return ""
    return min(weights, key=lambda op: (-weights[op], op))


def _op_rows(
    graph: Sequence[Sequence[Activity]],
    launches: Sequence[Launch | None],
    replays: int,
    found: Attributed,
    calls: Sequence[Call],
) -> tuple[
    tuple[KernelRow, ...], dict[str, dict[int, float]], dict[str, dict[str, float]], Counter[str]
]:
    """Each launching op's row (its kernels under it, per forward; `UNMATCHED` holds what the
    eager forward did not launch), each kernel's time per call site (for the kernel rows'
    sources) and per op, and each kernel's unmatched launches per forward."""
    op_us: dict[str, float] = {}
    op_calls: Counter[str] = Counter()
    op_weights: dict[str, dict[int, float]] = {}
    kernel_weights: dict[str, dict[int, float]] = {}
    kernel_ops: dict[str, dict[str, float]] = {}
    sub: dict[tuple[str, str], _Total] = {}
    for chunk in graph:
        for activity, launch in zip(chunk, launches, strict=True):
            op, call = launch if launch is not None else (UNMATCHED, None)
            op = op or NO_OP
            name = activity_name(activity)
            op_us[op] = op_us.get(op, 0.0) + activity.dur
            op_calls[op] += 1
            if launch is not None:
                per_op = kernel_ops.setdefault(name, {})
                per_op[op] = per_op.get(op, 0.0) + activity.dur
            total = sub.setdefault((op, name), _Total(example=activity.name[:_EXAMPLE_CHARS]))
            total.us += activity.dur
            total.calls += 1
            if call is not None:
                for weights in (op_weights.setdefault(op, {}), kernel_weights.setdefault(name, {})):
                    weights[call] = weights.get(call, 0.0) + activity.dur
    unmatched_calls: Counter[str] = Counter()
    if graph:
        for activity, launch in zip(graph[0], launches, strict=True):
            if launch is None:
                unmatched_calls[activity_name(activity)] += 1
    grand = sum(op_us.values())

    def pct(us: float) -> float:
        return round(100 * us / grand, 2) if grand > 0 else 0.0

    ops = []
    for op, us in op_us.items():
        kernels = sorted(
            (
                KernelRow(name, round(t.us / replays, 2), pct(t.us), t.calls // replays, t.example)
                for (owner, name), t in sub.items()
                if owner == op
            ),
            key=lambda row: (-row.us, row.name),
        )
        ops.append(
            KernelRow(
                op,
                round(us / replays, 2),
                pct(us),
                op_calls[op] // replays,
                op,
                sources=attribute.frames_of(op_weights.get(op, {}), calls),
                shapes=attribute.top_shapes(found.op_shapes.get(op)),
                kernels=tuple(kernels),
            )
        )
    ops.sort(key=lambda row: (-row.us, row.name))
    return tuple(ops), kernel_weights, kernel_ops, unmatched_calls
