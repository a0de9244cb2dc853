"""fwdasv.analysis.confirm: the A/B rule on process-level medians."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import simulated_history

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.confirm import (
    MAX_PROCESSES,
    Confirmation,
    ab_indices,
    judge_ab,
    pair_reason,
    run_confirmation,
)
from fwdasv.analysis.detect import detect
from fwdasv.analysis.noise import Noise, estimate_noise
from fwdasv.analysis.status import Status

CONFIRMED, NOT_REPRODUCED, UNDECIDED = Status.CONFIRMED, Status.NOT_REPRODUCED, Status.UNDECIDED


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


def test_three_agreeing_processes_do_not_beat_the_history_floor() -> None:
    # 0.15% apart with 0.01% spread: significant on its own, not against 0.2% noise.
    verdict = judge_ab([1.0, 1.0001, 0.9999], [1.0015, 1.0016, 1.0014], 0.2)
    assert verdict.variance == "floor" and verdict.sd_pct == pytest.approx(0.2)
    assert verdict.status != CONFIRMED, verdict.summary()


def test_a_noisier_run_uses_its_own_variance() -> None:
    verdict = judge_ab([1.0, 1.02, 0.98], [1.01, 1.03, 0.99], 0.1)
    assert verdict.variance == "observed" and verdict.dof == 4
    assert verdict.status == UNDECIDED and verdict.more_processes > 0


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
    # issue 20: an interval of about [-17%, +16%] is below a claimed +40% step's half,
    # but a real +10% step would have come out the same: it rules nothing out.
    a = [1.0, 1.18, 0.85]
    b = [1.0, 0.84, 1.17]
    verdict = judge_ab(a, b, 1.0, claimed_pct=50.0, min_effect_pct=5.0)
    assert verdict.upper_pct < verdict.tested_pct  # the old rule said not-reproduced
    assert verdict.status == Status.UNDECIDED and verdict.noise_limited
    assert verdict.label == "undecided at this noise"
    assert "could not have excluded a +5% (min-effect) step" in verdict.summary()
    assert verdict.more_processes > 0
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
