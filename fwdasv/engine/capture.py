"""Time one prepared forward: the single-stage bench.

On a GPU the forward of one exact batch is captured as a one-shot CUDA graph
whose replays restore the state the forward writes and then run the forward
between two timing events. The events live inside the graph, after the
restore, so neither the restore nor host launch gaps reach the timed interval.
Before timing, the graph is validated against the eager forward and replayed
twice to check that replays are bitwise deterministic, then warmed up and
timed as the timing protocol lays the replays out (`fwdasv.engine.protocol`),
with the GPU's telemetry read at every block boundary when it is given.

Without a GPU the same steps run eagerly (restore, forward) around a host
timer; `timer` says so and the graph-only fields are null.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fwdasv.core.stats import Latency
from fwdasv.engine.protocol import PROTOCOLS, STEADY, BlockRun, Protocol, Replayer, run_protocol
from fwdasv.targets.base import PreparedForward

if TYPE_CHECKING:
    from fwdasv.hw.telemetry import GpuTelemetry

TIMER_GRAPH = "graph_events"
TIMER_HOST = "host_perf_counter"


@dataclass(frozen=True)
class BenchOptions:
    iters: int = 20
    samples: int = 5
    seed: int = 0
    # Replays before timing, for steady clocks (the seed's ~1 s).
    warmup_s: float = 1.0
    # "graph" (CUDA only) or "host".
    timer: str = "graph"
    # A name of fwdasv.engine.protocol.PROTOCOLS (resolved: not "auto").
    protocol: str = STEADY

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.iters < 1 or self.samples < 1:
            raise ValueError(f"iters ({self.iters}) and samples ({self.samples}) must be >= 1")
        if self.warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")
        if self.timer not in ("graph", "host"):
            raise ValueError(f"timer must be 'graph' or 'host', got {self.timer!r}")


def first_tensor(outputs: dict[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
    if isinstance(outputs, torch.Tensor):
        return outputs
    return next(iter(outputs.values()))


def tensor_diff(actual: torch.Tensor, expected: torch.Tensor) -> dict[str, float]:
    """vLLM's `_compare`: float32 max abs difference and RMS relative to the expected RMS."""
    delta = actual.float() - expected.float()
    scale = expected.float().square().mean().sqrt().clamp(min=1e-12)
    return {
        "max_abs": delta.abs().max().item() if delta.numel() else 0.0,
        "relative_rms": (delta.square().mean().sqrt() / scale).item() if delta.numel() else 0.0,
    }


class StateSnapshot:
    """Copies of the views a forward writes; `restore` copies them back in place."""

    def __init__(self, views: list[torch.Tensor]):
        self.views = views
        self.saved = [view.clone() for view in views]

    def restore(self) -> None:
        for view, saved in zip(self.views, self.saved, strict=True):
            view.copy_(saved)

    @property
    def nbytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in self.views)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timing_events() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    # external=True lets an event recorded inside a graph be queried outside it.
    return (
        torch.cuda.Event(enable_timing=True, external=True),
        torch.cuda.Event(enable_timing=True, external=True),
    )


@dataclass(frozen=True)
class CapturedForward:
    """One replayable step: [restore, start event, forward, end event] as a CUDA graph."""

    graph: torch.cuda.CUDAGraph
    start: torch.cuda.Event
    end: torch.cuda.Event
    outputs: Any  # the forward's outputs, in the graph's memory: each replay rewrites them


def capture_forward(
    forward: Any, snapshot: StateSnapshot, stream: torch.cuda.Stream
) -> CapturedForward:
    """Capture the timed step on `stream`, which has run the forward eagerly already.

    The events sit after the restore, so the timed interval holds the forward
    alone; the timed runs (`bench_forward`) and the profiled ones
    (`fwdasv.engine.profile`) replay the same step. Keep the returned value
    while the graph is replayed: the graph records its two events, and a
    replay after they are freed crashes the process (seen on an H200).
    """
    start, end = timing_events()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        snapshot.restore()
        start.record()
        outputs = forward()
        end.record()
    return CapturedForward(graph, start, end, outputs)


