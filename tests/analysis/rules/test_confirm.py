"""fwdasv.analysis.rules.confirm: the A/B rule on process-level medians."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import simulated_history

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.rules.confirm import (
    MAX_PROCESSES,
    PRIOR_DOF,
    Confirmation,
    ab_indices,
    judge_ab,
    magnitude_pct,
    mirrored,
    pair_reason,
    run_confirmation,
)
from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import ReMeasureStatus, Status

CONFIRMED, NOT_REPRODUCED, UNDECIDED = (
    Status.CONFIRMED,
    Status.NOT_REPRODUCED,
    ReMeasureStatus.UNDECIDED,
)


def _processes(rng: np.random.Generator, level: float, sd_pct: float, n: int) -> list[float]:
    return list(level * np.exp(rng.normal(0, sd_pct / 100, n)))


NOISE = Noise(0.2, 0.2, 0.05, 60, "history", 35.0)


def test_confirm_confirms_a_real_one_percent_step_with_three_processes_each() -> None:
    a = [1e-3 * v for v in (1.000, 1.002, 0.998)]
    b = [1e-3 * v for v in (1.010, 1.012, 1.008)]  # +1%, the history's 0.2% spread
    verdict = judge_ab(a, b, NOISE, claimed_pct=1.0)
    assert verdict.status == CONFIRMED, verdict.summary()
    assert verdict.percent == pytest.approx(1.0, abs=0.01)
    assert verdict.lower_pct > 0 and verdict.processes_a == verdict.processes_b == 3
    # Random runs of 3 + 3: most are decided at once; run_confirmation decides all.
    statuses, sequential = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        a = _processes(rng, 1e-3, 0.2, 3)
        b = _processes(rng, 1.01e-3, 0.2, 3)
        statuses.append(judge_ab(a, b, NOISE, claimed_pct=1.0).status)

        def measure(k: int, rng: np.random.Generator = rng) -> tuple[list[float], list[float]]:
            return _processes(rng, 1e-3, 0.2, k), _processes(rng, 1.01e-3, 0.2, k)

        sequential.append(run_confirmation(measure, NOISE, claimed_pct=1.0).status)
    assert NOT_REPRODUCED not in statuses
    assert statuses.count(CONFIRMED) >= 30, statuses
    assert sequential == [CONFIRMED] * 40, sequential


def test_confirm_does_not_confirm_a_no_op() -> None:
    statuses, sequential = [], []
    for seed in range(50):
        rng = np.random.default_rng(100 + seed)
        a = _processes(rng, 1e-3, 0.2, 3)
        b = _processes(rng, 1e-3, 0.2, 3)
        statuses.append(judge_ab(a, b, NOISE, claimed_pct=1.0).status)

        def measure(k: int, rng: np.random.Generator = rng) -> tuple[list[float], list[float]]:
            return _processes(rng, 1e-3, 0.2, k), _processes(rng, 1e-3, 0.2, k)

        sequential.append(run_confirmation(measure, NOISE, claimed_pct=1.0).status)
    assert CONFIRMED not in statuses and CONFIRMED not in sequential
    assert sequential.count(NOT_REPRODUCED) >= 45, sequential


def test_a_speed_up_is_confirmed_or_ruled_out_as_its_mirror_slowdown_would_be() -> None:
    """A negative claim is judged with B as the old side: the verdict, told B over A, is
    the slowdown's turned over, and a no-op does not confirm a speed-up."""
    confirmed, ruled_out, no_op = [], [], []
    for seed in range(40):
        rng = np.random.default_rng(300 + seed)
        a, b = _processes(rng, 1e-3, 0.2, 12), _processes(rng, 0.55e-3, 0.2, 12)

        def taken(k: int, a: list[float] = a, b: list[float] = b) -> tuple[list, list]:
            return a[:k], b[:k]

        def swapped(k: int, a: list[float] = a, b: list[float] = b) -> tuple[list, list]:
            return b[:k], a[:k]

        faster = run_confirmation(taken, NOISE, claimed_pct=-45.0)
        slower = run_confirmation(swapped, NOISE, claimed_pct=magnitude_pct(-45.0))
        assert faster.status == slower.status == CONFIRMED, faster.summary()
        assert faster == mirrored(slower)
        assert faster.percent == pytest.approx(100 * (np.median(b) / np.median(a) - 1), abs=2)
        assert faster.lower_pct < faster.percent < faster.upper_pct < 0
        assert faster.faster and not slower.faster and "B -4" in faster.summary()
        confirmed.append(faster.status)
        # The same processes with nothing between them: a claimed -45% is ruled out.
        same = _processes(rng, 1e-3, 0.2, 12)

        def flat(k: int, a: list[float] = a, same: list[float] = same) -> tuple[list, list]:
            return a[:k], same[:k]

        ruled_out.append(run_confirmation(flat, NOISE, claimed_pct=-45.0).status)
        # A slower B never confirms a speed-up.
        no_op.append(
            run_confirmation(lambda k, b=b, a=a: (b[:k], a[:k]), NOISE, claimed_pct=-45.0).status
        )
    assert ruled_out == [NOT_REPRODUCED] * 40, ruled_out
    assert CONFIRMED not in no_op, no_op


