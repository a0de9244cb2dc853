"""`fwdasv.analysis.bisect.outcome`: what bisect found, as text and as JSON."""

from __future__ import annotations

import dataclasses


def test_a_bisect_of_an_improvement_names_the_first_faster_commit() -> None:
    from fwdasv.analysis.bisect.outcome import BisectResult

    result = BisectResult(
        benchmark="forward.S.track_latency",
        case="decode",
        machine="box",
        env_name="env",
        unit="seconds",
        good="a" * 40,
        bad="d" * 40,
        range_size=3,
        direction=-1,
        last_good="b" * 40,
        first_bad="c" * 40,
        subject="Fuse the MLP",
        before_median=2e-3,
        after_median=1e-3,
        p_value=0.001,
        asv_runs=2,
        remeasures=0,
    )
    assert result.summary().startswith("first faster commit: cccccccc Fuse the MLP:")
    assert "-50.0%" in result.summary() and result.to_json()["direction"] == "faster"
    slower = dataclasses.replace(result, direction=1, before_median=1e-3, after_median=2e-3)
    assert slower.summary().startswith("first bad commit: cccccccc")