def bench_forward(
    prepared: PreparedForward,
    options: BenchOptions,
    device: torch.device,
    telemetry: GpuTelemetry | None = None,
) -> dict[str, Any]:
    """The rank dict of vLLM's schema for one prepared case (plus `protocol`, `telemetry`)."""
    snapshot = StateSnapshot(prepared.state)
    if options.timer == "graph":
        if device.type != "cuda":
            raise ValueError("the graph timer needs a CUDA device; use --timer host on CPU")
        result, run = _bench_graph(prepared, snapshot, options, device, telemetry)
    else:
        result, run = _bench_host(prepared, snapshot, options, device, telemetry)
    rank = {
        "num_tokens": prepared.num_tokens,
        "timing_scope": "target_only",
        **result,
        "state_reset_bytes": snapshot.nbytes,
        "protocol": {
            **Protocol.named(options.protocol).to_json(),
            "iters_per_block": run.iters,
            "warmup_replays": run.warmup_replays,
            "timed_busy_s": round(run.busy_s, 4),
            "timed_idle_s": round(run.idle_s, 4),
        },
    }
    if telemetry is not None:
        from fwdasv.hw.telemetry import rank_telemetry

        rank["telemetry"] = rank_telemetry(
            telemetry, run.readings, "one reading after each sample block", keep_readings=True
        )
    return rank


def _timed(replayer: Replayer, options: BenchOptions, telemetry: GpuTelemetry | None) -> BlockRun:
    return run_protocol(
        replayer,
        options.iters,
        options.samples,
        options.warmup_s,
        Protocol.named(options.protocol),
        read_telemetry=telemetry.read if telemetry is not None else None,
    )


def _bench_host(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    options: BenchOptions,
    device: torch.device,
    telemetry: GpuTelemetry | None,
) -> tuple[dict[str, Any], BlockRun]:
    forward = prepared.forward
    with torch.inference_mode():
        forward()  # eager warmup: lazy init, allocator, autotuning
        snapshot.restore()
        eager = first_tensor(forward()).clone()
        snapshot.restore()
        output = first_tensor(forward())
        reference = output.clone()

        def run_once() -> float:
            snapshot.restore()
            synchronize(device)
            begin = time.perf_counter()
            forward()
            synchronize(device)
            return (time.perf_counter() - begin) * 1e6

        run = _timed(Replayer(run_once, run_once, lambda: None), options, telemetry)
    return {
        "eager_repeat": tensor_diff(reference, eager),
        "graph_vs_eager": None,
        "graph_deterministic": None,
        "finite": bool(reference.isfinite().all()),
        "latency_us": Latency.from_replays(run.times_us, options.samples, TIMER_HOST).to_json(),
    }, run


def _bench_graph(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    options: BenchOptions,
    device: torch.device,
    telemetry: GpuTelemetry | None,
) -> tuple[dict[str, Any], BlockRun]:
    forward = prepared.forward
    with torch.inference_mode():
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            # Eager warmup on the capture stream: per-stream init, cuBLAS
            # workspaces and autotuning happen outside capture.
            forward()
            snapshot.restore()
            eager = first_tensor(forward()).clone()
            snapshot.restore()
            reference = first_tensor(forward()).clone()
        stream.synchronize()
        captured = capture_forward(forward, snapshot, stream)
        graph, start, end = captured.graph, captured.start, captured.end
        output = first_tensor(captured.outputs)
        graph.replay()
        synchronize(device)
        first = output.clone()
        graph.replay()
        synchronize(device)
        result = {
            # Same step from the same restored state: should match exactly.
            "eager_repeat": tensor_diff(reference, eager),
            "graph_vs_eager": tensor_diff(first, reference),
            "graph_deterministic": bool(torch.equal(first, output)),
            "finite": bool(output.isfinite().all()),
        }

        def replay_once() -> float:
            graph.replay()
            end.synchronize()
            return start.elapsed_time(end) * 1000

        run = _timed(
            Replayer(replay_once, graph.replay, lambda: synchronize(device)), options, telemetry
        )
    result["latency_us"] = Latency.from_replays(
        run.times_us, options.samples, TIMER_GRAPH
    ).to_json()
    return result, run
