"""The kernel summary of one profiled case: vLLM's `<case>.rank<r>.kernels.json`.

vLLM's bench (`--profile-dir`) and fwdasv's engine write the same file, so one loader
and one diff (`fwdasv.analysis.explain.explain`) serve both backends, and vLLM's own
`python -m vllm.benchmarks.forward.profile A B` reads fwdasv's files. `KernelSummary`
reads and writes a whole file (vLLM's keys, then fwdasv's optional ones: the device,
the restore's rows, where each row was called and by which aten op, what the graph and the
eager forward did not both launch); `KernelRow` is one kernel or op per forward,
`SourceFrame` one call site. `profile_paths` names a case's files.

Torch-free on purpose: the analysis side reads these files without the engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwdasv.core.errors import UserError

KERNELS_SUFFIX = ".kernels.json"
TRACE_SUFFIX = ".trace.json.gz"
DEVICE_CUDA = "cuda"
DEVICE_CPU = "cpu"
# A row's keys written always, in this order (the others only where set).
_ROW_KEYS = ("name", "us", "pct", "calls", "example")
_VLLM_KEYS = ("trace", "replays", "span_us", "busy_us", "pre_forward_us", "activities", "kernels")
_FWDASV_KEYS = (
    "device",
    "measure",
    "restore_activities",
    "pre_forward_kernels",
    "case",
    "rank",
    "ops",
    "attribution",
    "attribution_s",
    "unmatched",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_STEM = 100


class ProfileError(UserError, ValueError):
    """A kernels.json that is missing or malformed, or profiles that cannot be compared."""


@dataclass(frozen=True)
class SourceFrame:
    """Where a row was called: the first frame in the tracked repository (file relative to
    the repository's package root, line, function, that line's code) and how often;
    `stack`: the frames of the repository that called it, innermost first (explain names
    the first one a commit changed)."""

    file: str
    line: int
    function: str
    code: str = ""
    calls: int = 0
    stack: tuple[SourceFrame, ...] = ()

    @property
    def label(self) -> str:
        """`tinylm/model.py:57 attention`."""
        return f"{self.file}:{self.line} {self.function}"

    @property
    def identity(self) -> tuple[str, str, str]:
        """What stays the same when lines above it move: file, function, code."""
        return (self.file, self.function, self.code)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
            "calls": self.calls,
        }
        if self.stack:
            data["stack"] = [
                {"file": f.file, "line": f.line, "function": f.function, "code": f.code}
                for f in self.stack
            ]
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> SourceFrame:
        data = _object(data, where, "an object")
        stack = data.get("stack") or []
        if not isinstance(stack, list):
            raise ProfileError(f"{where}: 'stack' must be a list")
        return cls(
            file=_field(data, "file", str, where),
            line=_field(data, "line", int, where),
            function=_field(data, "function", str, where),
            code=str(data.get("code", "")),
            calls=int(data.get("calls", 0) or 0),
            stack=tuple(
                cls.from_json(frame, f"{where}: stack[{i}]") for i, frame in enumerate(stack)
            ),
        )


@dataclass(frozen=True)
class KernelRow:
    """One kernel (GPU) or op (CPU) per forward: time, share of the total, launches.

    `sources` and `shapes` (fwdasv's, where attributed) say where it was called and
    on what; `kernels`: an op row's kernels (GPU `ops`); `op`: a GPU kernel's launching
    aten op (the one with most of its time); `unmatched`: its launches per forward that
    the attribution's eager forward did not make (no op or line is guessed for them).
    """

    name: str
    us: float
    pct: float
    calls: int
    example: str = ""
    sources: tuple[SourceFrame, ...] = field(default=(), compare=False)
    shapes: tuple[str, ...] = field(default=(), compare=False)
    kernels: tuple[KernelRow, ...] = field(default=(), compare=False)
    op: str = field(default="", compare=False)
    unmatched: int = field(default=0, compare=False)

    @property
    def source(self) -> SourceFrame | None:
        return self.sources[0] if self.sources else None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {key: getattr(self, key) for key in _ROW_KEYS}
        if self.sources:
            data["sources"] = [frame.to_json() for frame in self.sources]
        if self.shapes:
            data["shapes"] = list(self.shapes)
        if self.kernels:
            data["kernels"] = [row.to_json() for row in self.kernels]
        if self.op:
            data["op"] = self.op
        if self.unmatched:
            data["unmatched"] = self.unmatched
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> KernelRow:
        data = _object(data, where, "an object")
        name = _field(data, "name", str, where)
        sources = data.get("sources") or []
        shapes = data.get("shapes") or []
        kernels = data.get("kernels") or []
        if not isinstance(sources, list) or not isinstance(kernels, list):
            raise ProfileError(f"{where}: 'sources' and 'kernels' must be lists")
        if not isinstance(shapes, list) or not all(isinstance(s, str) for s in shapes):
            raise ProfileError(f"{where}: 'shapes' must be a list of strings")
        return cls(
            name=name,
            us=float(_field(data, "us", (int, float), where)),
            pct=float(_field(data, "pct", (int, float), where)),
            calls=_field(data, "calls", int, where),
            example=str(data.get("example", "")),
            sources=tuple(
                SourceFrame.from_json(f, f"{where}: sources[{i}]") for i, f in enumerate(sources)
            ),
            shapes=tuple(shapes),
            kernels=_rows(kernels, where, "kernels"),
            op=str(data.get("op", "") or ""),
            unmatched=int(data.get("unmatched", 0) or 0),
        )


@dataclass(frozen=True)
class Unmatched:
    """What the graph and the attribution's eager forward did not both launch, per forward:
    (short name, launches) the graph made and the eager forward did not (`graph`), and the
    reverse (`eager`). Reported as such: such a launch gets no op and no line."""

    graph: tuple[tuple[str, int], ...] = ()
    eager: tuple[tuple[str, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.graph or self.eager)

    def to_json(self) -> dict[str, object]:
        return {
            side: [{"name": name, "calls": calls} for name, calls in rows]
            for side, rows in (("graph", self.graph), ("eager", self.eager))
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> Unmatched:
        data = _object(data, where, "an object")
        sides = []
        for side in ("graph", "eager"):
            rows = data.get(side) or []
            if not isinstance(rows, list):
                raise ProfileError(f"{where}: {side!r} must be a list")
            sides.append(
                tuple(
                    (
                        _field(_object(row, where, "an object"), "name", str, where),
                        _field(row, "calls", int, where),
                    )
                    for row in rows
                )
            )
        return cls(sides[0], sides[1])


@dataclass(frozen=True)
class KernelSummary:
    """A whole kernels.json; `device` is None for a file without the key (vLLM's: GPU).

    vLLM's keys: `trace` (the chrome trace's path), `replays`, `span_us` (median
    first-to-last forward activity), `busy_us` (median summed durations),
    `pre_forward_us` (the excluded restore work), `activities` (per forward) and
    `kernels`: rows `{name, us, pct, calls, example}` per forward, sorted by `us`
    descending. fwdasv adds `device` ("cuda": GPU kernels; "cpu": aten ops and their
    self CPU time), the restore's rows it left out (`pre_forward_kernels`, with
    `restore_activities` on a GPU or the CPU's `measure`) and the `case` and `rank`
    profiled. Where the engine could attribute them (one extra eager forward, never a
    timed one): a row's `sources` (the first frames in the tracked repository that
    called it, the one with the most time first) and `shapes`; on a GPU, `ops` (the
    aten ops that launched the forward's kernels, each with its kernels under it) and
    `attribution` (how the graph's kernels were matched to the eager forward's:
    `sequence`, or `partly by name` and how many in order; or why they were not), each
    kernel row's launching `op`, what only one side launched (`unmatched`) and the
    seconds the attribution took (`attribution_s`). vLLM's bench gets the same from
    fwdasv's explain entry (`fwdasv.backends.vllm_explain`).

    fwdasv's keys are None (or empty) in vLLM's files; `extra` holds any key
    neither writes, as read.
    """

    replays: int
    span_us: float
    busy_us: float
    pre_forward_us: float
    activities: int
    kernels: tuple[KernelRow, ...]
    trace: str | None = None
    device: str | None = None
    # How a CPU row is measured; the GPU activities per replay left out as the restore's.
    measure: str | None = field(default=None, compare=False)
    restore_activities: int | None = field(default=None, compare=False)
    pre_forward_kernels: tuple[KernelRow, ...] | None = field(default=None, compare=False)
    case: str | None = field(default=None, compare=False)
    rank: int | None = field(default=None, compare=False)
    ops: tuple[KernelRow, ...] | None = field(default=None, compare=False)
    attribution: str | None = field(default=None, compare=False)
    attribution_s: float | None = field(default=None, compare=False)
    unmatched: Unmatched | None = field(default=None, compare=False)
    extra: Mapping[str, object] = field(default_factory=dict, compare=False)
    source: str = field(default="", compare=False)

    @property
    def is_cpu(self) -> bool:
        return self.device == DEVICE_CPU

    @property
    def unit(self) -> str:
        """What a row is: `op` (CPU self time) or `kernel` (GPU time)."""
        return "op" if self.is_cpu else "kernel"

    def to_json(self) -> dict[str, object]:
        """vLLM's keys in vLLM's order, then fwdasv's and any others."""
        data: dict[str, object] = {key: getattr(self, key) for key in _VLLM_KEYS}
        data["kernels"] = [row.to_json() for row in self.kernels]
        fwdasv: dict[str, object] = {
            "device": self.device,
            "measure": self.measure,
            "restore_activities": self.restore_activities,
            "pre_forward_kernels": None
            if self.pre_forward_kernels is None
            else [row.to_json() for row in self.pre_forward_kernels],
            "case": self.case,
            "rank": self.rank,
            "ops": None if self.ops is None else [row.to_json() for row in self.ops],
            "attribution": self.attribution,
            "attribution_s": self.attribution_s,
            "unmatched": None if self.unmatched is None else self.unmatched.to_json(),
        }
        data.update((key, value) for key, value in fwdasv.items() if value is not None)
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> KernelSummary:
        data = _object(data, where, "a JSON object")
        rows = _field(data, "kernels", list, where)
        device = data.get("device")
        if device is not None and device not in (DEVICE_CUDA, DEVICE_CPU):
            raise ProfileError(f"{where}: 'device' must be 'cuda' or 'cpu', got {device!r}")
        trace = data.get("trace")
        restore = data.get("pre_forward_kernels")
        if restore is not None and not isinstance(restore, list):
            raise ProfileError(f"{where}: 'pre_forward_kernels' must be a list")
        measure, case, rank = data.get("measure"), data.get("case"), data.get("rank")
        restore_activities = data.get("restore_activities")
        ops = data.get("ops")
        if ops is not None and not isinstance(ops, list):
            raise ProfileError(f"{where}: 'ops' must be a list")
        attribution = data.get("attribution")
        seconds = data.get("attribution_s")
        unmatched = data.get("unmatched")
        return cls(
            replays=_field(data, "replays", int, where),
            span_us=float(_field(data, "span_us", (int, float), where)),
            busy_us=float(_field(data, "busy_us", (int, float), where)),
            pre_forward_us=float(_field(data, "pre_forward_us", (int, float), where)),
            activities=_field(data, "activities", int, where),
            kernels=_rows(rows, where, "kernels"),
            trace=None if trace is None else str(trace),
            device=device,
            measure=None if measure is None else str(measure),
            restore_activities=None
            if restore_activities is None
            else _field(data, "restore_activities", int, where),
            pre_forward_kernels=None
            if restore is None
            else _rows(restore, where, "pre_forward_kernels"),
            case=None if case is None else str(case),
            rank=None if rank is None else _field(data, "rank", int, where),
            ops=None if ops is None else _rows(ops, where, "ops"),
            attribution=None if attribution is None else str(attribution),
            attribution_s=None
            if seconds is None
            else float(_field(data, "attribution_s", (int, float), where)),
            unmatched=None
            if unmatched is None
            else Unmatched.from_json(unmatched, f"{where}: unmatched"),
            extra={k: v for k, v in data.items() if k not in (*_VLLM_KEYS, *_FWDASV_KEYS)},
            source=where,
        )


def _object(data: object, where: str, what: str) -> dict[Any, Any]:
    """`data` where it is a JSON object, else a ProfileError naming `where`."""
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected {what}, got {type(data).__name__}")
    return data


def _rows(items: Sequence[object], where: str, key: str) -> tuple[KernelRow, ...]:
    """The rows of a list under `key`, each named by its index in an error."""
    return tuple(KernelRow.from_json(row, f"{where}: {key}[{i}]") for i, row in enumerate(items))


def _field(data: Mapping[str, object], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ProfileError(f"{where}: missing key {key!r}; is this a *{KERNELS_SUFFIX} file?")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ProfileError(f"{where}: {key!r} must be {names}, got {value!r}")
    return value


def load_summary(path: str | os.PathLike[str]) -> KernelSummary:
    """Read a kernels.json (vLLM's or fwdasv's); one ProfileError naming the file if it cannot."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(
            f"{where}: no such file; profile the case first (--profile-dir writes "
            f"<case>.rank<r>{KERNELS_SUFFIX})"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ProfileError(f"{where}: cannot read it ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProfileError(f"{where}: not valid JSON ({error})") from None
    return KernelSummary.from_json(data, where)


def safe_case_name(case_name: str) -> str:
    """A file-name stem for a case: unchanged when already safe, else sanitised plus a hash.

    Case names may hold `/`, spaces or a leading dot; the hash keeps two names
    that sanitise alike (`a/b`, `a_b`) apart.
    """
    stem = _UNSAFE.sub("_", case_name).lstrip(".")
    if stem == case_name and 0 < len(stem) <= _MAX_STEM:
        return stem
    digest = hashlib.sha1(case_name.encode("utf-8")).hexdigest()[:8]
    return f"{stem[:_MAX_STEM] or 'case'}-{digest}"


def profile_paths(
    profile_dir: str | os.PathLike[str], case_name: str, rank: int = 0
) -> tuple[Path, Path]:
    """(kernels.json, trace.json.gz) of a case and rank, as vLLM names them."""
    prefix = f"{safe_case_name(case_name)}.rank{rank}"
    directory = Path(profile_dir)
    return directory / f"{prefix}{KERNELS_SUFFIX}", directory / f"{prefix}{TRACE_SUFFIX}"
