"""Calibrated verdicts: per-series noise, step detection, confirmation, the simulator."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.confirm import MAX_PROCESSES, ab_indices, judge_ab, run_confirmation
from fwdasv.analysis.detect import detect, mark_drift, segments
from fwdasv.analysis.noise import PRIOR_NOISE_PCT, Noise, estimate_noise, t_isf, t_sf
from fwdasv.analysis.status import Status

CONFIRMED, NOT_REPRODUCED, UNDECIDED = Status.CONFIRMED, Status.NOT_REPRODUCED, Status.UNDECIDED
DRIFT, REGRESSION = Status.DRIFT, Status.REGRESSION

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


def _with(samples: tuple[tuple[float, ...], ...], index: int, pct: float) -> list[list[float]]:
    """The history with commit `index`'s samples scaled by 1 + pct / 100."""
    out = [list(s) for s in samples]
    out[index] = [v * (1 + pct / 100) for v in out[index]]
    return out


# --- noise ---------------------------------------------------------------------------


@pytest.mark.parametrize("between_pct", [0.05, 0.2, 0.5])
def test_noise_estimate_is_within_a_factor_of_the_truth(between_pct: float) -> None:
    for seed in range(5):
        history = _history(seed, between_pct=between_pct, outlier_rate=0.03)
        noise = estimate_noise(history.samples)
        ratio = noise.noise_pct / history.spec.true_noise_pct
        assert 1 / 1.5 < ratio < 1.5, (between_pct, seed, noise, history.spec.true_noise_pct)
        assert noise.source == "history" and noise.commits_used == 60


def test_noise_ignores_an_outlier_commit_and_a_step() -> None:
    history = _history(3, between_pct=0.1, within_pct=0.15)
    clean = estimate_noise(history.samples)
    samples = _with(history.samples, 17, 3.0)  # one commit 3% slow
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
    history = _history(1, between_pct=0.05, within_pct=0.1)
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
    history = _history(2)
    samples = [list(s) for s in history.samples]
    samples[5] = []
    samples[6] = [math.nan, -1.0]
    noise = estimate_noise(samples)
    assert noise.commits_used == 58


def test_student_t_matches_tables() -> None:
    assert t_isf(0.025, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_isf(0.005, 10) == pytest.approx(3.1693, abs=1e-4)
    assert t_isf(0.005, math.inf) == pytest.approx(2.5758, abs=1e-4)
    assert t_sf(0.0, 3) == pytest.approx(0.5)
    assert t_sf(-1.0, 3) == pytest.approx(1 - t_sf(1.0, 3))


# --- detection -----------------------------------------------------------------------


def test_detect_finds_a_clear_step_at_its_commit() -> None:
    history = _history(4, between_pct=0.1, shifts=(sim.Shift(30, 1.0),))
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise)
    assert len(findings) == 1, findings
    step = findings[0]
    assert (step.before_index, step.after_index) == (29, 30), step
    assert step.percent == pytest.approx(1.0, abs=0.15), step
    assert step.z >= step.z_threshold and step.status == REGRESSION
    assert (step.commits_before, step.commits_after) == (30, 30)


def test_detect_reports_nothing_on_a_flat_series_with_outliers() -> None:
    for seed in range(10):
        history = _history(10 + seed, between_pct=0.1)
        samples = _with(history.samples, 20, 2.5)  # one slow commit
        samples = _with(tuple(map(tuple, samples)), 40, 2.0)  # and two in a row
        samples = _with(tuple(map(tuple, samples)), 41, 3.0)
        noise = estimate_noise(samples)
        medians = [float(np.median(s)) for s in samples]
        assert detect(medians, noise) == [], seed


def test_a_new_level_must_hold_for_several_commits() -> None:
    history = _history(5, between_pct=0.1, shifts=(sim.Shift(56, 2.0),))
    noise = estimate_noise(history.samples)
    medians = history.medians()
    for held in (1, 2, 3):  # commits at the new level so far: not reported, nor moved earlier
        assert detect(medians[: 56 + held], noise) == [], held
    (step,) = detect(medians, noise)
    assert (step.after_index, step.commits_after) == (56, 4)


