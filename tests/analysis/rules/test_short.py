"""fwdasv.analysis.rules.short: steps beside levels of 2-3 commits, judged by their own spread."""

from __future__ import annotations

import numpy as np

from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.levels import level_steps
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.analysis.rules.short import judge_local, short_history_steps
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import HEAD

# issue 32: a package repository's prefill_512 medians over c1..c10 (ms).
PACKAGE_MS = (43, 32, 24, 100, 91, 103, 65, 54, 57, 67)


def _history(levels: list[float], spread: float = 0.002, seed: int = 0) -> list[list[float]]:
    """Per commit, 10 samples about its level (1 ms x level) with `spread` in-run."""
    rng = np.random.default_rng(seed)
    return [list(1e-3 * level * np.exp(rng.normal(0, spread, 10))) for level in levels]


def _medians(history: list[list[float]]) -> list[float | None]:
    return [float(np.median(h)) for h in history]


def test_a_short_level_between_two_others_makes_both_its_steps() -> None:
    """No partition of 10 commits into levels of 4 has three: the fit finds nothing in
    the middle. The 3-commit level's two changes are steps: the 2x at c4 a regression,
    the -37% at c7 an improvement."""
    history = _history([ms / 43 for ms in PACKAGE_MS], spread=0.02)
    noise = estimate_noise(history)
    medians = _medians(history)
    assert level_steps(medians, noise, improvements=True) == []
    steps = detect(medians, noise, improvements=True)
    # The whole-series segmentation also lists the first commit's fall (43 -> 32, 24
    # ms: -36% on 2% in-run spread) as a change of its own.
    assert [(s.after_index, s.status) for s in steps] == [
        (1, Status.IMPROVEMENT),
        (3, Status.REGRESSION),
        (6, Status.IMPROVEMENT),
    ], steps
    assert steps[1].percent > 100 and -45 < steps[2].percent < -30
    # Without --improvements the slowdown alone.
    assert [s.after_index for s in detect(medians, noise)] == [3]


def test_a_run_of_slow_commits_that_returns_is_outliers_not_a_level() -> None:
    history = _history([1.0] * 5 + [1.3] * 3 + [1.0] * 5, spread=0.01)
    medians, noise = _medians(history), estimate_noise(history)
    assert detect(medians, noise, improvements=True, segments=False) == []
    # A level that comes back is two changes until a re-measure says otherwise (the
    # whole-series segmentation): the rise `suspected` (never a regression: the next
    # level is back), the fall an improvement; confirm's A/B decides.
    steps = detect(medians, noise, improvements=True)
    assert [(s.after_index, s.status) for s in steps] == [
        (5, Status.SUSPECTED),
        (8, Status.IMPROVEMENT),
    ], steps


def test_a_doubled_head_after_a_run_of_slow_commits_is_found() -> None:
    """A run of 3 commits 2.5% slow, then the newest commit doubled (the simulator's
    60-commit history that missed its 2x head): the level after the run is not back,
    it only spreads, so the run does not end the head's reference level."""
    levels = [1.0] * 56 + [1.025] * 3 + [2.0]
    history = _history(levels, spread=0.002, seed=3)
    steps = detect(_medians(history), estimate_noise(history), improvements=True)
    assert any(s.after_index == 59 and s.percent > 80 for s in steps), steps


def test_a_short_historys_first_nights() -> None:
    """2 commits before and 2 after a +1.5% step at a quiet series' noise: the fit and
    the edges need more commits; the short rule reports it, `suspected` (confirm
    decides). The newest commit alone: suspected, at the head. 3 + 3: a regression."""
    for levels, after, shows in (
        ([1.0, 1.0, 1.015, 1.015], 2, 2),
        ([1.0, 1.0, 1.0, 1.015], 3, 1),
    ):
        history = _history(levels, spread=0.001)
        (step,) = detect(_medians(history), estimate_noise(history))
        assert (step.after_index, step.status, step.edge) == (after, Status.SUSPECTED, HEAD)
        assert step.commits_after == shows and 1.2 < step.percent < 1.8, step
    history = _history([1.0] * 3 + [1.015] * 3, spread=0.001)
    (step,) = detect(_medians(history), estimate_noise(history))
    assert (step.after_index, step.status) == (3, Status.REGRESSION), step
    # A step-free short history: nothing.
    flat = _history([1.0] * 4, spread=0.001, seed=3)
    assert short_history_steps(_medians(flat), estimate_noise(flat)) == []


