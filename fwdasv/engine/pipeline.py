"""Pipeline streaming across torchrun ranks: each rank runs one stage of N.

A pipeline step is timed as a serving engine runs it: microbatches follow each
other through the stages with no host barrier between them, at most one per
stage in flight (the last stage hands a token back to the first, device to
device), so a microbatch's latency includes the transfers and the waiting a
stage does for the previous one, but no queue that grows with the stream. Each rank builds one stage of the target; an eager pass (receive, run,
send on) gives every stage its reference. On a GPU each stage is captured as
a CUDA graph plus a restore graph, and `count + 2 * margin` microbatches are
streamed with isend/irecv; CUDA events around each stage graph are mapped to
rank 0's clock by `PipelineClock`, and a microbatch's latency is the last
stage's end minus the first stage's start. The first and last `margin`
microbatches (pipeline fill and drain) are dropped by id.

On a CPU the same steps run eagerly over gloo with host perf_counter
timestamps (still mapped to rank 0's clock), `timer` says so and the
graph-only fields are null.

Ranks agree on every failure they can detect (a case the target refuses, an
error in the eager pass, a capture that fails) before moving on, so a failed
case is recorded on all ranks and the next case runs; a rank that dies in the
middle of a stream takes the group down (torchrun stops the others) instead
of leaving it hanging.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from fwdasv.core import results
from fwdasv.core.cases import BenchCase, cases_to_shapes
from fwdasv.core.errors import UserError
from fwdasv.core.stats import Latency
from fwdasv.engine.capture import StateSnapshot, compare, synchronize
from fwdasv.engine.runner import EngineConfig, describe_error, free_device_memory
from fwdasv.targets.base import PreparedForward, Target, TargetSpec

TIMER_PIPELINE_GPU = "pipeline_correlated_gpu_events_rank_max"
TIMER_PIPELINE_HOST = "pipeline_host_perf_counter"
# Ping-pongs and anchor brackets per clock: the narrowest of them bounds the
# error, and more trials find a narrower one (a few ms in all).
CLOCK_TRIALS = 200
# Microbatches dropped at each end of the stream, per stage (the seed's 4 x PP).
MARGIN_PER_STAGE = 4

HostClock = Callable[[], int]


class PipelineError(UserError, ValueError):
    """A pipeline run set up wrongly (world size, stages, devices)."""


class CaseFailed(Exception):
    """A case every rank agreed has failed; the message names the ranks and errors."""


# --- topology ---------------------------------------------------------------------


@dataclass(frozen=True)
class Topology:
    """Where a rank sits: stage `rank % num_stages` of replica `rank // num_stages`.

    Every replica runs the whole pipeline on the same case (as vLLM's DP ranks
    do); a microbatch's latency is the worst replica's.
    """

    rank: int
    world_size: int
    local_rank: int
    num_stages: int

    def __post_init__(self) -> None:
        if self.num_stages < 1 or self.world_size % self.num_stages:
            raise PipelineError(
                f"world size {self.world_size} is not a multiple of {self.num_stages} "
                "pipeline stages; run torchrun with --nproc-per-node equal to "
                "--pipeline-stages (times the number of replicas)"
            )

    @classmethod
    def from_env(cls, num_stages: int) -> Topology:
        try:
            rank = int(os.environ["RANK"])
            world_size = int(os.environ["WORLD_SIZE"])
            local_rank = int(os.environ.get("LOCAL_RANK", rank))
        except (KeyError, ValueError):
            raise PipelineError(
                "RANK and WORLD_SIZE are not set: run the pipeline under torchrun "
                "(or `fwdasv forward --pipeline-stages N`, which starts it)"
            ) from None
        return cls(rank, world_size, local_rank, num_stages)

    @property
    def stage(self) -> int:
        return self.rank % self.num_stages

    @property
    def replica(self) -> int:
        return self.rank // self.num_stages

    @property
    def first(self) -> bool:
        return self.stage == 0

    @property
    def last(self) -> bool:
        return self.stage == self.num_stages - 1

    @property
    def first_rank(self) -> int:
        """The first stage of this rank's replica."""
        return self.replica * self.num_stages

    @property
    def last_rank(self) -> int:
        """The last stage of this rank's replica."""
        return self.first_rank + self.num_stages - 1

    @property
    def previous(self) -> int:
        return self.rank - 1

    @property
    def next(self) -> int:
        return self.rank + 1

    @property
    def margin(self) -> int:
        return MARGIN_PER_STAGE * self.num_stages


