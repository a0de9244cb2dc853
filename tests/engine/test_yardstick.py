"""`fwdasv.engine.yardstick`: the reference workload timed beside every timed replay."""

from __future__ import annotations

import dataclasses

from helpers import FAST, engine

from fwdasv.core import results


def test_the_reference_workload_is_timed_beside_every_timed_replay(tmp_path, env):
    """--reference: fwdasv's fixed workload runs right after each timed replay in the same
    process; its times pair up with the forward's, replay by replay, and the forward's time
    over it is each block's median ratio."""
    from fwdasv.engine.yardstick import WORKLOAD

    out = tmp_path / "out.json"
    args = [*FAST, "--timer", "host", "--reference", "--case", "p=16", "--output-json", str(out)]
    done = engine(args, env, tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = results.load(out)
    rank = case.ranks[0]
    assert rank.reference is not None and rank.reference.workload == WORKLOAD
    assert rank.reference.latency.count == rank.latency.count == 6  # 2 samples of 3
    assert all(t > 0 for t in rank.reference.latency.samples_us)
    # Each block's median of the pairs' ratios of this thread's CPU time: a neighbour that
    # takes the CPU away from a long forward (not from the short workload) moves neither.
    relative = rank.reference.relative(rank.latency, 2)
    ratios = rank.reference.cpu_ratios
    assert ratios is not None and len(ratios) == 6 and all(r > 0 for r in ratios)
    assert relative == [sorted(ratios[:3])[1], sorted(ratios[3:])[1]]
    # A file without them (written before): the wall times' ratios.
    wall = dataclasses.replace(rank.reference, cpu_ratios=None)
    forward, workload = rank.latency.samples_us, rank.reference.latency.samples_us
    walls = [a / b for a, b in zip(forward, workload, strict=True)]
    assert wall.relative(rank.latency, 2) == [sorted(walls[:3])[1], sorted(walls[3:])[1]]
    assert results.ReferenceRun.from_json(wall.to_json(), "reference") == wall
    # Without the flag, no block: the file is as before.
    plain = engine(
        [*FAST, "--timer", "host", "--case", "p=16", "--output-json", str(tmp_path / "p.json")],
        env,
        tmp_path,
    )
    assert plain.returncode == 0, plain.stderr
    (case,) = results.load(tmp_path / "p.json")
    assert case.ranks[0].reference is None and "reference" not in case.ranks[0].to_json()
