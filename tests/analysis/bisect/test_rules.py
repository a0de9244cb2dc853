"""`fwdasv.analysis.bisect.rules`: confirm's rule applied to a probe between the ends, on
numbers: the floor from the step, the table, the odd-process guards, bounds and next probe.
"""

from __future__ import annotations

import math
import random

from fwdasv.analysis.bisect.rules import (
    LOADED_PCT,
    bounds,
    expected_probes,
    judge_probe,
    judge_step,
    loaded,
    nearer,
    next_probe,
    probe_floor_pct,
    robust,
    run_noise,
    sides_agree,
    vetoed,
)
from fwdasv.analysis.rules.confirm import magnitude_pct
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import BisectStatus, ReMeasureStatus


def _processes(level: float, seed: int, n: int, sd: float = 0.001) -> list[float]:
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0, sd)) for _ in range(n)]


NOISE = Noise(0.1, 0.1, None, 50, "history", 30.0)  # 0.1% a process, from a long history


def test_the_floor_is_half_the_step_never_below_min_effect() -> None:
    assert probe_floor_pct(1.0) == 0.5
    assert probe_floor_pct(0.4) == 0.3  # min_effect_pct
    assert probe_floor_pct(100.0) == 50.0
    # An -80% step is 5x seen from its faster end: bisected at half of +400%.
    assert math.isclose(magnitude_pct(-80.0), 400.0)
    assert math.isclose(probe_floor_pct(-80.0), 200.0)


def test_a_probe_is_placed_by_both_comparisons() -> None:
    """1% step at 0.1% a process (an H200 decode): three processes of a probe place it against 3+3 ends."""
    good, bad = _processes(1.0, 1, 3), _processes(1.01, 2, 3)
    at_good = judge_probe(good, _processes(1.0, 3, 3), bad, NOISE, 1, change_pct=1.0)
    assert at_good.verdict == BisectStatus.GOOD, at_good.text()
    assert at_good.from_good.status == ReMeasureStatus.NOT_REPRODUCED
    assert at_good.to_bad.status == ReMeasureStatus.CONFIRMED
    at_bad = judge_probe(good, _processes(1.01, 4, 3), bad, NOISE, 1, change_pct=1.0)
    assert at_bad.verdict == BisectStatus.BAD, at_bad.text()
    # Half way: both comparisons confirm a step; no end is named.
    half = judge_probe(good, _processes(1.005, 5, 12), bad, NOISE, 1, change_pct=1.0)
    assert half.verdict in (BisectStatus.PART_WAY, BisectStatus.UNKNOWN), half.text()
    # A speed-up: the faster side is "bad".
    faster = judge_probe(bad, _processes(1.0, 6, 3), good, NOISE, -1, change_pct=-1.0)
    assert faster.verdict == BisectStatus.BAD, faster.text()


def test_one_process_decides_a_huge_step_only() -> None:
    """A doubled forward is beyond what one odd process (up to 60% slow) can fake; a 15%
    step is not: one process of it stays unknown (measure more)."""
    busy = Noise(3.0, 3.0, None, 50, "history", 30.0)
    good, bad = [1.0], [2.0]
    assert robust([2.02], good, busy) and not robust([1.15], good, busy)
    huge = judge_probe(good, [1.97], bad, busy, 1, change_pct=100.0)
    assert huge.verdict == BisectStatus.BAD, huge.text()
    small = judge_probe([1.0], [1.16], [1.15], busy, 1, change_pct=15.0)
    assert small.verdict == BisectStatus.UNKNOWN, small.text()


def test_odd_processes_do_not_carry_a_probe_to_the_other_side() -> None:
    """A good commit's six processes, three of them 30-55% slow (a neighbour): their median
    reads at BAD's level, but half lie below the midpoint: not placed."""
    busy = Noise(3.0, 3.0, None, 50, "history", 30.0)
    good, bad = _processes(1.0, 7, 6, 0.02), _processes(1.15, 8, 6, 0.02)
    odd = [1.02, 0.95, 0.81, 1.55, 1.32, 1.42]
    assert not sides_agree(good, odd, bad, BisectStatus.BAD, 1)
    assert judge_probe(good, odd, bad, busy, 1, change_pct=15.0).verdict == BisectStatus.UNKNOWN
    assert sides_agree(good, _processes(1.15, 9, 6, 0.02), bad, BisectStatus.BAD, 1)


