"""`fwdasv.analysis.bisect.series`: which benchmark case a bisection follows, and its prior."""

from __future__ import annotations

import pytest

from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.bisect.series import resolve_benchmark


def test_resolve_benchmark() -> None:
    from fwdasv.asv.result_files import BenchmarkInfo

    benchmarks = {
        name: BenchmarkInfo.from_json(raw)
        for name, raw in {
            "forward.A.track_latency": {"params": [["'decode'", "'prefill'"]], "unit": "seconds"},
            "forward.A.track_spread_pct": {"params": [["'decode'", "'prefill'"]]},
            "other.time_x": {"params": []},
            "forward.CanaryDecoder.track_latency": {"params": [["'decode_bs4'"]]},
        }.items()
    }
    # The canary beside the suite is set aside: track_latency names the model's.
    found = resolve_benchmark(benchmarks, "track_latency", "prefill")
    assert found.name == "forward.A.track_latency" and found.case == "prefill"
    # Named alone (exactly, or by a regex only it matches), the canary is bisected.
    for name in ("forward.CanaryDecoder.track_latency", "Canary"):
        assert resolve_benchmark(benchmarks, name, None).case == "decode_bs4"
    assert resolve_benchmark(benchmarks, "other.time_x", None).case is None
    with pytest.raises(BisectError, match="exactly one benchmark"):
        resolve_benchmark(benchmarks, "forward", None)
    with pytest.raises(BisectError, match="pick one with --case"):
        resolve_benchmark(benchmarks, "track_latency", None)
    with pytest.raises(BisectError, match="no case 'x'"):
        resolve_benchmark(benchmarks, "track_latency", "x")
