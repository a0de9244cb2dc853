"""bench/verdicts/bisect_simulate.py at small scale: the real `Bisector` on drawn bench
processes names no wrong commit, and a huge step costs one process a probe."""

from __future__ import annotations

import math

from helpers import bench_script


def test_simulated_bisects_name_no_wrong_commit() -> None:
    with bench_script("verdicts/bisect_simulate.py") as simulate:
        scenarios = simulate.SCENARIOS
        outcomes = {
            name: [simulate.trial(scenarios[name], seed, 12) for seed in range(12)]
            for name in ("gpu-1pct", "busy-2x", "cpu-5x", "gpu-suite")
        }
    for name, got in outcomes.items():
        assert not [o for o in got if o[0] == "wrong"], (name, got)
        assert sum(o[0] == "right" for o in got) >= 10, (name, got)
    # A 5x step over 26 commits: the ends once, then one process a probe.
    assert all(runs <= math.log2(26) + 3 for _, _, runs in outcomes["cpu-5x"])
