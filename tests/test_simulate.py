"""fwdasv.analysis.simulate: the GPU-like histories, and scripts/verdict_quality.py at small scale."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from fwdasv.analysis import simulate as sim

ROOT = Path(__file__).resolve().parent.parent


def _history(
    seed: int,
    between_pct: float = 0.2,
    within_pct: float = 0.2,
    commits: int = 60,
    shifts: tuple[sim.Shift, ...] = (),
    outlier_rate: float = 0.0,
) -> sim.SimHistory:
    rng = np.random.default_rng(seed)
    spec = sim.random_spec(
        rng, between_pct=between_pct, within_pct=within_pct, outlier_rate=outlier_rate
    )
    return sim.simulate(spec, rng, commits, shifts)


# --- simulator -----------------------------------------------------------------------


def test_simulator_is_reproducible_by_seed() -> None:
    one = _history(21, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
    two = _history(21, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
    other = _history(22, outlier_rate=0.03, shifts=(sim.Shift(30, 1.0),))
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
    history = _history(23, between_pct=0.3, within_pct=0.2, commits=4000)
    medians = np.log([m for m in history.medians() if m is not None])
    assert np.std(medians) * 100 == pytest.approx(history.spec.true_noise_pct, rel=0.05)
    assert history.level(10) == history.spec.base_s
    stepped = _history(23, shifts=(sim.Shift(30, 2.0), sim.Shift(40, 1.0, sim.ENV)))
    assert stepped.level(45) == pytest.approx(stepped.spec.base_s * 1.02 * 1.01)
    assert stepped.level(45, (sim.CODE,)) == pytest.approx(stepped.spec.base_s * 1.02)


def test_asv_stored_values_are_what_asv_computes() -> None:
    history = _history(24)
    stored = history.asv_stored()[0]
    assert stored is not None
    assert stored["median"] == pytest.approx(float(np.median(history.samples[0])))
    assert stored["ci_99_a"] < stored["median"] < stored["ci_99_b"]
    assert stored["repeat"] == len(history.samples[0])


def test_asv_detector_runs_as_publish_does() -> None:
    history = _history(25, between_pct=0.1, shifts=(sim.Shift(30, 4.0),))
    jumps = sim.asv_regressions(history, (0.05, 0.01))
    assert jumps[0.01] == [(29, 30)]
    assert jumps[0.05] == []  # 4% is below asv's default threshold


def test_remeasure_sees_code_changes_only() -> None:
    history = _history(26, between_pct=0.1, shifts=(sim.Shift(30, 1.5, sim.ENV),))
    a, b = sim.remeasure(history, 20, 40, 200, np.random.default_rng(0))
    assert np.median(b) / np.median(a) == pytest.approx(1.0, abs=0.002)


# --- the quality script, small ------------------------------------------------------


def test_quality_script_meets_the_targets_at_small_scale() -> None:
    spec = importlib.util.spec_from_file_location(
        "verdict_quality", ROOT / "scripts" / "verdict_quality.py"
    )
    assert spec and spec.loader
    quality = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = quality  # dataclasses look their module up
    try:
        spec.loader.exec_module(quality)
        report = quality.evaluate(seed=3, histories=160, workers=1)
    finally:
        del sys.modules[spec.name]
    rows = dict(report.rows())
    found05, found1, found2, false_alarm, env = (r.value for r in rows["fwdasv detect"])
    assert found1 >= 0.95 and found05 >= 0.65 and found2 >= 0.98, rows["fwdasv detect"]
    assert false_alarm <= 0.01 and env <= 0.03, rows["fwdasv detect"]
    confirmed = [r.value for r in rows["fwdasv detect + confirm"]]
    assert confirmed[1] >= 0.9 and confirmed[3] == 0 and confirmed[4] == 0, confirmed
    assert all(ok for _, ok in report.targets()), report.targets()
    # The edges (issue 19), with room for 160 histories' sampling error.
    edges = {name: [r.value for r in rates] for name, rates in report.edge_rows()}
    assert edges["head1-2%"][0] >= 0.93 and edges["head1-2x"][0] == 1.0, edges
    assert edges["head2-1%"][0] >= 0.88 and edges["head3-2%"][1] >= 0.93, edges
    assert edges["start2-2%"][0] >= 0.9, edges
    assert edges["none (false alarms)"][0] <= 0.06 and edges["none (false alarms)"][1] <= 0.015
    none = report.of("none")
    assert not any(o.alarm_any_confirmed for o in none)  # suspected ones re-measured too


def test_busy_short_histories_find_a_doubled_head_and_stay_quiet_without_one() -> None:
    """scripts/busy_verdicts.py at small scale: 8-commit histories at a busy box's noise
    (3-12% a commit, 10% of commits +10-40% slow). A +60% level of the newest 3 commits
    is a regression in most of them (33% before the undecided edge rule, 89% after, at
    2000 histories); no step, almost never one."""
    spec = importlib.util.spec_from_file_location(
        "busy_verdicts", ROOT / "scripts" / "busy_verdicts.py"
    )
    assert spec and spec.loader
    busy = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = busy
    try:
        spec.loader.exec_module(busy)
        outcomes = busy.evaluate(seed=2, histories=60, commits=8, workers=1)
    finally:
        del sys.modules[spec.name]

    def share(scenario: str, flag: str) -> float:
        mine = [getattr(o, flag) for o in outcomes if o.scenario == scenario]
        return sum(mine) / len(mine)

    assert share("head3+60%", "found_regression") >= 0.8
    assert share("head1+60%", "found_regression") == 0  # one commit: suspected at most
    assert share("none", "alarm") <= 1 / 60 and share("none", "alarm_confirmed") <= 1 / 60
    assert share("head3+60%", "asv_found") <= 0.5  # asv's 5% threshold, the same histories
