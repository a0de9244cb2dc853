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
