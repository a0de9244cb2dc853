"""`fwdasv.analysis.compare.compare`: the rule on numbers, asv's (Mann-Whitney on the samples, else
CIs, and the factor) and the default, by the series' run-to-run noise.
"""

from __future__ import annotations

import random

from fwdasv.analysis.compare.compare import DEFAULT_FACTOR, Measurement, judge
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import CompareStatus

FAILED, FIXED, IMPROVED = CompareStatus.FAILED, CompareStatus.FIXED, CompareStatus.IMPROVED
UNCHANGED, UNKNOWN, WORSE = CompareStatus.UNCHANGED, CompareStatus.UNKNOWN, CompareStatus.WORSE
NOT_SIGNIFICANT = CompareStatus.NOT_SIGNIFICANT

# --- the rule, on numbers ----------------------------------------------------------------


def _m(samples: list[float], status: str = "ok", ci: tuple[float, float] | None = None):
    a, b = ci or (None, None)
    median = sorted(samples)[len(samples) // 2] if samples else (a + b) / 2
    return Measurement("c" * 40, status, median, a, b, tuple(samples))


def test_judge_needs_both_significance_and_the_factor() -> None:
    before = [1.0 + 0.001 * i for i in range(20)]
    shifted = [v * 1.10 for v in before]
    assert judge(_m(before), _m(shifted), factor=1.05).verdict == WORSE
    assert judge(_m(shifted), _m(before), factor=1.05).verdict == IMPROVED
    # Significant, but a 10% shift is not beyond a 1.2 factor.
    within = judge(_m(before), _m(shifted), factor=1.2)
    assert within.verdict == UNCHANGED and within.p_value < 0.002
    # asv's strict rule: exactly the factor is not beyond it.
    exact = judge(_m([1.0] * 10), _m([1.1] * 10), factor=1.1)
    assert exact.verdict == UNCHANGED


def test_judge_without_samples_falls_back_to_ci_overlap_or_says_unknown() -> None:
    apart = judge(_m([], ci=(1.0, 1.1)), _m([], ci=(1.3, 1.4)))
    assert (apart.verdict, apart.method) == (WORSE, "ci-overlap")
    overlapping = judge(_m([], ci=(1.0, 1.3)), _m([], ci=(1.2, 1.4)))
    assert overlapping.verdict == NOT_SIGNIFICANT and "CIs overlap" in overlapping.reason
    # Three samples each cannot reach p < 0.002 and an infinite CI says nothing.
    few = judge(
        _m([1.0, 1.0, 1.0], ci=(-float("inf"), float("inf"))),
        _m([2.0, 2.0, 2.0], ci=(-float("inf"), float("inf"))),
    )
    assert few.verdict == UNKNOWN and "too few samples" in few.reason


def test_judge_failures() -> None:
    ok = _m([1.0] * 10)
    failed = Measurement("c" * 40, "failed", None)
    assert judge(ok, failed).verdict == FAILED
    assert judge(failed, ok).verdict == FIXED
    assert COMPARISON.exit_status([]) == 0


def _history(levels: list[float], seed: int = 0) -> list[list[float]]:
    rng = random.Random(seed)
    return [[level * (1 + 0.001 * rng.gauss(0, 1)) for _ in range(10)] for level in levels]


def test_judge_by_noise_tests_the_change_against_the_series_noise() -> None:
    rng = random.Random(7)
    # 60 commits whose level moves by 1% from run to run (each run's samples by 0.1%).
    noise = estimate_noise(_history([1 + 0.01 * rng.gauss(0, 1) for _ in range(60)]))
    assert noise.source == "history" and 0.7 < noise.noise_pct < 1.3, noise
    before = _m([1.0 + 0.0001 * i for i in range(10)])
    # 2%: hugely significant on the samples (Mann-Whitney), not beyond 1% run-to-run noise.
    two = _m([v * 1.02 for v in before.samples])
    assert judge(before, two).verdict == WORSE  # asv's rule, the samples only
    by_noise = judge(before, two, noise=noise)
    assert (by_noise.verdict, by_noise.method) == (NOT_SIGNIFICANT, "noise"), by_noise
    assert "noise 1." in by_noise.reason or "noise 0." in by_noise.reason, by_noise.reason
    assert by_noise.p_value > 0.05
    ten = judge(before, _m([v * 1.10 for v in before.samples]), noise=noise)
    assert (ten.verdict, ten.method) == (WORSE, "noise") and ten.p_value < 1e-6, ten
    faster = judge(before, _m([v / 1.10 for v in before.samples]), noise=noise)
    assert faster.verdict == IMPROVED
    # The factor stays a floor: significant but within it is unchanged.
    floored = judge(before, _m([v * 1.10 for v in before.samples]), factor=1.2, noise=noise)
    assert floored.verdict == UNCHANGED and floored.reason == "significant but within the factor"
    # Too short a history: the prior (1%), taken as known.
    prior = estimate_noise(_history([1.0, 1.0]))
    assert prior.source == "prior" and prior.noise_pct == 1.0
    assert judge(before, _m([v * 1.05 for v in before.samples]), noise=prior).verdict == WORSE
    three = judge(before, _m([v * 1.03 for v in before.samples]), noise=prior)
    assert three.verdict == NOT_SIGNIFICANT and "prior" in three.reason, three
    assert DEFAULT_FACTOR == 1.003


def _process(level: float, seed: int, n: int = 10) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + 0.002 * rng.gauss(0, 1)) for _ in range(n)]


