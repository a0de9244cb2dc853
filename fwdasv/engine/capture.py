"""Time one prepared forward: the single-stage bench.

On a GPU the forward of one exact batch is captured as a one-shot CUDA graph whose
replays restore the state the forward writes and then run the forward between two
timing events. The events live inside the graph, after the restore, so neither the
restore nor host launch gaps reach the timed interval. Before timing, the graph is
validated against the eager forward and replayed twice (replays must be bitwise
deterministic), then warmed up and timed as the protocol lays the replays out
(`fwdasv.engine.protocol`), with the GPU's telemetry read at block boundaries. Without a
GPU the same steps run eagerly around a host timer; `timer` says so and the graph-only
fields are null. With `reference`, the host timer also times a fixed workload right
after each timed replay (`fwdasv.engine.yardstick`), kept in the rank's `reference` block
with each pair's ratio of this thread's CPU time (a neighbour that takes the CPU away
lengthens a long forward's wall time, not the short workload's: CPU time sees neither).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fwdasv.core.results import RankResult, ReferenceRun, TensorDiff
from fwdasv.core.stats import Latency
from fwdasv.engine.config import BenchOptions
from fwdasv.engine.protocol import BlockRun, Protocol, Replayer, run_protocol
from fwdasv.engine.yardstick import Yardstick
from fwdasv.hw.telemetry import rank_telemetry
from fwdasv.targets.base import PreparedForward

if TYPE_CHECKING:
    from fwdasv.hw.telemetry import GpuTelemetry

TIMER_GRAPH = "graph_events"
TIMER_HOST = "host_perf_counter"


def first_tensor(outputs: dict[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
    if isinstance(outputs, torch.Tensor):
        return outputs
    return next(iter(outputs.values()))


def tensor_diff(actual: torch.Tensor, expected: torch.Tensor) -> TensorDiff:
    """vLLM's `_compare`: float32 max abs difference and RMS relative to the expected RMS."""
    delta = actual.float() - expected.float()
    scale = expected.float().square().mean().sqrt().clamp(min=1e-12)
    return TensorDiff(
        max_abs=delta.abs().max().item() if delta.numel() else 0.0,
        relative_rms=(delta.square().mean().sqrt() / scale).item() if delta.numel() else 0.0,
    )


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


@dataclass(frozen=True)
class _Checks:
    """What a timed run found about its outputs (the graph fields None for the host timer)."""

    eager_repeat: TensorDiff
    graph_vs_eager: TensorDiff | None
    graph_deterministic: bool | None
    finite: bool


