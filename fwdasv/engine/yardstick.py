"""A fixed CPU workload timed beside the forward, in the same process: the host's pace.

On a shared CPU box the machine's own speed moves between processes (the same commit's
forward: 11% coefficient of variation over 12 fresh processes on the 2-core VM), but it
moves for everything in the process alike: the forward's time over this workload's,
timed right after each replay, varied by 1.2-2.3% there, while a 14% step still read
+14.9% (docs/measurements.md, "the host's pace"). `Yardstick` is a chain of LAYERS float32
GEMMs with ReLU and a residual (TOKENS x WIDTH activations, WIDTH x WIDTH weights;
0.35-0.5 ms on one thread of that VM), fixed weights from a fixed seed and no code of
the project: a step in the relative time is the forward's, unless torch's BLAS changed
between the commits. `--reference` on the host timer (`fwdasv.engine.capture`) times it
after every timed replay into the rank's `reference` block; the suites' `track_relative`
is the block medians of the forward's time over the workload's (thread CPU time: a
neighbour's share of the CPU lengthens neither; docs/timing.md).
"""

from __future__ import annotations

import time

import torch

WORKLOAD = "gemm-relu-chain-64x256x4"
TOKENS, WIDTH, LAYERS = 64, 256, 4
SEED = 20261203


class Yardstick:
    """The fixed workload on the CPU; `timed()` runs it once and returns its time in µs."""

    name = WORKLOAD

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(SEED)
        self.x = torch.randn(TOKENS, WIDTH, generator=generator)
        self.weights = [
            torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH**0.5 for _ in range(LAYERS)
        ]
        with torch.inference_mode():
            for _ in range(3):  # first calls: BLAS's own set-up, page faults
                self.run()

    def run(self) -> torch.Tensor:
        x = self.x
        for weight in self.weights:
            x = x + torch.relu(x @ weight)
        return x

    def timed(self) -> float:
        begin = time.perf_counter()
        self.run()
        return (time.perf_counter() - begin) * 1e6
