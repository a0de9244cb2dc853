"""Rank 0's clock for every rank: timestamps of a pipeline's stages on one time line.

A host ping-pong with rank 0 bounds the offset between host clocks without
assuming synchronised nodes (ranks on rank 0's host read its CLOCK_MONOTONIC
itself); on a GPU an event recorded on the idle device, bracketed by host
timestamps, ties GPU time to the host. Pure parts (`offset_from_trials`,
`interpolate`) are apart from the collectives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# Ping-pongs and anchor brackets per clock: the narrowest of them bounds the
# error, and more trials find a narrower one (a few ms in all).
CLOCK_TRIALS = 200

HostClock = Callable[[], int]


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
