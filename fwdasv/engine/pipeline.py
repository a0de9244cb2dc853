"""Pipeline streaming across torchrun ranks: each rank runs one stage of N.

Microbatches follow each other through the stages with no host barrier between them, at
most one per stage in flight (the last stage hands a token back to the first, device to
device), so a latency includes the transfers and a stage's wait for the previous one,
but no queue that grows with the stream. An eager pass (receive, run, send on) gives
every stage its reference. On a GPU each stage is a CUDA graph plus a restore graph;
`count + 2 * margin` microbatches are streamed with isend/irecv, CUDA events around
each stage graph are mapped to rank 0's clock (`PipelineClock`), and a microbatch's
latency is the last stage's end minus the first stage's start; the `margin` microbatches
at each end (fill and drain) are dropped by id. On a CPU the same steps run eagerly over
gloo with host timestamps. Ranks agree on every failure they detect before moving on
(`fwdasv.engine.ranks`); a rank that dies mid-stream takes the group down (torchrun
stops the others) instead of leaving it hanging.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from fwdasv.core.cases import BenchCase
from fwdasv.core.errors import describe_error
from fwdasv.core.files import check_output_path
from fwdasv.core.results import EngineInfo, PipelineTimeline, RankResult, TensorDiff
from fwdasv.core.stats import Latency
from fwdasv.engine.capture import StateSnapshot, synchronize, tensor_diff
from fwdasv.engine.clock import HostClock, PipelineClock
from fwdasv.engine.config import EngineConfig
from fwdasv.engine.ranks import (
    Groups,
    Topology,
    agree,
    raise_failures,
    recv_object,
    send_object,
    started,
)
from fwdasv.targets.base import PreparedForward, Target

TIMER_PIPELINE_GPU = "pipeline_correlated_gpu_events_rank_max"
TIMER_PIPELINE_HOST = "pipeline_host_perf_counter"


def _layout(tensors: dict[str, torch.Tensor]) -> list[tuple[str, list[int], str]]:
    """What a stage sends on: (name, shape, dtype) of its non-empty tensors, in order."""
    return [(name, list(t.shape), str(t.dtype)) for name, t in tensors.items() if t.numel()]


def _layout_problem(
    sent: list[tuple[str, list[int], str]], received: dict[str, torch.Tensor]
) -> str | None:
    expected = _layout(received)
    if sorted(sent) != sorted(expected):
        return f"the previous stage sends {sent} but this stage's received buffers are {expected}"
    scattered = [name for name, tensor in received.items() if not tensor.is_contiguous()]
    if scattered:
        return f"received buffers {scattered} are not contiguous; transfers need contiguous ones"
    return None


def _safe_name(case: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", case) or "case"


# --- one case on one rank ---------------------------------------------------------


class PipelineBench:
    """One case on one rank: eager pass, capture (GPU), stream, timeline.

    Call `eager_pass`, `capture` and `stream` in order on every rank; each of
    the first two ends with an agreement, so a failure anywhere is a
    CaseFailed everywhere.
    """

    def __init__(
        self,
        prepared: PreparedForward,
        topology: Topology,
        groups: Groups,
        device: torch.device,
        iters: int,
        samples: int,
        graph: bool,
        host_clock: HostClock = time.perf_counter_ns,
    ):
        self.prepared = prepared
        self.topology = topology
        self.groups = groups
        self.device = device
        self.iters = iters
        self.samples = samples
        self.use_graph = graph
        self.host_clock = host_clock
        self.snapshot: StateSnapshot | None = None
        self.input_snapshot: dict[str, torch.Tensor] = {}
        self.reference: dict[str, torch.Tensor] = {}
        # Names of the tensors received from the previous stage / sent to the next.
        self.receive_names: list[str] = []
        self.send_names: list[str] = []
        self.output: dict[str, torch.Tensor] = {}
        # The stage graph's outputs against eager (GPU only): the worst, and each.
        self.graph_vs_eager: TensorDiff | None = None
        self.intermediate_graph_vs_eager: dict[str, TensorDiff] | None = None

    # eager pass: receive, run, send on; every stage gets its reference.

    def eager_pass(self) -> None:
        topo, control = self.topology, self.groups.control
        error: str | None = None
        upstream_ok = True
        if not topo.first:
            layout = recv_object(topo.previous, control)
            if layout is None:
                upstream_ok = False  # the previous stage failed and says so itself
            else:
                problem = _layout_problem(layout, self.prepared.received)
                send_object(problem, topo.previous, control)
                if problem is not None:
                    upstream_ok, error = False, problem
                else:
                    self.receive_names = [name for name, _, _ in layout]
                    for name in self.receive_names:
                        dist.recv(
                            self.prepared.received[name], topo.previous, group=self.groups.data
                        )
        outputs: dict[str, torch.Tensor] = {}
        if upstream_ok:
            try:
                self.snapshot = StateSnapshot(self.prepared.state)
                self.input_snapshot = {
                    name: tensor.clone() for name, tensor in self.prepared.received.items()
                }
                outputs = self.prepared.forward()
                self.reference = {name: t.clone() for name, t in outputs.items()}
            except Exception as failure:
                error = describe_error(failure)
        if not topo.last:
            if error is not None or not upstream_ok:
                send_object(None, topo.next, control)
            else:
                layout = _layout(outputs)
                send_object(layout, topo.next, control)
                # The next stage reports a mismatch itself; this one just holds back.
                if recv_object(topo.next, control) is None:
                    self.send_names = [name for name, _, _ in layout]
                    for name in self.send_names:
                        dist.send(outputs[name].contiguous(), topo.next, group=self.groups.data)
        synchronize(self.device)
        agree(control, error, "eager pass")

    def _load_inputs(self) -> None:
        for name, saved in self.input_snapshot.items():
            self.prepared.received[name].copy_(saved)

    def _reset(self) -> None:
        assert self.snapshot is not None
        self.snapshot.restore()
        # The forward may write its received buffers in place (a fused
        # residual add does): reset them too, so reset + forward is the eager step.
        self._load_inputs()

    # capture: a restore graph and a stage graph (GPU only).

    def capture(self) -> None:
        error = None
        if self.use_graph:
            try:
                self._capture()
            except Exception as failure:
                error = describe_error(failure)
        agree(self.groups.control, error, "capture")

    def _capture(self) -> None:
        device = self.device
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            # Eager warmup on the capture stream: per-stream init, cuBLAS
            # workspaces and autotuning happen outside capture.
            self._reset()
            self.prepared.forward()
            self._reset()
        stream.synchronize()
        # thread_local: NCCL's watchdog thread keeps polling its events meanwhile.
        self.reset_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.reset_graph, stream=stream, capture_error_mode="thread_local"):
            self._reset()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream, capture_error_mode="thread_local"):
            # Transfers need contiguous tensors: a copy, if any, replays with the stage.
            self.output = {name: t.contiguous() for name, t in self.prepared.forward().items()}
        self.reset_graph.replay()
        self.graph.replay()
        torch.cuda.synchronize(device)
        comparisons = {
            name: tensor_diff(value, self.reference[name]) for name, value in self.output.items()
        }
        self.graph_vs_eager = max(comparisons.values(), key=lambda c: c.relative_rms, default=None)
        self.intermediate_graph_vs_eager = comparisons

    # stream: count + 2 * margin microbatches, no host barrier between them.

    def stream(self) -> tuple[list[Any], list[Any], PipelineClock, PipelineClock]:
        topo, groups, device = self.topology, self.groups, self.device
        total = self.iters * self.samples + 2 * topo.margin
        received = [self.prepared.received[name] for name in self.receive_names]
        starts: list[Any] = []
        ends: list[Any] = []
        synchronize(device)
        clock = PipelineClock(groups.control, device, host_clock=self.host_clock)
        dist.barrier(group=groups.control)
        # At most `num_stages` microbatches in flight, as a serving engine's
        # scheduler keeps its pipeline: the first stage starts microbatch i once
        # the last stage has finished i - num_stages. The token travels device
        # to device; no host waits. Unbounded, a slightly slower later stage
        # would queue ever more microbatches and each latency would grow.
        inflight = topo.num_stages
        credit = torch.zeros(1, device=device)
        takes_credits = topo.first and not topo.last
        gives_credits = topo.last and not topo.first

        def take_credit(index: int) -> None:
            if takes_credits and index >= inflight:
                started(dist.irecv(credit, topo.last_rank, group=groups.credits)).wait()

        given: list[dist.Work] = []

        def give_credit(index: int) -> None:
            # Not waited on here: the next microbatch's receive must not depend on
            # the first stage having taken this token (that would be a cycle).
            if gives_credits and index + inflight < total:
                given.append(started(dist.isend(credit, topo.first_rank, group=groups.credits)))

        if self.use_graph:
            sent = [self.output[name] for name in self.send_names]
            for index in range(total):
                take_credit(index)
                self.reset_graph.replay()
                for buffer in received:
                    started(dist.irecv(buffer, topo.previous, group=groups.data)).wait()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self.graph.replay()
                end.record()
                starts.append(start)
                ends.append(end)
                for tensor in sent:
                    started(dist.isend(tensor, topo.next, group=groups.data)).wait()
                give_credit(index)
        else:
            for index in range(total):
                take_credit(index)
                self._reset()
                for buffer in received:
                    started(dist.irecv(buffer, topo.previous, group=groups.data)).wait()
                synchronize(device)
                starts.append(self.host_clock())
                self.output = self.prepared.forward()
                synchronize(device)
                ends.append(self.host_clock())
                for name in self.send_names:
                    started(
                        dist.isend(self.output[name].contiguous(), topo.next, group=groups.data)
                    ).wait()
                give_credit(index)
        for work in given:
            work.wait()
        synchronize(device)
        end_clock = PipelineClock(groups.control, device, host_clock=self.host_clock)
        return starts, ends, clock, end_clock

    def timeline(
        self, starts: list[Any], ends: list[Any], clock: PipelineClock, end_clock: PipelineClock
    ) -> PipelineTimeline:
        """This rank's microbatch times on rank 0's clock (the seed's `pipeline_timeline`)."""
        return PipelineTimeline(
            stage=self.topology.stage,
            dp_rank=self.topology.replica,
            starts_us=tuple(clock.timestamp(mark, end_clock) for mark in starts),
            ends_us=tuple(clock.timestamp(mark, end_clock) for mark in ends),
            clock_uncertainty_us=max(clock.uncertainty_us, end_clock.uncertainty_us),
            clock_method=clock.method,
        )

    def stage_result(self, context: RankContext) -> StageResult:
        """What this rank found, for the gather: its checks of the streamed (last
        microbatch's) output against the eager reference, and its settings."""
        assert self.snapshot is not None
        return StageResult(
            num_tokens=self.prepared.num_tokens,
            stage=context.topology.stage,
            graph_vs_eager=self.graph_vs_eager,
            intermediate_graph_vs_eager=self.intermediate_graph_vs_eager,
            state_reset_bytes=self.snapshot.nbytes,
            pipeline_vs_eager={
                name: tensor_diff(value, self.reference[name])
                for name, value in self.output.items()
            },
            finite=all(bool(t.isfinite().all()) for t in self.output.values()),
            engine=dataclasses.replace(
                context.config.describe(),
                pipeline_stages=context.topology.num_stages,
                world_size=context.topology.world_size,
            ),
        )


@dataclass(frozen=True)
class StageResult:
    """One rank's part of a case before the latency is known (it needs every rank's timeline)."""

    num_tokens: int
    stage: int
    graph_vs_eager: TensorDiff | None
    intermediate_graph_vs_eager: Mapping[str, TensorDiff] | None
    state_reset_bytes: int
    pipeline_vs_eager: Mapping[str, TensorDiff]
    finite: bool
    engine: EngineInfo

    def rank_result(
        self,
        rank: int,
        timeline: PipelineTimeline,
        latency: Latency,
        margin: int,
        uncertainty_us: float,
    ) -> RankResult:
        return RankResult(
            rank=rank,
            num_tokens=self.num_tokens,
            latency=latency,
            finite=self.finite,
            graph_vs_eager=self.graph_vs_eager,
            state_reset_bytes=self.state_reset_bytes,
            timing_scope="target_only",
            pp_rank=self.stage,
            pipeline_vs_eager=self.pipeline_vs_eager,
            intermediate_graph_vs_eager=self.intermediate_graph_vs_eager,
            clock_uncertainty_us=uncertainty_us,
            engine=self.engine,
            pipeline_timeline=timeline,
            pipeline_warmup_microbatches=margin,
        )


@dataclass(frozen=True)
class _Gathered:
    """What each rank sends the others after the stream: its error, or its timeline and result."""

    error: str | None
    timeline: PipelineTimeline | None = None
    stage: StageResult | None = None


def pipeline_latency(
    timelines: Sequence[PipelineTimeline], num_stages: int, margin: int
) -> tuple[np.ndarray, float]:
    """Per microbatch: last stage's end minus first stage's start, max over replicas.

    Returns the latencies (µs) with `margin` microbatches dropped at each end,
    and the clock uncertainty: the worst replica's first- plus last-stage bound.
    """
    latencies, uncertainties = [], []
    for replica in sorted({t.dp_rank for t in timelines}):
        ranks = [t for t in timelines if t.dp_rank == replica]
        first = [t for t in ranks if t.stage == 0]
        last = [t for t in ranks if t.stage == num_stages - 1]
        assert first and last, f"replica {replica} lacks a first or last stage: {ranks}"
        latencies.append(
            np.max([t.ends_us for t in last], axis=0) - np.min([t.starts_us for t in first], axis=0)
        )
        uncertainties.append(
            max(t.clock_uncertainty_us for t in first) + max(t.clock_uncertainty_us for t in last)
        )
    latency = np.max(latencies, axis=0)
    total = latency.size
    assert total > 2 * margin, f"{total} microbatches cannot lose {margin} at each end"
    return latency[margin : total - margin], float(max(uncertainties))


# --- the rank's part: every case ---------------------------------------------------


@dataclass(frozen=True)
class RankContext:
    topology: Topology
    groups: Groups
    device: torch.device
    config: EngineConfig
    dump_dir: Path | None = None


def bench_case(context: RankContext, target: Target, case: BenchCase) -> list[RankResult]:
    """Every rank's result of vLLM's pipeline schema for one case (on every rank).

    Raises CaseFailed on every rank when any rank failed.
    """
    topo, groups, config = context.topology, context.groups, context.config
    options = config.options
    error = None
    prepared = None
    try:
        prepared = target.prepare(case, options.seed)
    except Exception as failure:
        error = describe_error(failure)
    agree(groups.control, error, "prepare")
    assert prepared is not None
    bench = PipelineBench(
        prepared,
        topo,
        groups,
        context.device,
        iters=options.iters,
        samples=options.samples,
        graph=options.timer == "graph",
    )
    bench.eager_pass()
    bench.capture()
    marks = bench.stream()
    # Local work after the stream can still fail; its error rides on the gather.
    try:
        payload = _Gathered(None, bench.timeline(*marks), bench.stage_result(context))
        if context.dump_dir is not None:
            _dump(context.dump_dir, case, topo.rank, bench.output)
    except Exception as failure:
        payload = _Gathered(describe_error(failure))
    gathered: list[_Gathered] = [_Gathered(None)] * topo.world_size
    dist.all_gather_object(gathered, payload, group=groups.control)
    raise_failures([p.error for p in gathered], "after the stream")
    stages = [
        (p.timeline, p.stage) for p in gathered if p.timeline is not None and p.stage is not None
    ]
    assert len(stages) == topo.world_size, f"{len(stages)} of {topo.world_size} ranks sent a result"
    timelines = [timeline for timeline, _ in stages]
    latency, uncertainty_us = pipeline_latency(timelines, topo.num_stages, topo.margin)
    expected = options.iters * options.samples
    assert latency.size == expected, f"{latency.size} timed microbatches, expected {expected}"
    timer = TIMER_PIPELINE_GPU if bench.use_graph else TIMER_PIPELINE_HOST
    # vLLM's pipeline bench writes its latencies unrounded.
    latency_us = Latency.from_replays(latency.tolist(), options.samples, timer)
    return [
        stage.rank_result(rank, timeline, latency_us, topo.margin, uncertainty_us)
        for rank, (timeline, stage) in enumerate(stages)
    ]


def _dump(directory: Path, case: BenchCase, rank: int, output: dict[str, torch.Tensor]) -> None:
    """Debug output: this rank's streamed tensors, for checks outside the engine.

    Written beside and renamed onto a regular file only (`check_output_path`).
    """
    path = check_output_path(
        directory / f"{_safe_name(case.name)}.rank{rank}.pt", what="--dump-output"
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save({name: t.detach().cpu().clone() for name, t in output.items()}, tmp)
        check_output_path(path, what="--dump-output")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
