"""`fwdasv.analysis.bisect.series`: which benchmark case a bisection follows, and the results
directory of its own its re-measures go to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import asv_config

from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.bisect.series import resolve_benchmark
from fwdasv.asv.history import remeasure_results_dir


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
    assert found.pattern == r"^forward\.A\.track_latency\('prefill'\)$"
    assert resolve_benchmark(benchmarks, "other.time_x", None).case is None
    with pytest.raises(BisectError, match="exactly one benchmark"):
        resolve_benchmark(benchmarks, "forward", None)
    with pytest.raises(BisectError, match="pick one with --case"):
        resolve_benchmark(benchmarks, "track_latency", None)
    with pytest.raises(BisectError, match="no case 'x'"):
        resolve_benchmark(benchmarks, "track_latency", "x")


def test_bisect_measures_into_a_results_dir_of_its_own(tmp_path: Path) -> None:
    """Issue 19: bisect's re-measures appended to the history moved a commit's median from
    39.5 to 19.3 ms and made a finding; they go to a results dir beside it instead."""
    from fwdasv.analysis.bisect.series import remeasure_project

    project = asv_config(tmp_path, pythons=["3.11"], results_dir="results", env_dir="env")
    side = remeasure_project(project)
    assert side.results_dir == remeasure_results_dir(project.results_dir) / "results"
    # Beside the history's results dir, not in it: neither fwdasv nor asv publish reads it.
    assert not side.results_dir.is_relative_to(project.results_dir)
    # The same repository, environments (installs are shared) and benchmarks.
    assert (side.repo, side.env_dir, side.benchmark_dir) == (
        project.repo,
        project.env_dir,
        project.benchmark_dir,
    )
    assert side.environment_type == project.environment_type
    assert remeasure_project(project) == side  # written once, the same on every bisect