def test_the_local_rule_needs_each_commit_beyond_and_takes_a_slow_one_on_top() -> None:
    ref = np.log([1.0, 1.001, 0.999])
    # Two new commits, one far slower than the other: a slow commit on top of a step.
    on_top = judge_local(ref, np.log([1.02, 1.05]), 0.001, 1.0)
    assert on_top is not None and on_top.low > 0.015
    # One commit up and one not: not a level.
    assert judge_local(ref, np.log([1.02, 1.0005]), 0.001, 1.0) is None
    # A faster level: found in the direction asked, not the other.
    assert judge_local(ref, np.log([0.97, 0.971]), 0.001, -1.0) is not None
    assert judge_local(ref, np.log([0.97, 0.971]), 0.001, 1.0) is None


# The demo's decode_bs8_2k (paced ratio), 8 nightly commits, 2026-12-04 (/tmp/lk/demoA):
# 2 commits before SDPA's native GQA, 2 at its level, 4 after the soft-capping regression.
DEMO_DECODE = (41.65, 39.34, 15.87, 15.24, 34.22, 34.34, 34.33, 34.53)


def test_a_start_edge_is_sized_against_its_own_level_not_the_next_ones() -> None:
    """2 | 2 | 4 commits: the fit cannot end a level of 2, so the start edge's reference
    ran through the later step and the -61% speed-up read -25%, the +121% regression
    +70%. Each edge is judged again against the level that ends at the other step."""
    history = _history([v / 40 for v in DEMO_DECODE], spread=0.01)
    steps = detect(_medians(history), estimate_noise(history), improvements=True)
    assert [(s.after_index, s.status) for s in steps] == [
        (2, Status.IMPROVEMENT),
        (4, Status.REGRESSION),
    ], steps
    faster, slower = steps
    assert -65 < faster.percent < -57 and faster.commits_after == 2, faster
    assert 110 < slower.percent < 130 and slower.commits_before == 2, slower


def test_an_edge_that_is_a_fitted_steps_level_seen_again_is_not_reported() -> None:
    """A busy box's +45% step at the 8th of 14 commits (12% noise) and, at the head, 3
    commits that stand +25% above the whole history before them but +5% above the
    level since the step: one step, the head's edge dropped (the same for the start)."""
    ms = (15.3, 14.72, 15.69, 18.21, 19.42, 16.27, 16.19, 22.08, 23.08, 22.39, 19.84, 23.99)
    history = _history([*ms, 22.26, 22.34], spread=0.03, seed=37)
    medians, noise = _medians(history), estimate_noise(history)
    assert [s.after_index for s in detect(medians, noise, segments=False)] == [7]
    # The whole-series segmentation adds the 2-commit rise at the 4th (18.2, 19.4 ms, a
    # level that comes back: two changes until confirm's A/B says otherwise), only
    # `suspected`; the head's edge stays dropped.
    steps = detect(medians, noise)
    assert [s.after_index for s in steps] == [3, 7], steps
    assert steps[0].status == Status.SUSPECTED and steps[1].status == Status.REGRESSION


def test_a_start_edge_next_to_an_excursion_is_sized_by_its_own_level() -> None:
    """The fresh clone's demo (decode_bs8_2k, 12:38 UTC): the 2-commit faster level is
    set apart as an excursion (the level after it is near the one before), so the start
    edge's reference ends there; spikes are judged within that run, not against the
    slower level beyond the cut, which read the -60% step as -42%."""
    fresh = (39.38, 37.71, 15.59, 14.97, 35.94, 35.68, 34.55, 33.96)
    history = _history([v / 40 for v in fresh], spread=0.01, seed=1)
    steps = detect(_medians(history), estimate_noise(history), improvements=True)
    faster = [s for s in steps if s.status == Status.IMPROVEMENT]
    assert [s.after_index for s in faster] == [2], steps
    assert -65 < faster[0].percent < -55, faster
