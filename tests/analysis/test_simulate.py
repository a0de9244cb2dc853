"""`fwdasv.analysis.simulate`: the GPU-like histories (the scripts that use them at scale:
tests/bench/).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import simulated_history

from fwdasv.analysis import simulate as sim


def test_simulator_is_reproducible_by_seed() -> None:
    one = simulated_history(21, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
    two = simulated_history(21, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
    other = simulated_history(22, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
    assert one == two
    assert one.samples != other.samples
    machine = sim.simulate_machine(np.random.default_rng(5))
    assert machine == sim.simulate_machine(np.random.default_rng(5))


def test_a_machine_with_fixed_noise_keeps_the_rest_of_its_draws() -> None:
    """verdict_quality.py --between-pct: every series (canary too) at that noise; the other
    fields drawn as without it, so the histories differ in their noise alone."""
    drawn = sim.simulate_machine(np.random.default_rng(5), series=3)
    fixed = sim.simulate_machine(
        np.random.default_rng(5), series=3, spec_overrides={"between_pct": 0.2}
    )
    for a, b in zip((*drawn.series, drawn.canary), (*fixed.series, fixed.canary), strict=True):
        assert b.spec.between_pct == 0.2 != a.spec.between_pct
        assert (b.spec.base_s, b.spec.within_pct) == (a.spec.base_s, a.spec.within_pct)
    assert fixed.env_index == drawn.env_index


def test_simulated_noise_and_levels_are_what_the_spec_says() -> None:
    history = simulated_history(23, between_pct=0.3, within_pct=0.2, commits=4000)
    medians = np.log([m for m in history.medians() if m is not None])
    assert np.std(medians) * 100 == pytest.approx(history.spec.true_noise_pct, rel=0.05)
    assert history.level(10) == history.spec.base_s
    stepped = simulated_history(23, shifts=(sim.Shift(30, 2.0), sim.Shift(40, 1.0, sim.ENV)))
    assert stepped.level(45) == pytest.approx(stepped.spec.base_s * 1.02 * 1.01)
    assert stepped.level(45, (sim.CODE,)) == pytest.approx(stepped.spec.base_s * 1.02)


def test_asv_stored_values_are_what_asv_computes() -> None:
    history = simulated_history(24)
    stored = history.asv_stored()[0]
    assert stored is not None
    assert stored["median"] == pytest.approx(float(np.median(history.samples[0])))
    assert stored["ci_99_a"] < stored["median"] < stored["ci_99_b"]
    assert stored["repeat"] == len(history.samples[0])


def test_asv_detector_runs_as_publish_does() -> None:
    history = simulated_history(25, between_pct=0.1, shifts=(sim.Shift(30, 4.0),))
    jumps = sim.asv_regressions(history, (0.05, 0.01))
    assert jumps[0.01] == [(29, 30)]
    assert jumps[0.05] == []  # 4% is below asv's default threshold


def test_remeasure_sees_code_changes_only() -> None:
    history = simulated_history(26, between_pct=0.1, shifts=(sim.Shift(30, 1.5, sim.ENV),))
    a, b = sim.remeasure(history, 20, 40, 200, np.random.default_rng(0))
    assert np.median(b) / np.median(a) == pytest.approx(1.0, abs=0.002)
