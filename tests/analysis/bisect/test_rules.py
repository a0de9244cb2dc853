"""`fwdasv.analysis.bisect.rules`: the decision rule on numbers: one comparison (on samples or
on process medians), one probe's classification, the bounds and the next probe.
"""

from __future__ import annotations

import random

from fwdasv.analysis.bisect.rules import (
    Processes,
    bounds,
    classify,
    closer,
    compare_step,
    expected_probes,
    next_probe,
    recheck_order,
)
from fwdasv.analysis.judgment import pooled_spread, process_medians, process_rank_test, process_test
from fwdasv.analysis.status import Status


def _draws(level: float, seed: int, n: int = 12, noise: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + noise * rng.gauss(0, 1)) for _ in range(n)]


LOW, HIGH = _draws(1.0, 1), _draws(1.5, 2)


def test_compare_step_is_directional() -> None:
    up = compare_step(LOW, HIGH, direction=1)
    assert up.outcome == Status.DIFFERENT and up.ratio > 1.4 and up.p_value < 0.002
    # Significantly faster is "same" when looking for a slowdown, "different" for a speedup.
    assert compare_step(HIGH, LOW, direction=1).outcome == Status.SAME
    assert compare_step(HIGH, LOW, direction=-1).outcome == Status.DIFFERENT
    assert compare_step(LOW, _draws(1.0, 3), direction=1).outcome == Status.SAME
    # Within the factor: same even though significant.
    assert compare_step(LOW, _draws(1.03, 4, noise=0.001), direction=1).outcome == Status.SAME
    assert compare_step(LOW[:3], HIGH[:3], direction=1).outcome == Status.UNKNOWN
    assert compare_step([], HIGH, direction=1).outcome == Status.UNKNOWN


def test_classify_table() -> None:
    assert classify(LOW, _draws(1.0, 5), HIGH, 1).verdict == Status.GOOD
    assert classify(LOW, _draws(1.5, 6), HIGH, 1).verdict == Status.BAD
    # Part way (differs from both ends): neither end, whichever is nearer. The driver
    # measures GOOD, the probe and BAD again (the ends may have been measured in
    # another machine state) and decides by the closer median only after that.
    for level, seed in ((1.15, 7), (1.35, 14)):
        decision = classify(LOW, _draws(level, seed), HIGH, 1)
        assert decision.verdict == Status.PART_WAY, decision
        assert decision.from_good.outcome == decision.to_bad.outcome == Status.DIFFERENT
    # Too few samples, or a mixture neither end explains: measure again.
    assert classify(LOW, _draws(1.5, 8, n=3), HIGH, 1).verdict == Status.UNKNOWN
    noisy = _draws(1.0, 9, n=6, noise=0.3) + _draws(1.5, 10, n=6, noise=0.3)
    decision = classify(LOW, noisy, HIGH, 1)
    assert decision.verdict == Status.UNKNOWN, decision
    # Beyond BAD (regressions often add variance between processes): still BAD's side.
    assert classify(LOW, _draws(2.5, 13), HIGH, 1).verdict == Status.BAD
    assert closer(LOW, _draws(1.4, 11), HIGH) == Status.BAD
    assert closer(LOW, _draws(1.1, 12), HIGH) == Status.GOOD


def _runs(levels: list[float], seed: int, size: int = 10) -> list[float]:
    """One process per level, `size` samples each (0.2% apart), stored one after another."""
    rng = random.Random(seed)
    return [level * (1 + 0.002 * rng.gauss(0, 1)) for level in levels for _ in range(size)]