@dataclass(frozen=True)
class Groups:
    """`control`: gloo, for objects, agreement and the clock; `data`: the stage tensors;
    `credits`: the last stage's "done" tokens back to the first (its own communicator,
    so they never queue behind the stage tensors)."""

    control: dist.ProcessGroup
    data: dist.ProcessGroup
    credits: dist.ProcessGroup


# --- the clock --------------------------------------------------------------------


def offset_from_trials(trials: Sequence[tuple[int, int, int]]) -> tuple[float, float, int]:
    """Clock offset of a peer from ping-pong trials: (offset_us, uncertainty_us, trial).

    Each trial is (t_send, t_peer, t_reply) in ns: rank 0's clock when it sent,
    the peer's clock when it answered, rank 0's clock when the answer came
    back. The peer read its clock somewhere inside [t_send, t_reply] of rank
    0's time, so `offset = (t_send + t_reply) / 2 - t_peer` is off by at most
    half the round trip; the trial with the shortest round trip is kept
    (Cristian's algorithm) and its index returned. Rank 0's time of a peer
    time t is t + offset.
    """
    if not trials:
        raise ValueError("no clock trials")
    for t_send, _, t_reply in trials:
        if t_reply < t_send:
            raise ValueError(f"a round trip ends before it starts: {t_send} > {t_reply}")
    best = min(range(len(trials)), key=lambda i: trials[i][2] - trials[i][0])
    t_send, t_peer, t_reply = trials[best]
    return ((t_send + t_reply) / 2 - t_peer) / 1000, (t_reply - t_send) / 2000, best


def interpolate(origin_us: float, end_origin_us: float, elapsed_us: float, span_us: float) -> float:
    """Rank 0's time of a local mark `elapsed_us` after the start clock's anchor.

    The start and end clocks put their anchors, `span_us` apart locally, at
    `origin_us` and `end_origin_us` on rank 0's clock; a mark between them is
    placed linearly, which absorbs a constant rate difference between the
    local clock (GPU or host) and rank 0's host clock.
    """
    if span_us <= 0:
        return origin_us + elapsed_us
    return origin_us + elapsed_us / span_us * (end_origin_us - origin_us)


@dataclass(frozen=True)
class HostOffset:
    """This rank's host clock against rank 0's, at one moment.

    `local_ns` is this rank's clock at the winning trial (its answer to rank
    0), the moment `offset_us` was measured at, so a clock drifting against
    rank 0's adds no error between measurement and use.
    """

    offset_us: float
    uncertainty_us: float
    local_ns: int
    # "rank 0", "same host clock" or "ping-pong".
    method: str = "ping-pong"