def test_a_probe_its_comparisons_place_but_its_processes_do_not_is_vetoed() -> None:
    """The demo's loaded CI run: a good probe, 9 of its 12 processes at GOOD's level and 3
    at BAD's (+60%). Both comparisons place it good, but 3 of 12 across the midpoint is
    more than sides_agree allows (2): `vetoed`, so bisect measures it again on fresh
    processes. A probe the noise leaves undecided, or one placed, is not vetoed."""
    busy = Noise(3.0, 3.0, None, 50, "history", 30.0)
    good, bad = _processes(1.0, 10, 12, 0.02), _processes(1.6, 11, 12, 0.02)
    burst = [1.6 * v if i % 4 == 0 else v for i, v in enumerate(_processes(1.0, 12, 12, 0.02))]
    judged = judge_probe(good, burst, bad, busy, 1, change_pct=60.0)
    assert judged.verdict == BisectStatus.UNKNOWN and vetoed(judged), judged.text()
    assert judged.from_good.status == ReMeasureStatus.NOT_REPRODUCED, judged.text()
    clean = judge_probe(good, _processes(1.0, 13, 3, 0.02), bad, busy, 1, change_pct=60.0)
    assert clean.verdict == BisectStatus.GOOD and not vetoed(clean), clean.text()
    half = judge_probe(good, _processes(1.26, 14, 12, 0.02), bad, busy, 1, change_pct=60.0)
    # Half way: both comparisons confirm a step (part-way); nothing a burst made.
    assert half.verdict == BisectStatus.PART_WAY and not vetoed(half), half.text()


def test_a_probe_beyond_an_end_by_half_the_step_is_not_placed() -> None:
    """A 15% step: a good probe whose processes all ran inside a neighbour's burst read
    +53% (simulated, docs/measurements.md section 42), both comparisons "placed" it bad,
    and bisect named a wrong commit. A commit of a one-step range sits at one of two
    levels; past BAD by half the step or more it is not placed (and, its comparisons
    leaning, measured again on fresh processes: `vetoed`). At BAD's level, or a little
    past it, it is placed as before; the same holds below GOOD for a speed-up's end."""
    busy = Noise(2.0, 2.0, None, 50, "history", 30.0)
    good, bad = _processes(1.0, 20, 6, 0.02), _processes(1.15, 21, 6, 0.02)
    burst = judge_probe(good, _processes(1.53, 22, 3, 0.02), bad, busy, 1, change_pct=15.0)
    assert burst.verdict == BisectStatus.UNKNOWN and burst.overshoot == "BAD", burst.text()
    assert vetoed(burst) and burst.text().endswith("M beyond BAD by half the step or more")
    at_bad = judge_probe(good, _processes(1.17, 23, 3, 0.02), bad, busy, 1, change_pct=15.0)
    assert at_bad.verdict == BisectStatus.BAD and not at_bad.overshoot, at_bad.text()
    below = judge_probe(good, _processes(0.8, 24, 3, 0.02), bad, busy, 1, change_pct=15.0)
    assert below.verdict == BisectStatus.UNKNOWN and below.overshoot == "GOOD", below.text()


def test_ends_and_the_run_s_own_noise() -> None:
    assert run_noise([[1.0], [2.0]]) is None  # no commit with two processes yet
    noise = run_noise([[1.0, 1.01, 0.99], [2.0, 2.02]])
    assert noise is not None and 0.5 < noise.noise_pct < 1.5 and noise.dof == 3
    step = judge_step(
        [1.0, 1.001, 0.999], [1.02, 1.021, 1.019], NOISE, 1, claimed_pct=None, min_effect_pct=0.3
    )
    assert step.status == ReMeasureStatus.CONFIRMED and 1.9 < step.percent < 2.1
    same = judge_step(
        _processes(1.0, 10, 6),
        _processes(1.0, 11, 6),
        NOISE,
        1,
        claimed_pct=2.0,
        min_effect_pct=0.3,
    )
    assert same.status == ReMeasureStatus.NOT_REPRODUCED


def test_bounds_and_probe_order() -> None:
    assert bounds({}, 16) == (0, 16)
    assert bounds(
        {8: BisectStatus.BAD, 4: BisectStatus.GOOD, 6: BisectStatus.BAD, 5: BisectStatus.GOOD}, 16
    ) == (5, 6)
    assert next_probe(0, 6) == 3
    assert next_probe(0, 1) is None
    assert next_probe(0, 6, {3}) == 2
    assert next_probe(0, 3, {1, 2}) is None
    assert [expected_probes(n) for n in (1, 2, 6, 11, 16, 26)] == [0, 1, 3, 4, 4, 5]