def test_compare_step_by_processes_is_not_fooled_by_one_process() -> None:
    """Issue 19: a bad commit whose one run read fast, judged on its samples as if they were
    independent runs, named a wrong commit at p=1e-7."""
    good = _runs([20.8, 21.0, 20.6, 21.1], 1)
    bad = _runs([24.0, 24.3, 23.8, 24.1], 2)
    mixed = _runs([21.0, 24.1], 3)  # one process fast, one at BAD's level
    spread = pooled_spread(
        [process_medians(x, 10) for x in (good, bad, mixed, _runs([24.0, 21.2], 4))]
    )
    by_process = Processes(10, spread)
    # On samples: the mixed commit is "different" from GOOD, far beyond alpha.
    assert compare_step(good, mixed, 1, 1.05).outcome == Status.DIFFERENT
    # On process medians, against the spread between one commit's processes: unknown.
    assert compare_step(good, mixed, 1, 1.05, processes=by_process).outcome == Status.UNKNOWN
    # Processes that agree: the step is there, and within the factor is the same level.
    steady = Processes(10, pooled_spread([process_medians(x, 10) for x in (good, bad)]))
    step = compare_step(good, bad, 1, 1.05, processes=steady)
    assert step.outcome == Status.DIFFERENT and 1.14 < step.ratio < 1.17, step
    level = compare_step(bad, _runs([24.2, 23.9], 5), 1, 1.05, processes=steady)
    assert level.outcome == Status.SAME
    # No spread measured yet (one process a commit): a move beyond the factor is unknown.
    alone = Processes(10, None)
    assert compare_step(good[:10], bad[:10], 1, 1.05, processes=alone).outcome == Status.UNKNOWN
    assert classify(good, _runs([20.9, 21.0], 6), bad, 1, processes=steady).verdict == Status.GOOD
    assert classify(good, _runs([24.1, 24.0], 7), bad, 1, processes=steady).verdict == Status.BAD


def test_processes_that_now_and_then_run_fast_do_not_hide_a_clear_step() -> None:
    """A bisect trial on the quiet 2-core VM (2026-12-03): GOOD and BAD, 8 processes each,
    +14% apart, but two of GOOD's processes ran 15-25% fast and one of BAD's 60% slow.
    The t rule's pooled spread took those in and read p=0.12 ("nothing to bisect"); every
    GOOD process but one is below every BAD one, and the ranks say so."""
    good = _runs([3.199, 3.142, 2.726, 3.268, 2.444, 3.309, 3.361, 3.513], 11)
    bad = _runs([3.508, 3.711, 3.585, 3.552, 3.658, 3.739, 5.988, 4.459], 12)
    groups = [process_medians(x, 10) for x in (good, bad)]
    spread = pooled_spread(groups)
    t_only = process_test(groups[0], groups[1], spread)
    assert t_only is not None and not t_only.different(0.002), t_only
    step = compare_step(good, bad, 1, 1.05, processes=Processes(10, spread))
    assert step.outcome == Status.DIFFERENT and step.p_value < 0.002, step
    assert 1.10 < step.ratio < 1.18, step
    # Below RANK_MIN_PROCESSES a side the ranks do not decide: two processes that
    # disagree stay unknown (the test above), and four a side cannot reach alpha.
    assert process_rank_test(groups[0][:4], groups[1][:4], 0.002) is None
    assert process_rank_test(groups[0], groups[1], 0.002) < 0.002
    # Within the factor it is the same level, whatever the ranks say.
    shifted = _runs([v * 1.02 for v in (3.199, 3.142, 3.268, 3.309, 3.361, 3.213)], 13)
    same = compare_step(good, shifted, 1, 1.05, processes=Processes(10, spread))
    assert same.outcome == Status.SAME, same


def test_bounds_and_recheck_order() -> None:
    assert bounds({}, 16) == (0, 16)
    assert bounds({8: Status.BAD, 4: Status.GOOD, 6: Status.BAD, 5: Status.GOOD}, 16) == (5, 6)
    # A decision changed on re-check (5 now bad): the range reopens below it.
    assert bounds({8: Status.BAD, 4: Status.GOOD, 6: Status.BAD, 5: Status.BAD}, 16) == (4, 5)
    # Nearest the final pair (5, 6) first: its own members, then outwards.
    assert recheck_order([8, 4, 6, 5], 5, 6) == [5, 6, 4, 8]


def test_probe_order() -> None:
    assert next_probe(0, 6) == 3
    assert next_probe(0, 1) is None
    assert next_probe(0, 6, {3}) == 2
    assert next_probe(0, 3, {1, 2}) is None
    assert [expected_probes(n) for n in (1, 2, 6, 11, 16)] == [0, 1, 3, 4, 4]
