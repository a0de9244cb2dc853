"""bench/verdicts/bisect_simulate.py at small scale: the real `Bisector` on drawn bench
processes names no wrong commit, and a huge step costs one process a probe."""

from __future__ import annotations

import math
import random

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


def test_a_drawn_stored_history_gives_bisect_its_prior_as_bisect_takes_it() -> None:
    """`--prior stored`: the prior comes from a drawn stored history through bisect's own
    rule (`remeasure.stored_prior`), loaded processes left out, where `raw` keeps them; the
    searches on it still name no wrong commit."""
    with bench_script("verdicts/bisect_simulate.py") as simulate:
        busy = simulate.SCENARIOS["busy-15pct"]
        wider = 0
        for seed in range(20):
            stored = simulate.prior_of("stored", random.Random(seed), busy, 0.03)
            raw = simulate.prior_of("raw", random.Random(seed), busy, 0.03)
            assert stored is not None and raw is not None
            assert stored.commits_used == raw.commits_used == simulate.STORED_COMMITS
            wider += raw.noise_pct > stored.noise_pct
        truth = simulate.prior_of("true", random.Random(0), busy, 0.03)
        outcomes = [
            simulate.trial(simulate.SCENARIOS[name], seed, 12, "stored")
            for name in ("gpu-1pct", "busy-2x")
            for seed in range(6)
        ]
    # Loaded processes widen the raw history's noise on most draws (15 of these 20); the
    # truth is the sd.
    assert wider > 10, wider
    assert truth is not None and truth.noise_pct == 3.0
    assert not [o for o in outcomes if o[0] == "wrong"], outcomes
    assert sum(o[0] == "right" for o in outcomes) >= 10, outcomes
