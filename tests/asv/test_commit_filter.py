"""`fwdasv.asv.commit_filter`: records of chosen machines, benchmarks and commits (hash
prefixes, git ranges) of conftest's `results_tree`.
"""

from __future__ import annotations

from typing import Any

import pytest
from asv_results import PER_COMMIT

from fwdasv.asv.commit_filter import CommitFilter, parse_commit_filter
from fwdasv.asv.history import History, HistoryError

pytestmark = pytest.mark.slow


def test_filters(results_tree: dict[str, Any]) -> None:
    c1, c2, c3 = results_tree["commits"]
    other = list(History(results_tree["results"], machines=["otherbox"]).records())
    assert len(other) == PER_COMMIT
    assert {r.machine for r in other} == {"otherbox"}
    assert {r.gpu for r in other} == {"NVIDIA H100"}

    both = list(History(results_tree["results"], machines=["otherbox", "testbox"]).records())
    assert len(both) == 4 * PER_COMMIT - 1

    grid = list(History(results_tree["results"], bench=["Grid"]).records())
    assert {r.benchmark for r in grid} == {"forward.Grid.track_value"}
    assert len(grid) == 4 * 6
    # As `asv run -b`: the pattern also sees name(params), and `$` anchors the name.
    one_case = list(History(results_tree["results"], bench=[r"track_latency\('decode"]).records())
    assert {(r.metric, r.case) for r in one_case} == {("track_latency", "decode_bs1")}
    anchored = list(History(results_tree["results"], bench=["track_latency$"]).records())
    assert len(anchored) == 4 * 3
    # A filtered run counts only the stale results it would have exported.
    history = History(results_tree["results"], bench=["Grid"])
    list(history.records())
    assert history.report.dropped_version == 0

    ranged = parse_commit_filter([f"{c1}..{c3}"], results_tree["repo"])
    records = list(History(results_tree["results"], commits=ranged).records())
    assert {r.commit_hash for r in records} == {c2, c3}
    # Turned round, the range holds nothing: said so, not "no record matches".
    with pytest.raises(HistoryError, match=rf"{c1} is older than {c3}; write it oldest first"):
        parse_commit_filter([f"{c3}..{c1}"], results_tree["repo"])
    assert parse_commit_filter([f"{c3}..{c3}"], results_tree["repo"]).prefixes == frozenset()
    prefix = CommitFilter(frozenset({c1[:6].upper()}))
    records = list(History(results_tree["results"], commits=prefix).records())
    assert {r.commit_hash for r in records} == {c1}
    listed = parse_commit_filter([f"{c1[:10]},{c3}"], None)
    records = list(History(results_tree["results"], machines=["testbox"], commits=listed).records())
    assert {r.commit_hash for r in records} == {c1, c3}


@pytest.mark.parametrize("spec", ["", " ", ",", " , "])
def test_a_commits_value_that_names_no_commit_is_refused(spec: str) -> None:
    """`export -c ""` said "no record matches --commits ;": the value itself is refused,
    by name, before any result is read."""
    with pytest.raises(HistoryError, match="names no commit; give hash prefixes"):
        parse_commit_filter([spec], None)