def shared_clock_identity(host_clock: HostClock) -> str | None:
    """This host's CLOCK_MONOTONIC instance, when `host_clock` reads it; else None.

    Every process of one booted kernel reads the same CLOCK_MONOTONIC, which is
    what `time.perf_counter_ns` reads on Linux: ranks with the same boot id
    share rank 0's clock exactly and need no ping-pong.
    """
    if host_clock is not time.perf_counter_ns:
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def host_offset(group: dist.ProcessGroup, trials: int, host_clock: HostClock) -> HostOffset:
    """This rank's HostOffset against rank 0.

    Ranks on rank 0's host read rank 0's clock itself (offset 0, exact); each
    other rank is ping-ponged `trials` times and the shortest round trip kept.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    identities: list[Any] = [None] * world_size
    dist.all_gather_object(identities, shared_clock_identity(host_clock), group=group)
    same_clock = [i is not None and i == identities[0] for i in identities]
    table: list[tuple[float, float, int]] = [(0.0, 0.0, 0)] * world_size
    message = torch.zeros(1, dtype=torch.int64)
    answers: list[int] = []
    for peer in range(1, world_size):
        if same_clock[peer]:
            continue
        measured = []
        for _ in range(trials):
            if rank == 0:
                t_send = host_clock()
                dist.send(message, peer, group=group)
                dist.recv(message, peer, group=group)
                t_reply = host_clock()
                measured.append((t_send, int(message.item()), t_reply))
            elif rank == peer:
                dist.recv(message, 0, group=group)
                answers.append(host_clock())
                message[0] = answers[-1]
                dist.send(message, 0, group=group)
        if rank == 0:
            table[peer] = offset_from_trials(measured)
    shared: list[Any] = [table]
    dist.broadcast_object_list(shared, src=0, group=group)
    offset_us, uncertainty_us, best = shared[0][rank]
    # Rank 0's clock (or the same clock on its host) is the reference: exact at any moment.
    local_ns = host_clock() if rank == 0 or same_clock[rank] else answers[best]
    method = "rank 0" if rank == 0 else "same host clock" if same_clock[rank] else "ping-pong"
    return HostOffset(offset_us, uncertainty_us, local_ns, method)


class PipelineClock:
    """Correlate this rank's timestamps with rank 0's monotonic host clock.

    A host ping-pong with rank 0 bounds the offset between the host clocks
    without assuming synchronised nodes (ranks on rank 0's host read its
    CLOCK_MONOTONIC itself and need none); on a GPU, an event recorded on the
    idle device and bracketed by host timestamps ties GPU time to the host
    (the narrowest bracket of `trials` wins). `uncertainty_us` bounds both.
    Marks (CUDA events, or host ns on CPU) are placed between a clock made
    before and one made after the stream (`timestamp`).
    """

    def __init__(
        self,
        group: dist.ProcessGroup,
        device: torch.device,
        trials: int = CLOCK_TRIALS,
        host_clock: HostClock = time.perf_counter_ns,
    ):
        host = host_offset(group, trials, host_clock)
        self.offset_us = host.offset_us
        self.method = host.method
        self.anchor_event: torch.cuda.Event | None = None
        self.anchor_ns = 0
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            brackets = []
            for _ in range(trials):
                event = torch.cuda.Event(enable_timing=True)
                begin = host_clock()
                event.record()
                event.synchronize()
                end = host_clock()
                brackets.append((end - begin, (begin + end) / 2, event))
            width_ns, midpoint_ns, self.anchor_event = min(brackets, key=lambda b: b[0])
            # The host offset is a few ms old here; host clocks drift by far
            # less than the bracket's width in that time.
            self.origin_us = midpoint_ns / 1000 + host.offset_us
            self.uncertainty_us = host.uncertainty_us + width_ns / 2000
        else:
            # The host clock is the local clock: anchor at the measurement itself.
            self.anchor_ns = host.local_ns
            self.origin_us = host.local_ns / 1000 + host.offset_us
            self.uncertainty_us = host.uncertainty_us

    def elapsed_us(self, mark: torch.cuda.Event | int) -> float:
        """Local time from this clock's anchor to `mark` (an event, or host ns)."""
        if self.anchor_event is not None:
            assert isinstance(mark, torch.cuda.Event), mark
            return self.anchor_event.elapsed_time(mark) * 1000
        assert isinstance(mark, int), mark
        return (mark - self.anchor_ns) / 1000

    @property
    def anchor(self) -> torch.cuda.Event | int:
        return self.anchor_event if self.anchor_event is not None else self.anchor_ns

    def timestamp(self, mark: torch.cuda.Event | int, end: PipelineClock) -> float:
        """`mark` on rank 0's clock in µs, interpolated between this clock and `end`."""
        return interpolate(
            self.origin_us, end.origin_us, self.elapsed_us(mark), self.elapsed_us(end.anchor)
        )


# --- agreement and transfers ------------------------------------------------------


def agree(group: dist.ProcessGroup, error: str | None, what: str) -> None:
    """Every rank says whether it failed; raise CaseFailed on all ranks if any did."""
    errors: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error, group=group)
    _raise_failures(errors, what)


def _raise_failures(errors: Sequence[str | None], what: str) -> None:
    """CaseFailed naming each distinct error once, with the ranks that had it."""
    by_error: dict[str, list[int]] = {}
    for rank, error in enumerate(errors):
        if error is not None:
            by_error.setdefault(error, []).append(rank)
    if by_error:
        raise CaseFailed(
            "; ".join(
                f"rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))} ({what}): {error}"
                for error, ranks in by_error.items()
            )
        )


def _send_object(obj: Any, dst: int, group: dist.ProcessGroup) -> None:
    dist.send_object_list([obj], dst=dst, group=group)