def test_a_process_loaded_pct_off_its_commits_others_marks_the_run_loaded() -> None:
    """A quiet GPU's slow clock state (+3%) is no load; a burst's +20% is, slow or fast, in
    any commit; a commit of one process says nothing."""
    quiet = [_processes(1.0, 1, 6), [1.0, 1.0, 1.03], [5.0]]
    assert not loaded(quiet)
    below = 1.0 + 0.99 * LOADED_PCT / 100
    assert not loaded([[1.0, 1.0, below]])
    assert loaded([*quiet, [1.0, 1.0, 1.0 + LOADED_PCT / 100]])
    assert loaded([[2.0, 2.0, 2.0 / 1.2]])  # a fast one too
    assert loaded([[1.0, 1.25]])  # of two: each 11-12% off their median, 1.125
    assert not loaded([[1.0, 1.15]])  # 7% off 1.075


def test_a_noisy_probe_nearer_an_end_beyond_doubt_is_placed_by_the_midpoint() -> None:
    """A 1% step at 0.45% a process (an H200 prefill), 12 processes a commit: a probe at
    BAD's level is confirmed beyond GOOD, but M->BAD cannot rule out half the step at this
    noise (undecided), so the comparisons alone never place it (57% of such searches
    named their commit, docs/measurements.md section 45). Its mean is on BAD's side of the
    midpoint beyond doubt: placed bad. The same processes 0.4% past BAD (over a quarter
    of the step: no level of a one-step range) or 0.5% below it (at the midpoint) are
    not placed; a speed-up's probe is placed the same way, mirrored."""
    prefill = Noise(0.45, 0.45, None, 50, "history", 30.0)
    good, bad = _processes(1.0, 42, 12, 0.0045), _processes(1.01, 142, 12, 0.0045)
    at_bad = judge_probe(good, list(bad), bad, prefill, 1, change_pct=1.0)
    assert at_bad.from_good.status == ReMeasureStatus.CONFIRMED, at_bad.text()
    assert at_bad.to_bad.status == ReMeasureStatus.UNDECIDED, at_bad.text()
    assert at_bad.verdict == BisectStatus.BAD and at_bad.midpoint == "BAD", at_bad.text()
    assert at_bad.text().endswith("M nearer BAD beyond doubt") and not vetoed(at_bad)
    for shift in (1.004, 0.995):
        off = judge_probe(good, [v * shift for v in bad], bad, prefill, 1, change_pct=1.0)
        assert off.verdict == BisectStatus.UNKNOWN and not off.midpoint, (shift, off.text())
    past = [v * 1.004 for v in bad]
    up = judge_step(good, past, prefill, 1, claimed_pct=None, min_effect_pct=0.5)
    down = judge_step(past, bad, prefill, 1, claimed_pct=None, min_effect_pct=0.5)
    assert (up.status, down.status) == (ReMeasureStatus.CONFIRMED, ReMeasureStatus.UNDECIDED)
    assert nearer(good, past, bad, prefill, 1, up, down, 0.5) is None  # past BAD: no level
    # A speed-up: GOOD is the slower end; a probe at its faster level is bad.
    slow, fast = _processes(1.01, 31, 12, 0.0045), _processes(1.0, 30, 12, 0.0045)
    faster = judge_probe(slow, _processes(1.0, 34, 12, 0.0045), fast, prefill, -1, change_pct=-1.0)
    assert faster.to_bad.status == ReMeasureStatus.UNDECIDED, faster.text()
    assert faster.verdict == BisectStatus.BAD and faster.midpoint == "BAD", faster.text()


def test_one_look_inside_a_burst_is_not_placed_by_the_midpoint() -> None:
    """A 15% step on a busy box (5.4% a process): a good commit's first three processes
    all ran inside a neighbour's burst and read at BAD's level and past it. The midpoint
    would place them bad beyond doubt (simulated: a wrong commit named, docs/measurements.md
    section 45); it waits for the second look, whose processes, interleaved with the
    ends', leave the commit unplaced here (measure more), where the same values taken
    twice would be placed."""
    busy = Noise(5.36, 5.36, None, 50, "history", 30.0)
    good = [0.964, 1.03, 0.988, 0.968, 1.025, 0.999]
    bad = [1.212, 1.059, 1.124, 1.255, 1.191, 1.337]
    burst = [1.167, 1.491, 1.236]
    first = judge_probe(good, burst, bad, busy, 1, change_pct=15.0)
    assert first.to_bad.status == ReMeasureStatus.UNDECIDED, first.text()
    assert first.verdict == BisectStatus.UNKNOWN and not first.midpoint, first.text()
    twice = judge_probe(good, burst * 2, bad, busy, 1, change_pct=15.0)
    assert twice.verdict == BisectStatus.BAD and twice.midpoint == "BAD", twice.text()
    second = judge_probe(good, [*burst, 1.043, 0.992, 1.019], bad, busy, 1, change_pct=15.0)
    assert second.verdict == BisectStatus.UNKNOWN, second.text()
