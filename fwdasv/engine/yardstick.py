"""A fixed CPU workload timed beside the forward, in the same process: the host's pace.

On a shared or busy CPU box the speed of the machine itself moves. The same
commit's forward (scripts/bisect_trials.py's model, one thread), timed in 12
fresh processes one after the other on the 2-core VM with nothing else
running, had process medians of 2.19-3.12 ms (11% coefficient of variation;
28% in an earlier round), and on the H200 host's CPUs 1.71-2.44 ms. A 14% step
is lost in that, whatever the statistics. But the speed moves for everything
in the process alike: this workload, timed right after each replay of the
forward, moved with it, and the forward's time over the workload's varied by
1.2-2.3% between those processes, while the commit's step read +14.9%
(+13.6% to +14.6% interleaved in one process, `bisect_trials.py --calibrate`;
docs/measurements.md, "the host's pace").

`Yardstick` is that workload: a chain of LAYERS float32 GEMMs with ReLU and a
residual (TOKENS x WIDTH activations, WIDTH x WIDTH weights; 0.35-0.5 ms on one
thread of the 2-core VM), with fixed weights from a fixed seed and no
code of the project: a step in the forward's relative time is the forward's,
unless torch itself changed between the commits (its BLAS moves the workload
too). `--reference` on the host timer (`fwdasv.engine.capture`) times it after
every timed replay; the rank's `reference` block holds its times, replay by
replay beside the forward's, and the suites' `track_relative` is the block
medians of the forward's time over the workload's. The absolute latency stays
what `track_latency` records.
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
