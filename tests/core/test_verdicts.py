"""fwdasv.core.verdicts: the verdict settings (asv.conf.json's "fwdasv" block)."""

from __future__ import annotations


def test_one_setting_is_the_smallest_change_worth_reporting_everywhere() -> None:
    """min_effect_pct (percent) is compare's default --factor as a ratio, and the least of
    bisect's probe floor (half the step being bisected)."""
    from fwdasv.analysis.bisect.rules import probe_floor_pct
    from fwdasv.analysis.compare.compare import DEFAULT_FACTOR as COMPARE_FACTOR
    from fwdasv.core.verdicts import MIN_EFFECT_PCT, VerdictSettings, factor_of

    assert factor_of(MIN_EFFECT_PCT) == COMPARE_FACTOR == 1.003
    assert probe_floor_pct(0.2) == MIN_EFFECT_PCT and probe_floor_pct(4.0) == 2.0
    quiet = VerdictSettings.from_config({"fwdasv": {"min_effect_pct": 1}})
    assert quiet.min_effect_factor == 1.01
    assert probe_floor_pct(1.0, quiet.min_effect_pct) == 1.0
