"""fwdasv.analysis.rules.noise: a series' run-to-run noise from its own history."""

from __future__ import annotations

import math

import pytest
from helpers import simulated_history, with_commit_scaled

from fwdasv.analysis.rules.noise import PRIOR_NOISE_PCT, Noise, estimate_noise


@pytest.mark.parametrize("between_pct", [0.05, 0.2, 0.5])
def test_noise_estimate_is_within_a_factor_of_the_truth(between_pct: float) -> None:
    for seed in range(5):
        history = simulated_history(seed, between_pct=between_pct, outlier_rate=0.03)
        noise = estimate_noise(history.samples)
        ratio = noise.noise_pct / history.spec.true_noise_pct
        assert 1 / 1.5 < ratio < 1.5, (between_pct, seed, noise, history.spec.true_noise_pct)
        assert noise.source == "history" and noise.commits_used == 60


def test_noise_ignores_an_outlier_commit_and_a_step() -> None:
    history = simulated_history(3, between_pct=0.1, within_pct=0.15)
    clean = estimate_noise(history.samples)
    samples = with_commit_scaled(history.samples, 17, 3.0)  # one commit 3% slow
    for i in range(40, 60):  # and a 2% step at commit 40
        samples[i] = [v * 1.02 for v in samples[i]]
    dirty = estimate_noise(samples)
    assert 0.85 < dirty.noise_pct / clean.noise_pct < 1.15, (clean, dirty)


def test_within_noise_comes_from_the_samples_and_floors_the_noise() -> None:
    # Identical medians at every commit but a wide in-run spread: the history
    # says 0, the samples say the median cannot be known better than its error.
    spread = [0.97, 0.98, 0.99, 1.0, 1.0, 1.0, 1.01, 1.02, 1.03]
    history = [[1e-3 * v for v in spread] for _ in range(30)]
    noise = estimate_noise(history)
    assert noise.between_pct == 0.0
    assert noise.within_pct is not None and noise.within_pct > 0.3
    assert noise.noise_pct == pytest.approx(noise.within_pct, rel=0.02)
    assert noise.noise_pct >= noise.within_pct


def test_short_history_falls_back_to_the_prior() -> None:
    history = simulated_history(1, between_pct=0.05, within_pct=0.1)
    none = estimate_noise(history.samples[:3])
    assert (none.source, none.noise_pct, none.between_pct) == ("prior", PRIOR_NOISE_PCT, None)
    few = estimate_noise(history.samples[:8])
    assert few.source == "blend"
    assert few.between_pct is not None and few.between_pct < few.noise_pct < PRIOR_NOISE_PCT
    many = estimate_noise(history.samples)
    assert many.source == "history" and many.dof > few.dof > none.dof


def test_per_process_noise_scales_with_the_processes_a_commit_pooled() -> None:
    noise = Noise(0.2, 0.2, 0.05, 60, "history", 35.0)
    assert noise.per_process(1) == noise
    assert noise.per_process(4).noise_pct == pytest.approx(0.4)


def test_failed_commits_are_skipped() -> None:
    history = simulated_history(2)
    samples = [list(s) for s in history.samples]
    samples[5] = []
    samples[6] = [math.nan, -1.0]
    noise = estimate_noise(samples)
    assert noise.commits_used == 58