def test_detect_separates_several_steps_and_ignores_an_improvement() -> None:
    shifts = (sim.Shift(15, 1.0), sim.Shift(30, 1.5), sim.Shift(45, -2.0))
    history = _history(6, between_pct=0.1, shifts=shifts)
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise)
    assert [f.after_index for f in findings] == [15, 30], findings
    assert [round(f.percent, 1) for f in findings] == pytest.approx([1.0, 1.5], abs=0.2)
    levels = segments(history.medians(), noise)
    assert [s.start for s in levels] == [0, 15, 30, 45]


def test_detect_indexes_around_failed_commits() -> None:
    history = _history(7, between_pct=0.1, shifts=(sim.Shift(30, 1.0),))
    medians = history.medians()
    medians[29] = None
    medians[30] = None
    (step,) = detect(medians, estimate_noise(history.samples))
    assert (step.before_index, step.after_index) == (28, 31)


def test_minimum_effect_hides_tiny_significant_steps() -> None:
    history = _history(8, between_pct=0.03, within_pct=0.05, shifts=(sim.Shift(30, 0.2),))
    noise = estimate_noise(history.samples)
    assert detect(history.medians(), noise) == []
    (step,) = detect(history.medians(), noise, min_effect_pct=0.1)
    assert step.after_index == 30


def test_a_step_the_canary_shares_is_drift() -> None:
    rng = np.random.default_rng(9)
    machine = sim.simulate_machine(rng, series=3, env_index=25, env_pct=1.5)
    canary_noise = estimate_noise(machine.canary.samples)
    for history in machine.series:
        findings = detect(history.medians(), estimate_noise(history.samples))
        assert findings and all(abs(f.after_index - 25) <= 1 for f in findings), findings
        marked = mark_drift(findings, machine.canary.medians(), canary_noise)
        assert [f.status for f in marked] == [DRIFT] * len(findings)
    # A canary without the shift leaves a regression a regression.
    quiet = _history(10, between_pct=0.1)
    history = machine.series[0]
    findings = detect(history.medians(), estimate_noise(history.samples))
    marked = mark_drift(findings, quiet.medians(), estimate_noise(quiet.samples))
    assert [f.status for f in marked] == [REGRESSION] * len(findings)


# --- confirmation --------------------------------------------------------------------


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
    history = _history(4, between_pct=0.1, shifts=(sim.Shift(30, 1.0),))
    (step,) = detect(history.medians(), estimate_noise(history.samples))
    assert ab_indices(step) == (28, 31)
    medians = history.medians()
    medians[28] = None  # failed in the history: the pair reaches past it
    assert ab_indices(step, medians) == (27, 31)


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
        report = quality.evaluate(seed=3, histories=240, workers=1)
    finally:
        del sys.modules[spec.name]
    rows = dict(report.rows())
    found05, found1, found2, false_alarm, env = (r.value for r in rows["fwdasv detect"])
    assert found1 >= 0.95 and found05 >= 0.65 and found2 >= 0.98, rows["fwdasv detect"]
    assert false_alarm <= 0.01 and env <= 0.03, rows["fwdasv detect"]
    confirmed = [r.value for r in rows["fwdasv detect + confirm"]]
    assert confirmed[1] >= 0.9 and confirmed[3] == 0 and confirmed[4] == 0, confirmed
    assert all(ok for _, ok in report.targets()), report.targets()


def test_one_setting_is_the_smallest_change_worth_reporting_everywhere() -> None:
    """min_effect_pct (percent) is compare's default --factor as a ratio; bisect's probe
    floor follows it only above PROBE_FLOOR_PCT."""
    from fwdasv.analysis.bisect.rules import DEFAULT_PROBE_FACTOR as BISECT_FACTOR
    from fwdasv.analysis.compare import DEFAULT_FACTOR as COMPARE_FACTOR
    from fwdasv.core.verdicts import MIN_EFFECT_PCT, PROBE_FLOOR_PCT, VerdictSettings, factor_of

    assert factor_of(MIN_EFFECT_PCT) == COMPARE_FACTOR == 1.003
    assert factor_of(PROBE_FLOOR_PCT) == BISECT_FACTOR == 1.05
    quiet = VerdictSettings.from_config({"fwdasv": {"min_effect_pct": 1}})
    assert (quiet.min_effect_factor, quiet.probe_factor) == (1.01, 1.05)
    coarse = VerdictSettings.from_config({"fwdasv": {"min_effect_pct": 10}})
    assert (coarse.min_effect_factor, coarse.probe_factor) == (1.1, 1.1)
