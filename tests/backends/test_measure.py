"""`fwdasv.backends.measure`: launches pooled per case, every sample kept, telemetry combined,
on recorded vLLM outputs (tests/recorded_runs.py).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from recorded_runs import SINGLE, VLLM_SAMPLES, file_suite

from fwdasv.asv.suite import SuiteCache
from fwdasv.backends import RunOutcome
from fwdasv.backends.measure import CaseSummary, pool
from fwdasv.core import results

# A suite runs as written: no FWDASV_ITERS, FWDASV_SAMPLES or FWDASV_MODEL_DIR from outside.
pytestmark = pytest.mark.usefixtures("no_suite_overrides")


def with_telemetry(result: results.CaseResult, **figures: Any) -> results.CaseResult:
    """`result` as if NVML had read rank 0's GPU while it ran."""
    rank = dataclasses.replace(result.ranks[0], telemetry=results.Telemetry(**figures))
    return dataclasses.replace(result, ranks=(rank, *result.ranks[1:]))


def test_pooling_launches_builds_new_summaries_and_keeps_every_sample():
    parsed = results.load(SINGLE)
    config = file_suite(SINGLE)().run_config()
    tolerance = results.DEFAULT_RELATIVE_RMS_TOLERANCE
    decode = results.by_case(parsed)["decode"]
    empty = CaseSummary.empty("decode")
    once = empty.pooled(decode, [], VLLM_SAMPLES, tolerance)
    twice = once.pooled(decode, [], VLLM_SAMPLES, tolerance)
    assert empty == CaseSummary("decode") and empty.samples_s == ()  # left as it was
    assert twice.samples_s == once.samples_s * 2 and len(twice.samples_s) == 2 * VLLM_SAMPLES
    assert twice.median_us == once.median_us and twice.worst_relative_rms == 0.0
    outcome = RunOutcome(config, parsed, Path("bench.log"))
    assert pool(config, [outcome, outcome], tolerance)["decode"] == twice
    # A launch that failed afterwards fails the case, its samples kept.
    failed = results.CaseResult.failed("decode", decode.requests, "RuntimeError: boom")
    broken = twice.pooled(failed, [], VLLM_SAMPLES, tolerance)
    assert broken.error == "RuntimeError: boom" and broken.samples_s == twice.samples_s
    assert math.isnan(broken.median_us) and broken.unstable is False
    missing = once.pooled(None, ["missing from the bench output"], VLLM_SAMPLES, tolerance)
    assert missing.error == "missing from the bench output"


def test_telemetry_series_combine_the_launches(tmp_path):
    parsed = results.load(SINGLE)
    suite = file_suite(SINGLE)()
    config = suite.run_config()
    cool = [
        with_telemetry(
            r,
            readings=10,
            sm_clock_median_mhz=1980,
            sm_clock_min_mhz=1900,
            power_capped_pct=0.0,
            thermal_capped_pct=0.0,
        )
        for r in parsed
    ]
    hot = [
        with_telemetry(
            r,
            readings=30,
            sm_clock_median_mhz=1700,
            sm_clock_min_mhz=1605,
            power_capped_pct=80.0,
            thermal_capped_pct=10.0,
        )
        for r in parsed
    ]
    outcomes = [RunOutcome(config, cool, Path("a.log")), RunOutcome(config, hot, Path("b.log"))]
    cache = SuiteCache(tuple(pool(config, outcomes, suite.tolerance).values()), config, "logs")
    assert suite.track_sm_clock_mhz(cache, "decode") == 1840.0  # median of the launches'
    assert suite.track_sm_clock_min_mhz(cache, "decode") == 1605
    # Weighted by each launch's readings: (10 * 0 + 30 * 80) / 40.
    assert suite.track_power_capped_pct(cache, "decode") == 60.0
    assert suite.track_thermal_capped_pct(cache, "decode") == 7.5
    bare = SuiteCache(tuple(pool(config, [RunOutcome(config, parsed, Path())], 1e-3).values()))
    assert math.isnan(suite.track_sm_clock_mhz(bare, "decode"))
    assert math.isnan(suite.track_power_capped_pct(bare, "decode"))


def test_the_imports_of_every_launch_are_pooled_and_none_when_one_did_not_say() -> None:
    """What the suite records beside the results (fwdasv.asv.ranenv): the union over the
    launches, or None when a launch (vLLM's bench, an older engine) named none."""
    decode = results.by_case(results.load(SINGLE))["decode"]
    engine = results.EngineInfo(
        "mymodel.bench:target", {}, "cpu", "float32", 3, 2, 0, 0.0, "host", "steady", "2", "3"
    )

    def launched(imported: tuple[str, ...] | None) -> results.CaseResult:
        rank = dataclasses.replace(
            decode.ranks[0], engine=dataclasses.replace(engine, imported=imported)
        )
        return dataclasses.replace(decode, ranks=(rank, *decode.ranks[1:]))

    tolerance = results.DEFAULT_RELATIVE_RMS_TOLERANCE
    first = CaseSummary.empty("decode").pooled(launched(("a", "a.b")), [], VLLM_SAMPLES, tolerance)
    both = first.pooled(launched(("a", "a.c")), [], VLLM_SAMPLES, tolerance)
    assert (first.imported, both.imported) == (("a", "a.b"), ("a", "a.b", "a.c"))
    assert both.pooled(launched(None), [], VLLM_SAMPLES, tolerance).imported is None
    assert CaseSummary.empty("decode").pooled(decode, [], VLLM_SAMPLES, tolerance).imported is None