def _recv_object(src: int, group: dist.ProcessGroup) -> Any:
    box: list[Any] = [None]
    dist.recv_object_list(box, src=src, group=group)
    return box[0]


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
        self.result: dict[str, Any] = {}

    # eager pass: receive, run, send on; every stage gets its reference.

    def eager_pass(self) -> None:
        topo, control = self.topology, self.groups.control
        error: str | None = None
        upstream_ok = True
        if not topo.first:
            layout = _recv_object(topo.previous, control)
            if layout is None:
                upstream_ok = False  # the previous stage failed and says so itself
            else:
                problem = _layout_problem(layout, self.prepared.received)
                _send_object(problem, topo.previous, control)
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
                _send_object(None, topo.next, control)
            else:
                layout = _layout(outputs)
                _send_object(layout, topo.next, control)
                # The next stage reports a mismatch itself; this one just holds back.
                if _recv_object(topo.next, control) is None:
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
            name: compare(value, self.reference[name]) for name, value in self.output.items()
        }
        self.result["graph_vs_eager"] = max(
            comparisons.values(), key=lambda c: c["relative_rms"], default=None
        )
        self.result["intermediate_graph_vs_eager"] = comparisons

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
                dist.irecv(credit, topo.last_rank, group=groups.credits).wait()

        given: list[Any] = []

        def give_credit(index: int) -> None:
            # Not waited on here: the next microbatch's receive must not depend on
            # the first stage having taken this token (that would be a cycle).
            if gives_credits and index + inflight < total:
                given.append(dist.isend(credit, topo.first_rank, group=groups.credits))

        if self.use_graph:
            sent = [self.output[name] for name in self.send_names]
            for index in range(total):
                take_credit(index)
                self.reset_graph.replay()
                for buffer in received:
                    dist.irecv(buffer, topo.previous, group=groups.data).wait()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self.graph.replay()
                end.record()
                starts.append(start)
                ends.append(end)
                for tensor in sent:
                    dist.isend(tensor, topo.next, group=groups.data).wait()
                give_credit(index)
        else:
            for index in range(total):
                take_credit(index)
                self._reset()
                for buffer in received:
                    dist.irecv(buffer, topo.previous, group=groups.data).wait()
                synchronize(device)
                starts.append(self.host_clock())
                self.output = self.prepared.forward()
                synchronize(device)
                ends.append(self.host_clock())
                for name in self.send_names:
                    dist.isend(self.output[name].contiguous(), topo.next, group=groups.data).wait()
                give_credit(index)
        for work in given:
            work.wait()
        synchronize(device)
        end_clock = PipelineClock(groups.control, device, host_clock=self.host_clock)
        return starts, ends, clock, end_clock

    def timeline(
        self, starts: list[Any], ends: list[Any], clock: PipelineClock, end_clock: PipelineClock
    ) -> dict[str, Any]:
        """This rank's microbatch times on rank 0's clock (the seed's `pipeline_timeline`)."""
        return {
            "stage": self.topology.stage,
            "dp_rank": self.topology.replica,
            "starts_us": [clock.timestamp(mark, end_clock) for mark in starts],
            "ends_us": [clock.timestamp(mark, end_clock) for mark in ends],
            "clock_uncertainty_us": max(clock.uncertainty_us, end_clock.uncertainty_us),
            "clock_method": clock.method,
        }

    def checks(self) -> dict[str, Any]:
        """The streamed (last microbatch's) output against the eager reference."""
        return {
            "pipeline_vs_eager": {
                name: compare(value, self.reference[name]) for name, value in self.output.items()
            },
            "finite": all(bool(t.isfinite().all()) for t in self.output.values()),
        }