def bench_forward(
    prepared: PreparedForward,
    options: BenchOptions,
    device: torch.device,
    telemetry: GpuTelemetry | None = None,
) -> RankResult:
    """Rank 0's result of vLLM's schema for one prepared case (plus its protocol, telemetry)."""
    snapshot = StateSnapshot(prepared.state)
    reference = None
    if options.timer == "graph":
        if device.type != "cuda":
            raise ValueError("the graph timer needs a CUDA device; use --timer host on CPU")
        checks, run = _bench_graph(prepared, snapshot, options, device, telemetry)
        timer = TIMER_GRAPH
    else:
        checks, run, reference = _bench_host(prepared, snapshot, options, device, telemetry)
        timer = TIMER_HOST
    rank = RankResult(
        rank=0,
        num_tokens=prepared.num_tokens,
        # vLLM's single-GPU bench writes its replay times to 0.01 µs.
        latency=Latency.from_replays(run.times_us, options.samples, timer).rounded(),
        finite=checks.finite,
        graph_vs_eager=checks.graph_vs_eager,
        eager_repeat=checks.eager_repeat,
        graph_deterministic=checks.graph_deterministic,
        state_reset_bytes=snapshot.nbytes,
        timing_scope="target_only",
        protocol=run.record(Protocol.named(options.protocol)),
        reference=reference,
    )
    if telemetry is None:
        return rank
    return dataclasses.replace(
        rank,
        telemetry=rank_telemetry(
            telemetry, run.readings, "one reading after each sample block", keep_readings=True
        ),
    )


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
) -> tuple[_Checks, BlockRun, ReferenceRun | None]:
    forward = prepared.forward
    with torch.inference_mode():
        forward()  # eager warmup: lazy init, allocator, autotuning
        snapshot.restore()
        eager = first_tensor(forward()).clone()
        snapshot.restore()
        output = first_tensor(forward())
        reference = output.clone()
        yardstick = Yardstick() if options.reference else None
        # (forward, workload) µs of every timed() call, and their thread CPU times' ratio, in
        # order: the protocol's timed replays are its last ones (its sizing probes first).
        paired: list[tuple[float, float, float]] = []
        cpu_ns = [0]

        def run_once() -> float:
            snapshot.restore()
            synchronize(device)
            begin, cpu = time.perf_counter(), time.thread_time_ns()
            forward()
            synchronize(device)
            cpu_ns[0] = time.thread_time_ns() - cpu
            return (time.perf_counter() - begin) * 1e6

        def run_paired() -> float:
            took = run_once()
            forward_cpu = cpu_ns[0]
            assert yardstick is not None
            cpu = time.thread_time_ns()
            workload = yardstick.timed()
            workload_cpu = time.thread_time_ns() - cpu
            ratio = forward_cpu / workload_cpu if workload_cpu > 0 and forward_cpu > 0 else 0.0
            paired.append((took, workload, ratio))
            return took

        timed = run_once if yardstick is None else run_paired
        run = _timed(Replayer(timed, run_once, lambda: None), options, telemetry)
    pace = None
    if yardstick is not None:
        mine = paired[len(paired) - len(run.times_us) :]
        assert [f for f, _, _ in mine] == run.times_us, "the workload's times lost their replays"
        # A clock that did not tick for a pair (0): the wall times' ratio there. This
        # thread's CPU time is the forward's only on one torch thread (the suites' choice).
        cpu = tuple(round(r if r > 0 else f / w, 5) for f, w, r in mine)
        pace = ReferenceRun(
            yardstick.name,
            Latency.from_replays([w for _, w, _ in mine], options.samples, TIMER_HOST).rounded(),
            cpu_ratios=cpu if options.threads == 1 else None,
        )
    return (
        _Checks(
            eager_repeat=tensor_diff(reference, eager),
            graph_vs_eager=None,
            graph_deterministic=None,
            finite=bool(reference.isfinite().all()),
        ),
        run,
        pace,
    )


def _bench_graph(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    options: BenchOptions,
    device: torch.device,
    telemetry: GpuTelemetry | None,
) -> tuple[_Checks, BlockRun]:
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
        if eager.device.type != device.type:
            # A CUDA graph captures only device work: a forward computed elsewhere would
            # be timed as an empty graph (microseconds, whatever the code does).
            raise ValueError(
                f"the forward's output is on {eager.device}, the run on {device}: the graph "
                "timer would time an empty graph; build the model on the device the target "
                "is given, or run with --device cpu"
            )
        captured = capture_forward(forward, snapshot, stream)
        graph, start, end = captured.graph, captured.start, captured.end
        output = first_tensor(captured.outputs)
        graph.replay()
        synchronize(device)
        first = output.clone()
        graph.replay()
        synchronize(device)
        checks = _Checks(
            # Same step from the same restored state: should match exactly.
            eager_repeat=tensor_diff(reference, eager),
            graph_vs_eager=tensor_diff(first, reference),
            graph_deterministic=bool(torch.equal(first, output)),
            finite=bool(output.isfinite().all()),
        )

        def replay_once() -> float:
            graph.replay()
            end.synchronize()
            return start.elapsed_time(end) * 1000

        run = _timed(
            Replayer(replay_once, graph.replay, lambda: synchronize(device)), options, telemetry
        )
    return checks, run
