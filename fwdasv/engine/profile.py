"""Kernel (GPU) and op (CPU) profiles of a prepared forward, in runs of their own.

After a case is timed, `profile_case` runs the same prepared forward a few more times
under `torch.profiler` (never timed: the profiler's overhead must not reach a latency)
and writes vLLM's `<case>.rank<r>.kernels.json` and `.trace.json.gz`
(`fwdasv.core.kernels`), so one diff serves both backends. On CUDA the step the timed
runs replay (restore, then forward, in one graph) is captured and `replays` replays
traced; each replay's first activities, one copy per non-empty state view, are the
restore. On CPU the forwards run eagerly inside labelled ranges. The rows are computed
by `fwdasv.engine.profile_summary`. One more eager forward under a dispatch mode says
where each row was called (`attribution_forward`, also vLLM's in `backends.vllm_explain`;
`fwdasv.engine.attribute`), its seconds kept as `attribution_s`; a failure there leaves
the rows unattributed (`attribution` says why), never the profile failed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, record_function

from fwdasv.core.files import atomic_output, write_atomic
from fwdasv.core.kernels import KernelSummary, profile_paths
from fwdasv.core.results import ProfileBlock
from fwdasv.engine import attribute
from fwdasv.engine.attribute import Call, Root
from fwdasv.engine.capture import StateSnapshot, capture_forward, synchronize
from fwdasv.engine.profile_summary import (
    GPU_CATEGORIES,
    OpRun,
    summarize_cpu,
    summarize_gpu,
    with_cpu_sources,
    with_gpu_ops,
)
from fwdasv.targets.base import PreparedForward

FORWARD_LABEL = attribute.FORWARD_LABEL
RESTORE_LABEL = "fwdasv::restore"
# Rows of the `profile` block in the rank dict (vLLM's `top_kernels`).
TOP_KERNELS = 10


# What torch's profiler library (kineto) writes to file descriptor 2 from C++, whatever
# KINETO_LOG_LEVEL says, and which says nothing to the user: its probe lines at every
# profiler start and stop and, on a box without a GPU, a failed GPU count. KINETO_NOISE
# is around a profiler run (the lines as kineto dates them), PROFILER_NOISE around a CPU
# profile and its export (any probe line).
KINETO_NOISE = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d [^\]]*\] |gpuGetDeviceCount failed")
PROFILER_NOISE = re.compile(r"^USDT:|gpuGetDeviceCount failed")


@contextlib.contextmanager
def _stderr_without(noise: Callable[[bytes], bool]) -> Iterator[None]:
    """File descriptor 2 caught for the block; its lines are written back afterwards, less
    those `noise` says are noise. Without a real stderr (embedded) nothing is caught."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
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
            kept = [line for line in captured.read().splitlines(True) if not noise(line)]
            if kept:
                sys.stderr.flush()
                os.write(2, b"".join(kept))


def quiet_kineto() -> contextlib.AbstractContextManager[None]:
    """Run a profiler with stderr caught; give back every line but `KINETO_NOISE`."""
    return _stderr_without(lambda line: KINETO_NOISE.search(line) is not None)


def quiet_profiler_stderr(
    noise: re.Pattern[str] = PROFILER_NOISE,
) -> contextlib.AbstractContextManager[None]:
    """Stderr caught for the block; give back every line but those `noise` matches."""
    return _stderr_without(lambda line: noise.search(line.decode(errors="replace")) is not None)


@dataclass(frozen=True)
class ProfileOptions:
    """`replays`: traced graph replays (CUDA) or eager forwards (CPU); vLLM traces 3."""

    replays: int = 3

    def __post_init__(self) -> None:
        if self.replays < 1:
            raise ValueError(f"replays must be >= 1, got {self.replays}")


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


def attribution_forward(
    forward: Callable[[], object],
    roots: Sequence[Root],
    synchronize_gpu: Callable[[], None] | None = None,
    restore: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[Call]]:
    """One eager forward under the profiler (shapes recorded; GPU activities too when
    `synchronize_gpu` is given) and the recording dispatch mode: the chrome trace's events
    and the calls, for `attribute.attribute_events`. `restore`, when given, runs before it
    (once outside the profile, once inside as `RESTORE_LABEL`, whose work is not the
    forward's)."""
    calls: list[Call] = []
    activities = [ProfilerActivity.CPU]
    if synchronize_gpu is not None:
        activities.append(ProfilerActivity.CUDA)
    with torch.inference_mode():
        if restore is not None:
            restore()
        with (
            quiet_kineto(),
            torch.profiler.profile(activities=activities, record_shapes=True) as prof,
        ):
            if restore is not None:
                with record_function(RESTORE_LABEL):
                    restore()
            with record_function(FORWARD_LABEL), attribute.recording_mode(roots, calls):
                forward()
            if synchronize_gpu is not None:
                synchronize_gpu()
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
    started = time.perf_counter()
    try:
        gpu_sync = (lambda: synchronize(device)) if device.type == "cuda" else None
        eager_events, calls = attribution_forward(
            prepared.forward, roots, gpu_sync, restore=snapshot.restore
        )
        if device.type == "cuda":
            found = attribute.attribute_events(eager_events, FORWARD_LABEL, GPU_CATEGORIES)
            summary = with_gpu_ops(summary, events, skip, found, calls)
        else:
            found = attribute.attribute_events(eager_events, FORWARD_LABEL)
            summary = with_cpu_sources(summary, found, calls)
    except Exception as error:  # attribution is extra: the timed profile stands without it
        summary = replace(summary, attribution=f"failed: {type(error).__name__}: {error}")
    summary = replace(summary, attribution_s=round(time.perf_counter() - started, 3))
    written = write_case_profile(profile_dir, case_name, rank, summary, trace_json)
    kernels_path, _ = profile_paths(profile_dir, case_name, rank)
    return profile_block(written, kernels_path)