def pipeline_latency(
    timelines: Sequence[dict[str, Any]], num_stages: int, margin: int
) -> tuple[np.ndarray, float]:
    """Per microbatch: last stage's end minus first stage's start, max over replicas.

    Returns the latencies (µs) with `margin` microbatches dropped at each end,
    and the clock uncertainty: the worst replica's first- plus last-stage bound.
    """
    latencies, uncertainties = [], []
    for replica in sorted({t["dp_rank"] for t in timelines}):
        ranks = [t for t in timelines if t["dp_rank"] == replica]
        first = [t for t in ranks if t["stage"] == 0]
        last = [t for t in ranks if t["stage"] == num_stages - 1]
        assert first and last, f"replica {replica} lacks a first or last stage: {ranks}"
        latencies.append(
            np.max([t["ends_us"] for t in last], axis=0)
            - np.min([t["starts_us"] for t in first], axis=0)
        )
        uncertainties.append(
            max(t["clock_uncertainty_us"] for t in first)
            + max(t["clock_uncertainty_us"] for t in last)
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


def bench_case(context: RankContext, target: Target, case: BenchCase) -> list[dict[str, Any]]:
    """Every rank's dict of vLLM's pipeline schema for one case (on every rank).

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
    payload: dict[str, Any] = {"error": None}
    try:
        payload["timeline"] = bench.timeline(*marks)
        payload["rank"] = _rank_dict(bench, prepared, context)
        if context.dump_dir is not None:
            _dump(context.dump_dir, case, topo.rank, bench.output)
    except Exception as failure:
        payload["error"] = describe_error(failure)
    gathered: list[Any] = [None] * topo.world_size
    dist.all_gather_object(gathered, payload, group=groups.control)
    _raise_failures([p["error"] for p in gathered], "after the stream")
    timelines = [p["timeline"] for p in gathered]
    latency, uncertainty_us = pipeline_latency(timelines, topo.num_stages, topo.margin)
    expected = options.iters * options.samples
    assert latency.size == expected, f"{latency.size} timed microbatches, expected {expected}"
    timer = TIMER_PIPELINE_GPU if bench.use_graph else TIMER_PIPELINE_HOST
    latency_us = Latency.from_replays(latency.tolist(), options.samples, timer).to_json(
        round_samples=False
    )
    ranks = []
    for payload, timeline in zip(gathered, timelines, strict=True):
        ranks.append(
            {
                **payload["rank"],
                "pipeline_timeline": timeline,
                "pipeline_warmup_microbatches": topo.margin,
                "clock_uncertainty_us": uncertainty_us,
                "latency_us": latency_us,
            }
        )
    return ranks


def _rank_dict(
    bench: PipelineBench, prepared: PreparedForward, context: RankContext
) -> dict[str, Any]:
    assert bench.snapshot is not None
    return {
        "num_tokens": prepared.num_tokens,
        "pp_rank": context.topology.stage,
        "timing_scope": "target_only",
        "graph_vs_eager": bench.result.get("graph_vs_eager"),
        "intermediate_graph_vs_eager": bench.result.get("intermediate_graph_vs_eager"),
        "state_reset_bytes": bench.snapshot.nbytes,
        **bench.checks(),
        "engine": {
            **context.config.describe(),
            "pipeline_stages": context.topology.num_stages,
            "world_size": context.topology.world_size,
        },
    }


def _dump(directory: Path, case: BenchCase, rank: int, output: dict[str, torch.Tensor]) -> None:
    """Debug output: this rank's streamed tensors, for checks outside the engine."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_safe_name(case.name)}.rank{rank}.pt"
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({name: t.detach().cpu().clone() for name, t in output.items()}, tmp)
    os.replace(tmp, path)


def init_groups(device: torch.device) -> Groups:
    """NCCL for the stage tensors on GPUs (gloo on CPU); always a gloo group for control.

    Objects, agreements and clock pings stay on the host, off the GPU streams
    and apart from the stage tensors' traffic.
    """
    if device.type == "cuda":
        dist.init_process_group(backend="nccl", device_id=device)
        credits = dist.new_group(backend="nccl")
    else:
        dist.init_process_group(backend="gloo")
        credits = dist.new_group(backend="gloo")
    return Groups(control=dist.new_group(backend="gloo"), data=dist.group.WORLD, credits=credits)


def rank_device(config: EngineConfig, topology: Topology) -> torch.device:
    if not config.device.startswith("cuda"):
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if topology.local_rank >= count:
        raise PipelineError(
            f"local rank {topology.local_rank} has no GPU: {count} visible on this host; "
            "start at most one rank per GPU"
        )
    return torch.device("cuda", topology.local_rank)


def run_rank(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    num_stages: int,
    output_json: str | os.PathLike[str] | None,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """This rank's part of a pipeline run (under torchrun); returns the failed cases.

    Rank 0 prints one line per case and rewrites `output_json` after each.
    """
    topology = Topology.from_env(num_stages)
    device = rank_device(config, topology)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        config = dataclasses.replace(config, device=str(device))
    if config.options.timer == "graph" and device.type != "cuda":
        raise PipelineError("the graph timer needs CUDA; use --timer host (or auto) on CPU")
    groups = init_groups(device)
    context = RankContext(
        topology, groups, device, config, Path(dump_output) if dump_output else None
    )
    with torch.inference_mode():
        failed = _run_cases(context, cases, output_json, echo)
    # Only after a clean finish: a rank that raised leaves the group to torchrun,
    # which stops the others; tearing down NCCL with transfers in flight can hang.
    dist.destroy_process_group()
    return failed


def _run_cases(
    context: RankContext,
    cases: Sequence[BenchCase],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> list[str]:
    topology, config = context.topology, context.config
    entries: list[dict[str, Any]] = []
    failed: list[str] = []
    error = None
    target = None
    try:
        spec = TargetSpec.parse(config.target, config.target_options)
        target = spec.build(
            config.device, config.dtype, stage=topology.stage, num_stages=topology.num_stages
        )
    except Exception as failure:
        error = describe_error(failure)
    try:
        agree(context.groups.control, error, "build")
    except CaseFailed as failure:
        # Nothing can run: every case carries the build error.
        for case in cases:
            entries.append(results.error_entry(case.name, case.requests, str(failure)))
            failed.append(case.name)
            _publish(topology, entries, output_json, echo)
        return failed
    assert target is not None
    for case in cases:
        try:
            ranks = bench_case(context, target, case)
            entry = results.case_entry(case.name, case.requests, ranks)
        except CaseFailed as failure:
            entry = results.error_entry(case.name, case.requests, str(failure))
            failed.append(case.name)
        finally:
            free_device_memory(context.device)
        entries.append(entry)
        _publish(topology, entries, output_json, echo)
    return failed


def _publish(
    topology: Topology,
    entries: list[dict[str, Any]],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> None:
    if topology.rank != 0:
        return
    if output_json is not None:
        results.dump(entries, output_json)
    entry = entries[-1]
    echo(results.parse_case_result(entry, entry["case"]).line())


# --- entry point: relaunch under torchrun, or run this rank ---------------------------


def pipeline_main(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Run `cases` through a `stages`-stage pipeline; return the failed case names.

    Under torchrun (RANK set) this is one rank's part, and only rank 0
    returns the failed cases. Otherwise it starts
    `torchrun --nproc-per-node stages -m fwdasv.engine ...` with the same
    settings through `fwdasv.launch` (killed after `timeout_s`) and reads the
    results back, so `fwdasv forward --pipeline-stages N` just works.
    """
    if "RANK" in os.environ:
        failed = run_rank(config, cases, stages, output_json, dump_output, echo)
        # Every rank knows which cases failed; rank 0, which prints and writes
        # the results, is the one to report them (and exit 3).
        return failed if int(os.environ["RANK"]) == 0 else []
    return _relaunch(config, cases, stages, output_json, timeout_s, dump_output, echo)


def _relaunch(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> list[str]:
    from fwdasv.launch import LaunchSpec, launch

    if config.device.startswith("cuda") and torch.cuda.device_count() < stages:
        raise PipelineError(
            f"{stages} pipeline stages need {stages} GPUs; {torch.cuda.device_count()} visible"
        )
    workdir = Path(tempfile.mkdtemp(prefix="fwdasv-pipeline-"))
    shapes = workdir / "cases.json"
    shapes.write_text(json.dumps(cases_to_shapes(cases), indent=1))
    results_path = Path(output_json) if output_json is not None else workdir / "results.json"
    options = config.options
    args = ["-m", "fwdasv.engine", "--target", config.target]
    for key, value in config.target_options.items():
        args += ["--target-option", f"{key}={json.dumps(value)}"]
    args += [
        "--shapes",
        str(shapes),
        "--iters",
        str(options.iters),
        "--samples",
        str(options.samples),
        "--seed",
        str(options.seed),
        "--dtype",
        config.dtype,
        # Each rank takes cuda:LOCAL_RANK.
        "--device",
        "cuda" if config.device.startswith("cuda") else "cpu",
        "--timer",
        options.timer,
        "--warmup-s",
        str(options.warmup_s),
        "--pipeline-stages",
        str(stages),
        "--output-json",
        str(results_path),
    ]
    if dump_output is not None:
        args += ["--dump-output", str(dump_output)]
    spec = LaunchSpec(args, nproc_per_node=stages, timeout_s=timeout_s)
    outcome = launch(
        spec, results_path, workdir / "torchrun.log", echo=echo, cases=[c.name for c in cases]
    )
    # On failure launch raised and the log stays for the user; here all went through.
    shutil.rmtree(workdir, ignore_errors=True)
    return [r.case for r in outcome if not r.ok]
