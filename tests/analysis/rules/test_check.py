"""The check's word for a case, read from confirm's A/B verdict."""

from __future__ import annotations

from fwdasv.analysis.rules.check import check_status
from fwdasv.analysis.rules.confirm import judge_ab
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus

BASE = [1.00, 1.01, 0.99, 1.00, 1.005, 0.995]


def test_a_confirmed_slowdown_beyond_min_effect_is_worse() -> None:
    verdict = judge_ab(BASE, [v * 1.10 for v in BASE], 1.0, min_effect_pct=0.3)
    assert verdict.status == ReMeasureStatus.CONFIRMED
    assert check_status(verdict, 0.3) == CompareStatus.WORSE


def test_a_real_change_below_min_effect_is_unchanged() -> None:
    verdict = judge_ab(BASE, [v * 1.10 for v in BASE], 1.0, min_effect_pct=5.0)
    assert verdict.status == ReMeasureStatus.CONFIRMED  # +10%: real
    assert check_status(verdict, 20.0) == CompareStatus.UNCHANGED  # but below a 20% min effect


def test_ruled_out_is_unchanged_and_a_clear_speed_up_improved() -> None:
    same = judge_ab(BASE, BASE, 1.0, min_effect_pct=3.0)
    assert same.status == ReMeasureStatus.NOT_REPRODUCED
    assert check_status(same, 3.0) == CompareStatus.UNCHANGED
    faster = judge_ab(BASE, [v * 0.8 for v in BASE], 1.0, min_effect_pct=3.0)
    assert check_status(faster, 3.0) == CompareStatus.IMPROVED


def test_too_few_processes_to_tell_is_undecided() -> None:
    verdict = judge_ab([1.0, 1.2], [1.1, 0.95], 10.0, min_effect_pct=0.3)
    assert check_status(verdict, 0.3) == ReMeasureStatus.UNDECIDED


def test_a_clear_speed_up_too_noisy_to_rule_a_step_out_is_improved_as_a_slowdown_is_worse() -> None:
    """judge_ab confirms a slowdown above zero however wide, but rules a step out only with
    an interval narrow enough: 12 + 12 processes 1% apart, HEAD 2% faster, stayed
    `undecided` (docs/measurements.md, section 41). The mirrored slowdown is `worse`."""
    from fwdasv.analysis.rules.check import faster_by_interval

    base = [1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(12)]
    faster = judge_ab(base, [v * 0.98 for v in reversed(base)], 1.0, min_effect_pct=0.3)
    assert faster.status == ReMeasureStatus.UNDECIDED and faster.upper_pct < 0, faster.summary()
    assert faster_by_interval(faster) and faster.noise_limited
    assert check_status(faster, 0.3) == CompareStatus.IMPROVED
    slower = judge_ab(base, [v * 1.02 for v in reversed(base)], 1.0, min_effect_pct=0.3)
    assert check_status(slower, 0.3) == CompareStatus.WORSE, slower.summary()
    # An interval that reaches zero: still undecided.
    near = judge_ab(base, [v * 0.998 for v in reversed(base)], 1.0, min_effect_pct=0.3)
    assert near.upper_pct >= 0 and not faster_by_interval(near)
    assert check_status(near, 0.3) == ReMeasureStatus.UNDECIDED
