"""fwdasv.analysis.rules.commit_processes: a commit's quiet pass outvotes its loaded one."""

from __future__ import annotations

import numpy as np

from fwdasv.analysis.findings.findings import judge_series
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.rules.commit_processes import quiet_history, quiet_processes
from fwdasv.analysis.rules.status import Status

SIZE = 10  # samples per bench process


def _process(rng: np.random.Generator, level: float, spread: float) -> list[float]:
    return list(level * np.exp(rng.normal(0, spread, SIZE)))


def test_a_slower_scattered_process_is_left_out_and_steady_ones_are_kept() -> None:
    rng = np.random.default_rng(1)
    loaded, quiet = _process(rng, 1.6e-3, 0.08), _process(rng, 1.0e-3, 0.01)
    kept, note = quiet_processes(loaded + quiet, SIZE)
    assert kept == quiet and note is not None and note.startswith("1 of 2 processes kept")
    # A GPU's processes, alike in spread: all kept, whatever their medians.
    steady = _process(rng, 1.0e-3, 0.002) + _process(rng, 1.01e-3, 0.002)
    assert quiet_processes(steady, SIZE) == (steady, None)
    # A fast, scattered process is not interference: kept.
    fast = _process(rng, 0.7e-3, 0.08)
    assert quiet_processes(fast + quiet, SIZE)[1] is None
    # One process, or samples that do not split into processes: as stored.
    assert quiet_processes(quiet, SIZE) == (quiet, None)
    assert quiet_processes(quiet + quiet[:3], SIZE)[1] is None


def test_a_quiet_second_pass_outvotes_a_loaded_first_one_in_the_findings() -> None:
    """issue 32: a first pass ran loaded at 3 commits (+60%, samples scattered), a second
    pass (`asv run --append-samples`) at a third of the load shows no step there. Pooled,
    the samples still made a false regression; judged by processes, only the real step
    (+50% at commit 9, both passes) is found, and the findings say which commits were
    judged by their quietest processes."""
    rng = np.random.default_rng(7)
    commits = [f"{i:02d}" * 20 for i in range(14)]
    history = []
    for i in range(14):
        level = 1e-3 * (1.5 if i >= 9 else 1.0) * np.exp(rng.normal(0, 0.02))
        first = _process(
            rng, level * (1.6 if i in (4, 5, 6) else 1.0), 0.08 if i in (4, 5, 6) else 0.01
        )
        second = _process(rng, level, 0.01)
        history.append(first + second)
    key = SeriesKey("box", "env", "forward.Model.track_latency", "prefill_512")
    series = {key: Series(key, "seconds", {}, history)}
    pooled = judge_series(commits, series)
    assert any(f.after_commit == commits[4] for f in pooled), [f.after_commit for f in pooled]
    judged = judge_series(commits, series, process_sizes={key.benchmark: SIZE})
    assert [(f.after_commit, f.status) for f in judged] == [(commits[9], Status.REGRESSION)]
    (found,) = judged
    assert found.processes is not None and "3 commit(s) judged by their quietest" in found.processes
    assert found.to_json()["processes"] == found.processes
    assert quiet_history(history, None).notes == ()
