"""Kernel (GPU) and op (CPU) profiles of a prepared forward, in runs of their own.

After a case is timed, `profile_case` runs the same prepared forward a few more
times under `torch.profiler` and writes vLLM's `<case>.rank<r>.kernels.json`
and `.trace.json.gz` (`fwdasv.core.kernels`), so one diff serves both
backends. These runs are never timed ones: the profiler's overhead must not
reach a latency.

On CUDA the forward is captured as `capture.py` captures it (the state restore,
then the forward, in one graph) and a few replays are traced. The restore's
copies are excluded as vLLM's bench excludes them: the GPU activities, in time
order, split evenly into replays, and the first `skip` of each replay (one copy
per non-empty state view) are reported apart (`pre_forward_us`,
`pre_forward_kernels`).

On CPU the forward runs eagerly; each run's restore and forward sit in
labelled ranges (`record_function`), and a row is an aten op's self CPU time
per forward (median over the forwards) over the ops inside the forward ranges
only. The trace keeps the restore ranges, labelled.

Then one more eager forward, under the profiler and a dispatch mode, says where
each row was called (`fwdasv.engine.attribute`): a CPU row's `sources` and
`shapes`; on a GPU each kernel's launching aten op and source, matched to the
graph's kernels by their order (`attribution: sequence`; what does not line up
by kernel name, when the eager forward launches other kernels than the graph),
and the `ops` rows with
their kernels under them. It is never timed, and a failure there leaves the
rows unattributed (`attribution` says why), never the profile failed.
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, record_function

from fwdasv.core.errors import UserError
from fwdasv.core.files import atomic_output, write_atomic
from fwdasv.core.kernels import (
    DEVICE_CPU,
    DEVICE_CUDA,
    KernelRow,
    KernelSummary,
    profile_paths,
)
from fwdasv.core.results import ProfileBlock
from fwdasv.engine import attribute
from fwdasv.engine.attribute import Attributed, Call, Root
from fwdasv.engine.capture import StateSnapshot, capture_forward, synchronize
from fwdasv.targets.base import PreparedForward

FORWARD_LABEL = "fwdasv::forward"
RESTORE_LABEL = "fwdasv::restore"
# What vLLM counts as a forward's GPU activity (kernels, copies, memsets).
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
# Rows of the `profile` block in the rank dict (vLLM's `top_kernels`).
TOP_KERNELS = 10
# Kernels named after a generic launcher are told apart by their first template argument.
_GENERIC_LAUNCHER = re.compile(r"(^|::)(device_kernel|Kernel|kernel|KernelWrapper)$")
# CuTe DSL kernel names carry per-shape layouts from these markers on.
_CUTE_DSL_LAYOUT = re.compile(r"_object_at_|_tensorptr")
_TEMPLATE_ARG_END = re.compile(r"[<>(,]")


# What libkineto prints on stderr at every profiler start and stop (and, on a box
# without a GPU, that it found none), whatever KINETO_LOG_LEVEL says.
KINETO_NOISE = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d [^\]]*\] |gpuGetDeviceCount failed")


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Run a profiler with file descriptor 2 captured; give back every line but kineto's
    noise (`KINETO_NOISE`) to stderr afterwards."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [
                line for line in captured.read().splitlines(True) if not KINETO_NOISE.search(line)
            ]
            if kept:
                sys.stderr.flush()
                os.write(2, b"".join(kept))


class ProfileRunError(UserError, RuntimeError):
    """The profiler recorded nothing usable (e.g. another profiler holds CUPTI)."""


@dataclass(frozen=True)
class ProfileOptions:
    """`replays`: traced graph replays (CUDA) or eager forwards (CPU); vLLM traces 3."""

    replays: int = 3

    def __post_init__(self) -> None:
        if self.replays < 1:
            raise ValueError(f"replays must be >= 1, got {self.replays}")


# --- kernel names ---------------------------------------------------------------------


def _opening_index(text: str, close: int, brackets: str, skip_parens: bool) -> int:
    """Index of the bracket that opens the one closing at `close`, or -1.

    With `skip_parens`, brackets inside parentheses do not count: template
    arguments hold `operator<`, `(8)>(0)` and function types.
    """
    opening, closing = brackets
    depth = parens = 0
    for index in range(close, -1, -1):
        char = text[index]
        if skip_parens and char in "()":
            parens += 1 if char == ")" else -1
        elif parens:
            continue
        elif char == closing:
            depth += 1
        elif char == opening:
            depth -= 1
            if depth == 0:
                return index
    return -1


def short_name(name: str) -> str:
    """The row a GPU kernel counts under, as vLLM groups them (its `name`; `example` keeps one
    full name): `void ns::foo<T, 4>(args)` -> `ns::foo`, with the return type, template and
    arguments dropped; a generic launcher (`cutlass::device_kernel<Op<...>>`) keeps its first
    template argument; a CuTe DSL kernel drops its layout suffix.
    """
    if name.startswith("kernel_cutlass_"):
        return _CUTE_DSL_LAYOUT.split(name, maxsplit=1)[0]
    head = name.strip()
    if head.endswith(")"):
        head = head[: max(_opening_index(head, len(head) - 1, "()", False), 0)].rstrip()
    template = ""
    if head.endswith(">"):
        start = _opening_index(head, len(head) - 1, "<>", True)
        if start > 0:
            head, template = head[:start], head[start + 1 : -1]
    words = head.split()
    base = words[-1] if words else name
    if template and _GENERIC_LAUNCHER.search(base):
        first = _TEMPLATE_ARG_END.split(template, maxsplit=1)[0].strip()
        if first:
            return f"{base}<{first.removeprefix('void ')}>"
    return base


# --- summaries (pure) -----------------------------------------------------------------


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
        total.example = total.example or example[:300]

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
            sources=attribute.frames_of(found.op_sources.get(row.name, Counter()), calls),
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


NO_OP = "(no aten op)"


def with_gpu_ops(
    summary: KernelSummary,
    events: Iterable[Mapping[str, object]],
    skip: int,
    found: Attributed,
    calls: Sequence[Call],
) -> KernelSummary:
    """The kernel rows with their sources, and `ops`: each launching aten op with its
    kernels under it, from the graph replays' times and the eager forward's launches."""
    activities = gpu_activities(events)
    replays = summary.replays
    per_replay = len(activities) // replays
    graph = [activities[i * per_replay + skip : (i + 1) * per_replay] for i in range(replays)]
    eager = [
        (
            activity_name(Activity(str(e["name"]), str(e["cat"]), 0.0, 0.0)),
            # No op event with the launch's External id: the op the dispatch mode saw.
            op or (calls[call].op if call is not None and 0 <= call < len(calls) else ""),
            call,
        )
        for e, op, call in found.gpu
    ]
    names = [activity_name(a) for a in graph[0]]
    # In order first (one stream: the graph replays what the eager forward launched);
    # what does not line up, by kernel name.
    matcher = difflib.SequenceMatcher(
        a=[_memcpy_as_one(n) for n in names],
        b=[_memcpy_as_one(e[0]) for e in eager],
        autojunk=False,
    )
    by_index: list[tuple[str, int | None] | None] = [None] * len(names)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            _, op, call = eager[block.b + k]
            by_index[block.a + k] = (op, call)
    matched = sum(1 for entry in by_index if entry is not None)
    if matched == len(names) == len(eager):
        how = "sequence"
    else:
        how = (
            f"partly by name: {matched} of the graph's {len(names)} activities a forward "
            f"matched the eager forward's {len(eager)} in order, the rest by kernel name"
        )
    common: dict[str, Counter[tuple[str, int | None]]] = {}
    for name, op, call in eager:
        common.setdefault(_memcpy_as_one(name), Counter())[(op, call)] += 1
    for index, entry in enumerate(by_index):
        if entry is None:
            options = common.get(_memcpy_as_one(names[index]))
            by_index[index] = options.most_common(1)[0][0] if options else (NO_OP, None)
    pairs = [entry for entry in by_index if entry is not None]
    op_us: dict[str, float] = {}
    op_calls: Counter[str] = Counter()
    op_weights: dict[str, Counter[int]] = {}
    kernel_weights: dict[str, Counter[int]] = {}
    sub: dict[tuple[str, str], list[Any]] = {}
    for chunk in graph:
        for activity, (op, call) in zip(chunk, pairs, strict=True):
            op = op or NO_OP
            name = activity_name(activity)
            op_us[op] = op_us.get(op, 0.0) + activity.dur
            op_calls[op] += 1
            entry = sub.setdefault((op, name), [0.0, 0, activity.name])
            entry[0] += activity.dur
            entry[1] += 1
            if call is not None:
                op_weights.setdefault(op, Counter())[call] += activity.dur
                kernel_weights.setdefault(name, Counter())[call] += activity.dur
    grand = sum(op_us.values())

    def pct(us: float) -> float:
        return round(100 * us / grand, 2) if grand > 0 else 0.0

    ops = []
    for op, us in op_us.items():
        kernels = sorted(
            (
                KernelRow(name, round(t / replays, 2), pct(t), n // replays, example[:300])
                for (owner, name), (t, n, example) in sub.items()
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
                sources=attribute.frames_of(op_weights.get(op, Counter()), calls),
                shapes=attribute.top_shapes(found.op_shapes.get(op)),
                kernels=tuple(kernels),
            )
        )
    ops.sort(key=lambda row: (-row.us, row.name))
    rows = tuple(
        replace(row, sources=attribute.frames_of(kernel_weights.get(row.name, Counter()), calls))
        for row in summary.kernels
    )
    return replace(summary, kernels=rows, ops=tuple(ops), attribution=how)


# --- profiled runs --------------------------------------------------------------------


def _trace_graph_replays(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    device: torch.device,
    replays: int,
    case_name: str,
) -> torch.profiler.profile:
    """Capture the step the timed runs replay (`capture_forward`), then trace `replays` replays."""
    forward = prepared.forward
    with torch.inference_mode():
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            # Per-stream init, cuBLAS workspaces and autotuning happen outside capture.
            snapshot.restore()
            forward()
            snapshot.restore()
        stream.synchronize()
        # Held while the graph replays: the graph records its events (freed, replay crashes).
        captured = capture_forward(forward, snapshot, stream)
        captured.graph.replay()
        synchronize(device)
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        with (
            quiet_kineto(),
            torch.profiler.profile(activities=activities) as prof,
            torch.cuda.nvtx.range(f"forward/{case_name}"),
        ):
            for _ in range(replays):
                captured.graph.replay()
                synchronize(device)
        del captured
    return prof


# What torch's profiler library (kineto) writes to the process's stderr around a CPU
# profile, which says nothing to the user: its USDT probe lines, and a CUDA build's
# failed GPU count on a machine without GPUs.
PROFILER_NOISE = re.compile(r"^USDT:|gpuGetDeviceCount failed")


@contextlib.contextmanager
def quiet_profiler_stderr(noise: re.Pattern[str] = PROFILER_NOISE) -> Iterator[None]:
    """File descriptor 2 caught for the block (kineto writes there from C++); its lines
    are written back afterwards, less those `noise` matches."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [
                line
                for line in caught.read().decode(errors="replace").splitlines(keepends=True)
                if not noise.search(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def _trace_eager_forwards(
    prepared: PreparedForward, snapshot: StateSnapshot, replays: int
) -> torch.profiler.profile:
    forward = prepared.forward
    with torch.inference_mode():
        snapshot.restore()
        forward()  # lazy init outside the profile
        with quiet_kineto(), torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(replays):
                with record_function(RESTORE_LABEL):
                    snapshot.restore()
                with record_function(FORWARD_LABEL):
                    forward()
    return prof


def _attribution_forward(
    prepared: PreparedForward, snapshot: StateSnapshot, device: torch.device, roots: Sequence[Root]
) -> tuple[list[dict[str, Any]], list[Call]]:
    """One eager forward under the profiler (shapes recorded) and the recording dispatch
    mode: the chrome trace's events and the calls, for `attribute.attribute_events`."""
    calls: list[Call] = []
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with torch.inference_mode():
        snapshot.restore()
        with (
            quiet_kineto(),
            torch.profiler.profile(activities=activities, record_shapes=True) as prof,
        ):
            with record_function(RESTORE_LABEL):
                snapshot.restore()
            with record_function(FORWARD_LABEL), attribute.recording_mode(roots, calls):
                prepared.forward()
            if device.type == "cuda":
                synchronize(device)
    return json.loads(chrome_trace(prof))["traceEvents"], calls


def _descendants(event: Any) -> list[Any]:
    found, stack = [], list(event.cpu_children)
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(child.cpu_children)
    return found


def op_runs(prof: torch.profiler.profile, replays: int) -> list[OpRun]:
    """The `replays` labelled forwards (and their restores) of a CPU profile, in order."""
    events = prof.events()

    def ranges(label: str) -> list[Any]:
        return sorted((e for e in events if e.name == label), key=lambda e: e.time_range.start)

    forwards, restores = ranges(FORWARD_LABEL), ranges(RESTORE_LABEL)
    assert len(forwards) == len(restores) == replays, (len(forwards), len(restores), replays)
    return [
        OpRun(
            span_us=fwd.time_range.elapsed_us(),
            pre_forward_us=restore.time_range.elapsed_us(),
            ops=tuple((e.name, e.self_cpu_time_total) for e in _descendants(fwd)),
            restore_ops=tuple((e.name, e.self_cpu_time_total) for e in _descendants(restore)),
        )
        for fwd, restore in zip(forwards, restores, strict=True)
    ]


def chrome_trace(prof: torch.profiler.profile) -> bytes:
    """The profiler's chrome trace as JSON bytes (exported beside nothing the user sees)."""
    with tempfile.TemporaryDirectory(prefix="fwdasv-trace-") as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        return Path(path).read_bytes()


def restore_activity_count(snapshot: StateSnapshot) -> int:
    """GPU activities one restore launches: one copy per non-empty view on the GPU."""
    return sum(1 for view in snapshot.views if view.is_cuda and view.numel() > 0)


# --- files and the engine's entry point -----------------------------------------------


def write_case_profile(
    profile_dir: str | os.PathLike[str],
    case_name: str,
    rank: int,
    summary: KernelSummary,
    trace_json: bytes,
) -> KernelSummary:
    """Write `<case>.rank<r>.trace.json.gz` (gzipped `trace_json`) and `.kernels.json`.

    Both atomically; the case name is made safe for a file name. Returns the
    summary as written (with `trace` set to the trace's path).
    """
    kernels_path, trace_path = profile_paths(profile_dir, case_name, rank)
    with atomic_output(trace_path, binary=True) as stream:
        stream.write(gzip.compress(trace_json, compresslevel=6, mtime=0))
    written = replace(summary, trace=str(trace_path), case=case_name, rank=rank)
    # indent=1 as vLLM writes it.
    write_atomic(kernels_path, json.dumps(written.to_json(), indent=1) + "\n")
    return written


def profile_block(summary: KernelSummary, kernels_path: str | os.PathLike[str]) -> ProfileBlock:
    """The `profile` entry of a rank's result, as vLLM's bench fills it."""
    return ProfileBlock(
        summary=str(kernels_path),
        device=summary.device,
        span_us=summary.span_us,
        busy_us=summary.busy_us,
        activities=summary.activities,
        top_kernels=summary.kernels[:TOP_KERNELS],
    )


def profile_case(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    device: torch.device,
    options: ProfileOptions,
    profile_dir: str | os.PathLike[str],
    case_name: str,
    rank: int = 0,
    roots: Sequence[Root] = (),
) -> ProfileBlock:
    """Profile one prepared case and write its files; returns the rank's `profile` block.

    `snapshot` must hold the state from before the case was first run (take it
    before timing): timing leaves the state one step on. `roots`: the tracked
    repository's directories, whose frames name the rows' sources.
    """
    if device.type == "cuda":
        prof = _trace_graph_replays(prepared, snapshot, device, options.replays, case_name)
        trace_json = chrome_trace(prof)
        events = json.loads(trace_json)["traceEvents"]
        skip = restore_activity_count(snapshot)
        summary = summarize_gpu(events, options.replays, skip)
    else:
        with quiet_profiler_stderr():
            prof = _trace_eager_forwards(prepared, snapshot, options.replays)
            trace_json = chrome_trace(prof)
        summary = summarize_cpu(op_runs(prof, options.replays))
    try:
        eager_events, calls = _attribution_forward(prepared, snapshot, device, roots)
        if device.type == "cuda":
            found = attribute.attribute_events(eager_events, FORWARD_LABEL, GPU_CATEGORIES)
            summary = with_gpu_ops(summary, events, skip, found, calls)
        else:
            found = attribute.attribute_events(eager_events, FORWARD_LABEL)
            summary = with_cpu_sources(summary, found, calls)
    except Exception as error:  # attribution is extra: the timed profile stands without it
        summary = replace(summary, attribution=f"failed: {type(error).__name__}: {error}")
    written = write_case_profile(profile_dir, case_name, rank, summary, trace_json)
    kernels_path, _ = profile_paths(profile_dir, case_name, rank)
    return profile_block(written, kernels_path)
