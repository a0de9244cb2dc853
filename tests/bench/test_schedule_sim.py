"""bench/fleet/schedule_sim.py at small scale: the fleet's queue measures every commit once,
a straggler costs it less than the static split, and a lost node's commits are re-run."""

from __future__ import annotations

import importlib.util
import random
import sys

from helpers import ROOT


def test_pulled_work_beats_the_static_split_and_survives_a_lost_node() -> None:
    spec = importlib.util.spec_from_file_location(
        "schedule_sim", ROOT / "bench" / "fleet" / "schedule_sim.py"
    )
    assert spec and spec.loader
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim
    try:
        spec.loader.exec_module(sim)
        costs = sim.commit_costs(80, random.Random(0))
        clean = sim.pulled(costs, sim.speeds(8, False), None)  # asserts each commit once
        slow = sim.pulled(costs, sim.speeds(8, True), None)
        lost = sim.pulled(costs, sim.speeds(8, True), clean.wall_s / 2)
        static = sim.static(costs, sim.speeds(8, True), None)
        static_lost = sim.static(costs, sim.speeds(8, True), clean.wall_s / 2)
    finally:
        del sys.modules[spec.name]
    assert clean.wall_s < slow.wall_s < static.wall_s
    assert lost.reruns == sim.GPUS_PER_NODE and lost.unmeasured == 0
    assert static_lost.unmeasured > 0
