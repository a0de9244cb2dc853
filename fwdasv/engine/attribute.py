"""Where each op (CPU) or kernel (GPU) of a profiled forward was called: the source lines.

One extra eager forward, never a timed one, runs under `torch.profiler` (`record_shapes`)
and a `TorchDispatchMode` that notes, for every aten op call, the first frame in the
tracked repository (`first_frame`, under one of the `source_roots`) and wraps the call in
a range `fwdasv::src#<i>`. The chrome trace then ties everything to a call by time on
its thread: an op event inside a `src#i` range belongs to call i (a composite op, which
decomposes before the mode sees it, to the first call inside it); a GPU activity to its
launch (by `correlation`), whose `src#i` gives the call and `External id` the launching
aten op. The roots (`source_roots`) are the code under test as this commit installed it;
frames outside them (torch, fwdasv, the target kept outside the repository, the standard
library) never name a line. `attribute_events` is the pure part: trace events and calls
in, `Attributed` out.
"""

from __future__ import annotations

import bisect
import importlib.util
import linecache
import os
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fwdasv.core.installed import installed_code
from fwdasv.core.kernels import SourceFrame

SOURCE_LABEL = "fwdasv::src#"
FORWARD_LABEL = "fwdasv::forward"  # the attribution forward's range
SOURCE_ROOTS_ENV = "FWDASV_SOURCE_ROOTS"
MAX_SOURCES = 5  # per row
MAX_STACK = 8  # the repository's frames kept above a call site
MAX_SHAPES = 8  # distinct input-shape signatures kept per row
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
CPU_OP = "cpu_op"
ANNOTATION = "user_annotation"


@dataclass(frozen=True)
class Root:
    """A directory (or a module's file) whose frames are the code under test's; files are
    named relative to `base`."""

    path: str
    base: str

    def holds(self, real: str) -> bool:
        return real == self.path or real.startswith(self.path + os.sep)


def _target_roots(target: str | None) -> list[Root]:
    """The target's top-level package directory (named from its parent: `tinylm/model.py`),
    or, for a module at a checkout's root, that checkout."""
    package = (target or "").partition(":")[0].split(".")[0]
    if not package:
        return []
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is not None and not locations and spec.origin:
        # A module at the checkout's root (model.py): the checkout is the root.
        parent = os.path.realpath(Path(spec.origin).parent)
        return [Root(parent, parent)]
    return [Root(os.path.realpath(p), os.path.dirname(os.path.realpath(p))) for p in locations]


def source_roots(
    target: str | None,
    env: Mapping[str, str] = os.environ,
    site_packages: str | os.PathLike[str] | None = None,
) -> tuple[Root, ...]:
    """Where the code under test is, in this order: FWDASV_SOURCE_ROOTS when set (the
    override: os.pathsep-separated directories, each naming its files from itself); else
    what the commit's install put into this fwdasv environment (`fwdasv.core.installed`: the
    checkout on the import path, the vLLM tree, the package); else the target's package."""
    override = [part for part in env.get(SOURCE_ROOTS_ENV, "").split(os.pathsep) if part]
    if override:
        return tuple(Root(os.path.realpath(p), os.path.realpath(p)) for p in override)
    purelib = Path(site_packages or sysconfig.get_paths()["purelib"])
    installed = installed_code(purelib)
    if installed is not None:
        base = os.path.realpath(installed.base)
        return tuple(Root(os.path.realpath(p), base) for p in installed.paths)
    return tuple(_target_roots(target))


def first_frame(frame: Any, roots: Sequence[Root]) -> SourceFrame | None:
    """The innermost frame (from `frame` outwards) whose file is under a root, or None; its
    function by qualified name (`Qwen3Attention.forward`), and in its `stack` the frames
    under a root that called it, innermost first (up to MAX_STACK): where a commit added
    a call to an unchanged helper, the changed line is one of those."""
    found: list[SourceFrame] = []
    while frame is not None and len(found) <= MAX_STACK:
        code = frame.f_code
        filename = code.co_filename
        real = os.path.realpath(filename) if not filename.startswith("<") else ""
        for root in roots:
            if real and root.holds(real):
                line = frame.f_lineno
                found.append(
                    SourceFrame(
                        file=os.path.relpath(real, root.base),
                        line=line,
                        function=getattr(code, "co_qualname", code.co_name),
                        code=linecache.getline(filename, line).strip()[:160],
                    )
                )
                break
        frame = frame.f_back
    if not found:
        return None
    return replace(found[0], stack=tuple(found[1:]))


@dataclass(frozen=True)
class Call:
    """One aten op call the dispatch mode saw: its name and where the repository made it."""

    op: str
    frame: SourceFrame | None


def recording_mode(roots: Sequence[Root], calls: list[Call]) -> Any:
    """A TorchDispatchMode appending a `Call` per op and running it inside `src#<index>`."""
    from torch.profiler import record_function
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            index = len(calls)
            calls.append(Call(str(func._schema.name), first_frame(sys._getframe(1), roots)))
            with record_function(f"{SOURCE_LABEL}{index}"):
                return func(*args, **(kwargs or {}))

    return _Recorder()


# --- the trace, tied to the calls (pure) ----------------------------------------------


