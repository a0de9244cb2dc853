"""fwdasv.core.verdicts: the verdict settings (asv.conf.json's "fwdasv" block)."""

from __future__ import annotations


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
