"""bench/h200/nightly_edge.py's CPU-runnable parts: the repository and the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow


def test_the_h200_edge_script_builds_a_history_whose_newest_commit_adds_the_kernel(
    tmp_path: Path,
) -> None:
    """bench/h200/nightly_edge.py's CPU-runnable parts: the repository and the verdict."""
    import importlib.util

    path = ROOT / "bench" / "h200" / "nightly_edge.py"
    spec = importlib.util.spec_from_file_location("nightly_edge", path)
    edge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(edge)
    chain = edge._chain()
    repo = tmp_path / "gpulm"
    history = edge.build_history(chain, repo, "tiny", 2, 4)
    newest = edge.land_slow_commit(chain, repo, "tiny", 2, 4)
    log = chain.git(repo, "log", "--reverse", "--format=%H %s").splitlines()
    assert [line.split()[0] for line in log] == [*history, newest]
    assert log[-1].endswith(edge.SLOW_SUBJECT)
    shown = chain.git(repo, "show", f"{newest}:gpulm/bench.py")
    assert "ATTENTION_GAIN = True" in shown
    assert "ATTENTION_GAIN = False" in chain.git(repo, "show", f"{history[-1]}:gpulm/bench.py")
    found = [
        {"after_commit": newest, "benchmark": "forward.Gpulm.track_latency", "status": "confirmed"},
        {"after_commit": history[1], "benchmark": "forward.Gpulm.track_latency", "status": "x"},
        {"after_commit": newest, "benchmark": "forward.Gpulm.track_spread_pct", "status": "x"},
    ]
    assert edge.at_newest(found, newest) == found[:1]
    assert edge.verdict({"nightly_exit": 1, "after_night": found[:1]})
    assert not edge.verdict({"nightly_exit": 0, "after_night": found[:1]})
    assert not edge.verdict(
        {"nightly_exit": 1, "after_night": [{**found[0], "status": "suspected"}]}
    )
