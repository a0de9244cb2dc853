"""`fwdasv.analysis.bisect.outcome`: what bisect found, as text and as JSON."""

from __future__ import annotations

import dataclasses

from fwdasv.analysis.bisect.outcome import Answer, BisectResult, Probe
from fwdasv.analysis.rules.status import BisectStatus


def _result(**changes: object) -> BisectResult:
    result = BisectResult(
        benchmark="forward.S.track_latency",
        case="decode",
        machine="box",
        unit="seconds",
        good="a" * 40,
        bad="d" * 40,
        range_size=3,
        direction=-1,
        answer=Answer.FOUND,
        reason="the final pair is adjacent, each end placed",
        last_good="b" * 40,
        first_bad="c" * 40,
        subject="Fuse the MLP",
        before_median=2e-3,
        after_median=1e-3,
        ends="confirmed: B +100.00% vs A [+90.00%, +110.00%], 1+1 processes",
        bench_runs=3,
        bench_processes=4,
        probes=(
            Probe("b" * 40, None, BisectStatus.GOOD, 1, 2e-3),
            Probe("c" * 40, None, BisectStatus.BAD),
        ),
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def test_a_bisect_of_an_improvement_names_the_first_faster_commit() -> None:
    result = _result()
    assert result.summary().startswith("first faster commit: cccccccc Fuse the MLP:")
    assert "-50.0%" in result.summary() and result.to_json()["direction"] == "faster"
    assert "3 bench runs, 4 bench processes over 3 commits" in result.summary()
    slower = _result(direction=1, before_median=1e-3, after_median=2e-3)
    assert slower.summary().startswith("first bad commit: cccccccc")
    assert slower.culprit == "c" * 40 and slower.to_json()["first_bad"] == "c" * 40
    assert "last good bbbbbbbb, first bad cccccccc; 2 probe(s)" in slower.evidence()


def test_an_answer_without_a_commit_names_none() -> None:
    for answer in (Answer.NOT_REPRODUCIBLE, Answer.UNDECIDED):
        result = _result(answer=answer, reason="because", subject=None)
        assert not result.found and result.culprit is None
        assert result.summary().startswith(f"{answer}: forward.S.track_latency(decode): because")
        document = result.to_json()
        assert document["first_bad"] is None and document["subject"] is None
        assert document["answer"] == str(answer)
