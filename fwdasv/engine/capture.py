"""Time one prepared forward: the single-stage bench.

On a GPU the forward of one exact batch is captured as a one-shot CUDA graph
whose replays restore the state the forward writes and then run the forward
between two timing events. The events live inside the graph, after the
restore, so neither the restore nor host launch gaps reach the timed interval.
Before timing, the graph is validated against the eager forward and replayed
twice to check that replays are bitwise deterministic, then replayed for about
a second so clocks and caches reach a steady state.

Without a GPU the same steps run eagerly (restore, forward) around a host
timer; `timer` says so and the graph-only fields are null.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fwdasv.core.stats import Latency
from fwdasv.targets.base import PreparedForward

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

    def __post_init__(self) -> None:
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


def bench_forward(
    prepared: PreparedForward, options: BenchOptions, device: torch.device
) -> dict[str, Any]:
    """The rank dict of vLLM's schema for one prepared case."""
    snapshot = StateSnapshot(prepared.state)
    if options.timer == "graph":
        if device.type != "cuda":
            raise ValueError("the graph timer needs a CUDA device; use --timer host on CPU")
        result = _bench_graph(prepared, snapshot, options, device)
    else:
        result = _bench_host(prepared, snapshot, options, device)
    return {
        "num_tokens": prepared.num_tokens,
        "timing_scope": "target_only",
        **result,
        "state_reset_bytes": snapshot.nbytes,
    }


def _bench_host(
    prepared: PreparedForward, snapshot: StateSnapshot, options: BenchOptions, device: torch.device
) -> dict[str, Any]:
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

        _warmup(run_once, options)
        times = [run_once() for _ in range(options.iters * options.samples)]
    return {
        "eager_repeat": tensor_diff(reference, eager),
        "graph_vs_eager": None,
        "graph_deterministic": None,
        "finite": bool(reference.isfinite().all()),
        "latency_us": Latency.from_replays(times, options.samples, TIMER_HOST).to_json(),
    }


def _warmup(run_once: Callable[[], float], options: BenchOptions) -> None:
    """Run until `warmup_s` has passed (at least `iters` runs when warmup_s > 0)."""
    if options.warmup_s <= 0:
        return
    per_run = max(run_once(), 1.0) * 1e-6
    count = max(options.iters, int(options.warmup_s / per_run))
    for _ in range(count):
        run_once()


def _bench_graph(
    prepared: PreparedForward, snapshot: StateSnapshot, options: BenchOptions, device: torch.device
) -> dict[str, Any]:
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
        start, end = timing_events()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            snapshot.restore()
            start.record()
            output = first_tensor(forward())
            end.record()
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

        def replay_host_timed() -> float:
            begin = time.perf_counter()
            graph.replay()
            synchronize(device)
            return (time.perf_counter() - begin) * 1e6

        if options.warmup_s > 0:
            per_replay = max(replay_host_timed(), 1.0) * 1e-6
            for _ in range(max(options.iters, int(options.warmup_s / per_replay))):
                graph.replay()
            synchronize(device)
        times = [replay_once() for _ in range(options.iters * options.samples)]
    result["latency_us"] = Latency.from_replays(times, options.samples, TIMER_GRAPH).to_json()
    return result