def test_three_agreeing_processes_do_not_beat_the_history_prior() -> None:
    # 0.15% apart with 0.01% spread: significant on its own, not with the history's 0.2%
    # noise pooled in as a prior of PRIOR_DOF degrees of freedom.
    verdict = judge_ab([1.0, 1.0001, 0.9999], [1.0015, 1.0016, 1.0014], 0.2)
    assert verdict.variance == "pooled" and verdict.dof == 4 + PRIOR_DOF
    assert 0.1 < verdict.sd_pct < 0.2, verdict.summary()
    assert verdict.status != CONFIRMED, verdict.summary()


def test_a_noisier_run_widens_its_own_interval() -> None:
    verdict = judge_ab([1.0, 1.02, 0.98], [1.01, 1.03, 0.99], 0.1)
    assert verdict.variance == "pooled" and verdict.dof == 4 + PRIOR_DOF
    assert verdict.sd_pct > 1.0  # the run's 2% spread, barely moved by the 0.1% prior
    assert verdict.status == UNDECIDED and verdict.more_processes > 0


def test_a_quiet_run_overrules_a_busy_historys_noise_and_rules_the_step_out() -> None:
    """issue 32: a busy box's history (16% noise) reported +74%; 12 + 12 interleaved
    processes show 6-9% and no step. With the history's noise as a floor the interval
    stayed too wide to decide; as a prior the run's own spread decides: not-reproduced."""
    rng = np.random.default_rng(32)
    a = _processes(rng, 1.0, 7.5, 12)
    b = _processes(rng, 0.98, 7.5, 12)
    noise = Noise(16.0, 16.0, 1.0, 29, "blend", 8.0)
    verdict = judge_ab(a, b, noise, claimed_pct=74.0, min_effect_pct=5.0)
    assert verdict.status == NOT_REPRODUCED, verdict.summary()
    assert verdict.upper_pct < 37 and verdict.sd_pct < 10, verdict.summary()


def test_an_interval_that_excludes_the_reported_step_is_not_reproduced() -> None:
    # issue 32: intervals like [-21%, +22%] against a reported +74%, however wide.
    a = [1.0, 1.25, 0.8]
    b = [1.0, 0.78, 1.27]
    verdict = judge_ab(a, b, 1.0, claimed_pct=74.0, min_effect_pct=5.0)
    assert verdict.upper_pct < 74 and verdict.status == NOT_REPRODUCED, verdict.summary()
    # The same run against a claim inside its interval: undecided at this noise.
    inside = judge_ab(a, b, 1.0, claimed_pct=10.0, min_effect_pct=5.0)
    assert inside.status == UNDECIDED, inside.summary()


def test_undecided_measures_more_processes_up_to_the_maximum() -> None:
    rng = np.random.default_rng(1)
    calls: list[int] = []

    def measure(k: int) -> tuple[list[float], list[float]]:
        calls.append(k)
        return _processes(rng, 1.0, 1.0, k), _processes(rng, 1.004, 1.0, k)

    verdict = run_confirmation(measure, 1.0, claimed_pct=1.0)
    assert calls[0] == 3 and sum(calls) <= MAX_PROCESSES
    if verdict.status == UNDECIDED:
        assert verdict.processes_a == MAX_PROCESSES