@dataclass
class _Ranges:
    """Disjoint `src#i` ranges of one thread, by start."""

    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    index: list[int] = field(default_factory=list)

    def containing(self, ts: float) -> int | None:
        at = bisect.bisect_right(self.starts, ts) - 1
        if at >= 0 and self.ends[at] >= ts:
            return self.index[at]
        return None

    def first_inside(self, ts: float, end: float) -> int | None:
        at = bisect.bisect_left(self.starts, ts)
        if at < len(self.starts) and self.starts[at] <= end:
            return self.index[at]
        return None


@dataclass(frozen=True)
class Attributed:
    """What the attribution forward says: per op name, its call sites (with time weights)
    and shapes; the forward's GPU activities in order, each with its op and call site."""

    op_sources: Mapping[str, Mapping[int, float]]
    op_shapes: Mapping[str, Counter[str]]
    gpu: tuple[tuple[Mapping[str, object], str, int | None], ...] = ()


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def shape_signature(dims: object) -> str:
    """`Input Dims` as one short string: `8x16,16x16`; a scalar argument is `-`."""
    if not isinstance(dims, list):
        return ""
    parts = []
    for dim in dims:
        if isinstance(dim, list) and dim and all(isinstance(d, int) for d in dim):
            parts.append("x".join(str(d) for d in dim))
        elif isinstance(dim, list) and dim and isinstance(dim[0], list):
            parts.append("[" + ",".join("x".join(map(str, d)) for d in dim) + "]")
        else:
            parts.append("-")
    return ",".join(parts)


def attribute_events(
    events: Iterable[Mapping[str, object]], forward_label: str, gpu_categories: Sequence[str] = ()
) -> Attributed:
    """Tie a chrome trace's ops (and GPU activities) inside `forward_label` to `src#i` calls."""
    events = [e for e in events if e.get("ph") == "X"]
    ranges: dict[object, _Ranges] = {}
    forwards: dict[object, list[tuple[float, float]]] = {}
    for event in sorted(events, key=lambda e: _number(e.get("ts"))):
        if event.get("cat") != ANNOTATION:
            continue
        name, ts = str(event.get("name", "")), _number(event.get("ts"))
        end = ts + _number(event.get("dur"))
        if name.startswith(SOURCE_LABEL) and name[len(SOURCE_LABEL) :].isdigit():
            found = ranges.setdefault(event.get("tid"), _Ranges())
            found.starts.append(ts)
            found.ends.append(end)
            found.index.append(int(name[len(SOURCE_LABEL) :]))
        elif name == forward_label:
            forwards.setdefault(event.get("tid"), []).append((ts, end))

    def in_forward(event: Mapping[str, object]) -> bool:
        ts = _number(event.get("ts"))
        return any(start <= ts <= end for start, end in forwards.get(event.get("tid"), ()))

    sources: dict[str, dict[int, float]] = {}
    shapes: dict[str, Counter[str]] = {}
    op_by_external: dict[object, str] = {}
    for event in events:
        if event.get("cat") != CPU_OP:
            continue
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        name = str(event.get("name", ""))
        if "External id" in args:
            op_by_external[args["External id"]] = name
        if not in_forward(event):
            continue
        thread = ranges.get(event.get("tid"))
        ts, dur = _number(event.get("ts")), _number(event.get("dur"))
        call = None
        if thread is not None:
            call = thread.containing(ts)
            if call is None:
                call = thread.first_inside(ts, ts + dur)
        if call is not None:
            # Weighted by time: the call site that costs the most comes first.
            weights = sources.setdefault(name, {})
            weights[call] = weights.get(call, 0.0) + max(dur, 1e-3)
        signature = shape_signature(args.get("Input Dims"))
        if signature:
            shapes.setdefault(name, Counter())[signature] += 1
    gpu: list[tuple[Mapping[str, object], str, int | None]] = []
    if gpu_categories:
        launches = {}
        for event in events:
            if event.get("cat") in LAUNCH_CATEGORIES:
                args = event.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    launches[args["correlation"]] = event
        for event in sorted(
            (e for e in events if e.get("cat") in gpu_categories),
            key=lambda e: _number(e.get("ts")),
        ):
            args = event.get("args")
            args = args if isinstance(args, dict) else {}
            launch = launches.get(args.get("correlation"))
            if launch is None or not in_forward(launch):
                continue
            thread = ranges.get(launch.get("tid"))
            call = thread.containing(_number(launch.get("ts"))) if thread else None
            launch_args = launch.get("args")
            external = args.get("External id")
            if external is None and isinstance(launch_args, dict):
                external = launch_args.get("External id")
            gpu.append((event, op_by_external.get(external, ""), call))
    return Attributed(sources, shapes, tuple(gpu))


def frames_of(weights: Mapping[int, float], calls: Sequence[Call]) -> tuple[SourceFrame, ...]:
    """The call sites behind `weights` (call index -> time), merged by line, most time first."""
    merged: dict[tuple[str, int, str], list[Any]] = {}
    for index, weight in weights.items():
        if not 0 <= index < len(calls):
            continue
        frame = calls[index].frame
        if frame is None:
            continue
        entry = merged.setdefault((frame.file, frame.line, frame.function), [frame, 0.0, 0])
        entry[1] += weight
        entry[2] += 1
    ranked = sorted(merged.values(), key=lambda e: (-e[1], e[0].file, e[0].line))
    return tuple(replace(f, calls=count) for f, _, count in ranked[:MAX_SOURCES])


def top_shapes(counts: Counter[str] | None) -> tuple[str, ...]:
    if not counts:
        return ()
    return tuple(sorted(counts, key=lambda s: (-counts[s], s))[:MAX_SHAPES])
