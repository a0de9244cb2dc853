"""bench/fleet/schedule_sim.py at small scale: the fleet's queue measures every commit once,
a straggler costs it less than the static split, and a lost node's commits are re-run."""

from __future__ import annotations

import random

from helpers import bench_script


def test_pulled_work_beats_the_static_split_and_survives_a_lost_node() -> None:
    with bench_script("fleet/schedule_sim.py") as sim:
        costs = sim.commit_costs(80, random.Random(0))
        clean = sim.pulled(costs, sim.speeds(8, False), None)  # asserts each commit once
        slow = sim.pulled(costs, sim.speeds(8, True), None)
        lost = sim.pulled(costs, sim.speeds(8, True), clean.wall_s / 2)
        static = sim.static(costs, sim.speeds(8, True), None)
        static_lost = sim.static(costs, sim.speeds(8, True), clean.wall_s / 2)
    assert clean.wall_s < slow.wall_s < static.wall_s
    assert lost.reruns == sim.GPUS_PER_NODE and lost.unmeasured == 0
    assert static_lost.unmeasured > 0