def test_one_unusually_fast_process_is_not_a_slowdown() -> None:
    """Issue 19: `compare` reported 2.2x where one process at the earlier commit read fast."""
    rng = random.Random(3)
    noise = estimate_noise(_history([1 + 0.08 * rng.gauss(0, 1) for _ in range(30)]))
    # Earlier commit: two processes, one unusually fast; its stored median from that one.
    fast, normal = _process(9.1e-3, 1), _process(20e-3, 2)
    before = Measurement("a" * 40, "ok", 9.1e-3, samples=tuple(fast + normal))
    after_samples = _process(20.5e-3, 3) + _process(20.2e-3, 4)
    after = Measurement("b" * 40, "ok", 20.4e-3, samples=tuple(after_samples))
    # By the commit medians and the series' noise alone: a 2.2x slowdown.
    assert judge(before, after, noise=noise).verdict == WORSE
    # By process-level variation (10 samples a process): 2+2 processes cannot tell it,
    # which is no evidence that nothing changed (issue 32: never `unchanged`).
    judged = judge(before, after, noise=noise, process_size=10)
    assert (judged.verdict, judged.method) == (NOT_SIGNIFICANT, "noise+processes"), judged
    assert "2+2 process medians do not reach alpha 0.002" in judged.reason, judged.reason
    assert "measure both commits again" in judged.reason and judged.p_value > 0.002
    # A real 2x step, every process showing it, is still worse.
    slow = Measurement("c" * 40, "ok", 18.4e-3, samples=tuple(_process(18e-3, 5) * 2))
    base = Measurement("d" * 40, "ok", 9.1e-3, samples=tuple(fast + _process(9.2e-3, 6)))
    assert judge(base, slow, noise=noise, process_size=10).verdict == WORSE
    # Samples that do not split into processes of that size: the noise rule alone.
    odd = Measurement("e" * 40, "ok", 9.1e-3, samples=tuple(fast + normal[:5]))
    assert judge(odd, after, noise=noise, process_size=10).verdict == WORSE


# --- what counts, and what "not significant" says ------------------------------------------


def test_a_large_ratio_the_noise_cannot_decide_is_not_significant_never_unchanged() -> None:
    # A series whose commit medians vary by 80% from run to run (a box shared with other
    # jobs), estimated from 12 commits.
    noisy = Noise(80.0, 80.0, 0.1, 12, "history", 11.0)
    before = _m([1.0 + 0.0001 * i for i in range(10)])
    slower = judge(before, _m([v * 3.3 for v in before.samples]), noise=noisy)
    assert slower.verdict == NOT_SIGNIFICANT, slower
    assert slower.p_value >= 0.002
    # The note says why, and what would decide it.
    assert "not significant" in slower.reason and f"{noisy.noise_pct:.2f}%" in slower.reason
    assert "3.3x" in slower.reason and "--append-samples" in slower.reason


def test_a_4x_speed_up_that_two_processes_a_side_cannot_resolve_is_never_unchanged() -> None:
    """issue 32: after `asv run --append-samples` (a loaded pass and a quiet one), a 4-5x
    speed-up whose 2+2 process medians read p=0.04 against alpha 0.002 was `unchanged`
    ("processes disagree"). Too few processes to reach alpha is not "nothing changed":
    not-significant, with the note saying so and what decides it."""
    rng = random.Random(5)
    noise = estimate_noise(_history([1 + 0.15 * rng.gauss(0, 1) for _ in range(29)]))
    loaded, quiet = _process(60e-3, 1), _process(25e-3, 2)
    before = Measurement("a" * 40, "ok", 40e-3, samples=tuple(loaded + quiet))
    after_samples = _process(12e-3, 3) + _process(5.5e-3, 4)
    after = Measurement("b" * 40, "ok", 8e-3, samples=tuple(after_samples))
    assert judge(before, after, noise=noise).verdict == CompareStatus.IMPROVED
    judged = judge(before, after, noise=noise, process_size=10)
    assert judged.verdict == NOT_SIGNIFICANT, judged
    assert judged.verdict != UNCHANGED and 0.002 < judged.p_value < 0.2, judged
    assert "2+2 process medians do not reach alpha" in judged.reason
    assert "a 0.2x change: measure both commits again" in judged.reason, judged.reason