def test_the_re_measured_pair_reaches_one_commit_past_the_finding() -> None:
    history = simulated_history(4, between_pct=0.1, shifts=(sim.Shift(30, 1.0),))
    (step,) = detect(history.medians(), estimate_noise(history.samples))
    assert ab_indices(step) == (28, 31)
    medians = history.medians()
    medians[28] = None  # failed in the history: the pair reaches past it
    assert ab_indices(step, medians) == (27, 31)


def test_a_run_too_noisy_to_see_a_min_effect_step_is_undecided_at_this_noise() -> None:
    # issue 20: an interval of about [-24%, -5%] with no step reported: its half-width
    # (10%) is twice the +5% min effect, which could have come out the same.
    a = [1.0, 1.06, 0.95]
    b = [0.85, 0.80, 0.90]
    verdict = judge_ab(a, b, 1.0, min_effect_pct=5.0)
    assert verdict.upper_pct < 0
    assert verdict.status == ReMeasureStatus.UNDECIDED and verdict.noise_limited
    assert verdict.label == "undecided at this noise"
    assert "could not have excluded a +5% (min-effect) step" in verdict.summary()
    assert verdict.more_processes > 0
    # issue 32: against a reported step the interval excludes, not-reproduced.
    assert judge_ab(a, b, 1.0, claimed_pct=20.0, min_effect_pct=5.0).status == NOT_REPRODUCED
    # The same spread with a min effect it can resolve rules the claimed step out.
    quiet = judge_ab([1.0, 1.0005, 0.9995], [1.0, 0.9995, 1.0005], 0.1, claimed_pct=2.0)
    assert quiet.status == Status.NOT_REPRODUCED and not quiet.noise_limited
    # Stored and read back, older lines (without the field) read as not noise-limited.
    assert Confirmation.from_json(verdict.to_json()) == verdict
    old = {k: v for k, v in quiet.to_json().items() if k not in ("noise_limited", "min_effect_pct")}
    assert Confirmation.from_json(old).noise_limited is False


def test_the_pair_reason_says_when_a_and_b_are_wider_than_the_finding() -> None:
    history = simulated_history(3, shifts=(sim.Shift(30, 2.0),))
    (step,) = detect(history.medians(), estimate_noise(history.samples))
    a, b = ab_indices(step, history.medians())
    reason = pair_reason(step, a, b)
    assert (a, b) == (step.before_index - 1, step.after_index + 1)
    assert "A 1 commit before its last old one and B 1 commit after its first new one" in reason
    assert pair_reason(step, step.before_index, step.after_index).startswith("the finding's own")


def test_a_stored_confirmation_with_bad_fields_names_the_first_of_them() -> None:
    """`Confirmation.from_json` reads the fields in the order they are listed: with several
    wrong, the error names the first one, whichever reader reads it."""
    stored = judge_ab([1.0, 1.06, 0.95], [0.85, 0.80, 0.90], 1.0).to_json()
    with pytest.raises(ValueError, match=r"confirmation: missing 'upper_pct'"):
        Confirmation.from_json({k: v for k, v in stored.items() if k != "upper_pct"})
    broken = {**stored, "t": "high", "processes_a": 2.5, "variance": None}
    with pytest.raises(ValueError, match=r"'t' is 'high', expected float"):
        Confirmation.from_json(broken)
    with pytest.raises(ValueError, match=r"'processes_a' is 2.5, expected int"):
        Confirmation.from_json({**broken, "t": 1.0})
    with pytest.raises(ValueError, match=r"'variance' is None, expected str"):
        Confirmation.from_json({**broken, "t": 1.0, "processes_a": 3})
    # A bool is not a number, though Python counts it an int.
    with pytest.raises(ValueError, match=r"'percent' is True, expected float"):
        Confirmation.from_json({**stored, "percent": True})
