"""`fwdasv.analysis.bisect.series`: which benchmark case a bisection follows, and its prior."""

from __future__ import annotations

import numpy as np
import pytest

from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.bisect.series import follow_finding, history_prior, resolve_benchmark
from fwdasv.analysis.confirm.processes import SeriesRef
from fwdasv.analysis.findings.series import Series
from fwdasv.analysis.remeasure import ProcessLayout, one_process_noise, stored_prior
from fwdasv.analysis.rules.commit_processes import quiet_history
from fwdasv.analysis.rules.noise import estimate_noise


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


def _loaded_history(samples: int = 5) -> list[list[float]]:
    """8 commits of 2 bench processes of `samples` samples, 0.2% apart in a quiet process; at
    commits 1, 3 and 5 the second process ran loaded (10 times as spread, 10% slower)."""
    rng = np.random.default_rng(7)
    history = []
    for commit in range(8):
        quiet = 1.0 + 0.002 * rng.standard_normal(samples)
        if commit in (1, 3, 5):
            second = 1.10 + 0.02 * rng.standard_normal(samples)
        else:
            second = 1.0 + 0.002 * rng.standard_normal(samples)
        history.append([*quiet, *second])
    return history


def test_a_stored_prior_leaves_each_commits_loaded_processes_out() -> None:
    """The prior check and bisect take from a stored history is the findings' noise (each
    commit judged by its quiet processes), as one process's median: a loaded process at
    three commits does not widen it."""
    history = _loaded_history()
    layout = ProcessLayout(samples=5, launches=2)
    prior = stored_prior(history, layout)
    assert prior is not None
    quiet = estimate_noise(quiet_history(history, layout.samples).history)
    assert prior == one_process_noise(quiet, history, layout)
    raw = one_process_noise(estimate_noise(history), history, layout)
    assert raw.noise_pct > 5 * prior.noise_pct, (raw, prior)
    # Not a fwdasv suite (no layout): the samples cannot be split, nothing is left out.
    assert stored_prior(history, None) == estimate_noise(history)
    # Three commits say nothing beyond the prior of nothing.
    assert stored_prior(history[:3], layout) is None


def test_bisects_prior_is_the_one_check_and_confirm_take(demo_history) -> None:
    """On the demo's real history (a fwdasv suite), each finding's bisect prior is the
    check's stored prior and the finding's own noise as one process's median: the three
    commands judge a series with one noise."""
    from fwdasv.analysis.check.check import stored_noise
    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.findings.series import load_series
    from fwdasv.analysis.remeasure import process_layout, processes_per_commit

    project = demo_history.project
    found = findings.find(project)
    assert found, "the demo history has its findings"
    _, series = load_series(project, demo_history.machine)
    for finding in found:
        stored = series[finding.key]
        followed = follow_finding(project, finding, stored)
        layout = process_layout(project, finding.key.benchmark)
        assert layout is not None, finding.key
        processes = processes_per_commit(stored.history, layout.samples, layout.launches)
        ref = SeriesRef.of(finding.key)
        assert followed.prior == finding.noise.per_process(processes), finding.key
        assert followed.prior == stored_noise(project, [ref], finding.key.machine)[ref]
    # A series of this suite whose history had loaded processes: bisect leaves them out.
    key = found[0].key
    layout = process_layout(project, key.benchmark)
    assert layout is not None
    loaded = Series(key, "seconds", {}, _loaded_history(layout.samples))
    prior = history_prior(project, loaded, key.suite)
    assert prior == stored_prior(loaded.history, layout)
    assert prior is not None
    raw = one_process_noise(estimate_noise(loaded.history), loaded.history, layout)
    assert raw.noise_pct > 5 * prior.noise_pct, (raw, prior)
