"""Run under torchrun (2 ranks, gloo): PipelineClock against a rank whose clock is off.

    clock_probe.py OUT OFFSET_NS DRIFT

1. Rank 1's host clock reads OFFSET_NS ahead of the true one: the offset the
   clock recovers for rank 1 should be -OFFSET_NS within its uncertainty.
2. Rank 1's clock also runs fast by DRIFT (1e-2: 10 ms per second). Between a
   start and an end clock, rank 0 asks rank 1 for a mark at a moment it
   brackets with its own clock; rank 1 maps the mark to rank 0's clock
   (interpolated between the two clocks) and the mark should land inside the
   bracket, give or take rank 1's uncertainty.

Rank 0 writes what it saw to OUT as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist

from fwdasv.engine.clock import PipelineClock


def main() -> None:
    out, offset_ns, drift = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    group, cpu = dist.group.WORLD, torch.device("cpu")
    t_ref = time.perf_counter_ns()

    def offset_clock() -> int:
        return time.perf_counter_ns() + offset_ns

    def drifting_clock() -> int:
        now = time.perf_counter_ns()
        return now + offset_ns + round(drift * (now - t_ref))

    # 0. both ranks read this host's clock: no ping-pong needed
    shared = PipelineClock(group, cpu)
    same_host = {
        "offset_us": shared.offset_us,
        "uncertainty_us": shared.uncertainty_us,
        "method": shared.method,
    }

    # 1. a constant offset
    clock = PipelineClock(
        group, cpu, host_clock=offset_clock if rank == 1 else time.perf_counter_ns
    )
    offset = {
        "offset_us": clock.offset_us,
        "uncertainty_us": clock.uncertainty_us,
        "method": clock.method,
    }

    # 2. offset and drift, a mark between a start and an end clock
    host_clock = drifting_clock if rank == 1 else time.perf_counter_ns
    start = PipelineClock(group, cpu, host_clock=host_clock)
    time.sleep(0.3)
    message = torch.zeros(1, dtype=torch.int64)
    bracket = mark = None
    if rank == 0:
        t_ask = time.perf_counter_ns()
        dist.send(message, 1)
        dist.recv(message, 1)
        bracket = [t_ask / 1000, time.perf_counter_ns() / 1000]
    else:
        dist.recv(message, 0)
        mark = host_clock()
        dist.send(message, 0)
    time.sleep(0.3)
    end = PipelineClock(group, cpu, host_clock=host_clock)
    report = {
        "same_host": same_host,
        "constant": offset,
        "bracket_us": bracket,
        "mark_us": None if mark is None else start.timestamp(mark, end),
        # Without the interpolation: the start clock's offset alone.
        "mark_start_offset_only_us": None
        if mark is None
        else start.origin_us + start.elapsed_us(mark),
        "uncertainty_us": max(start.uncertainty_us, end.uncertainty_us),
    }
    reports: list = [None, None]
    dist.all_gather_object(reports, report)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(reports, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
