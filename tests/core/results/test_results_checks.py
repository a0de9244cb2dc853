"""`fwdasv.core.results.checks`: a case's verdicts and refusals, on real vLLM 0.33 files and
on edited entries.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from recorded_runs import FILES, FOUR, LLAMA, PIPELINE, SINGLE, edited, failed_checks

from fwdasv.core import results
from fwdasv.core.cases import BenchRequest
from fwdasv.core.results import ResultsError, load, parse, refusals, verdicts
from fwdasv.core.stats import Latency


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_files_pass_every_refusing_check(path):
    for result in load(path):
        assert refusals(result) == []
        by_check = {v.check: v for v in verdicts(result)}
        assert by_check["finite"].ok is True
        assert by_check["graph_vs_eager"].ok is True
        assert by_check["graph_vs_eager"].detail == "bitwise equal"
        # Stability is a mark, judged from the spread alone.
        spread = result.latency.sample_spread_pct
        assert by_check["stable"].ok is (spread <= 0.5)
        assert result.failures() == [v for v in verdicts(result) if v.ok is False]


def test_pipeline_verdicts_check_pipeline_vs_eager():
    for result in load(PIPELINE):
        by_check = {v.check: v for v in verdicts(result)}
        assert by_check["pipeline_vs_eager"].ok is True
        assert by_check["eager_repeat"].ok is None
        assert by_check["deterministic"].ok is None


def test_single_gpu_verdicts_check_determinism_and_eager_repeat():
    for result in load(FOUR):
        checks = {v.check: v.ok for v in verdicts(result)}
        assert "pipeline_vs_eager" not in checks
        assert checks["eager_repeat"] is True
        assert checks["deterministic"] is True


def test_unstable_real_point_is_a_warning_not_a_refusal():
    mix = results.by_case(load(LLAMA))["mix"]
    assert mix.latency.sample_spread_pct > 0.5
    stable = next(v for v in verdicts(mix) if v.check == "stable")
    assert stable.ok is False and stable.failed
    assert stable.detail == "sample spread 2.07% (> 0.5%)"
    assert refusals(mix) == []


def test_non_finite_output_is_refused():
    result = edited(SINGLE, lambda e: e["ranks"][0].update(finite=False))
    assert failed_checks(result) == {"finite"}


def test_nan_comparison_is_refused():
    def edit(entry):
        entry["ranks"][0]["graph_vs_eager"] = {"max_abs": math.nan, "relative_rms": math.nan}

    assert failed_checks(edited(SINGLE, edit)) == {"graph_vs_eager"}


def test_graph_vs_eager_over_tolerance_is_refused_and_under_is_not():
    def off_by(rms):
        return lambda e: e["ranks"][0].update(graph_vs_eager={"max_abs": 0.5, "relative_rms": rms})

    over = edited(SINGLE, off_by(2e-3))
    assert failed_checks(over) == {"graph_vs_eager"}
    detail = next(v.detail for v in refusals(over))
    assert "rank 0" in detail and "2.000e-03 > 1e-03" in detail
    under = edited(SINGLE, off_by(5e-4))
    assert failed_checks(under) == set()
    assert refusals(under, tolerance=1e-4)[0].check == "graph_vs_eager"


def test_eager_repeat_mismatch_is_refused():
    result = edited(
        SINGLE, lambda e: e["ranks"][0].update(eager_repeat={"max_abs": 1.0, "relative_rms": 0.1})
    )
    assert failed_checks(result) == {"eager_repeat"}


def test_eager_repeat_within_tolerance_passes_but_is_not_called_bitwise():
    result = edited(
        SINGLE, lambda e: e["ranks"][0].update(eager_repeat={"max_abs": 1e-3, "relative_rms": 1e-4})
    )
    assert refusals(result) == []
    eager = next(v for v in verdicts(result) if v.check == "eager_repeat")
    assert eager.ok is True and eager.detail == "relative rms 1.0e-04"


def test_nondeterministic_replays_are_refused():
    result = edited(SINGLE, lambda e: e["ranks"][0].update(graph_deterministic=False))
    assert failed_checks(result) == {"deterministic"}
    assert "replays differ on ranks [0]" in refusals(result)[0].detail


def test_pipeline_mismatch_on_one_rank_is_refused():
    def edit(entry):
        entry["ranks"][1]["pipeline_vs_eager"]["hidden_states"] = {
            "max_abs": 3.0,
            "relative_rms": 0.2,
        }

    result = edited(PIPELINE, edit)
    assert failed_checks(result) == {"pipeline_vs_eager"}
    assert "rank 1" in refusals(result)[0].detail


def test_spread_over_half_a_percent_marks_unstable_only():
    def edit(entry):
        entry["ranks"][0]["latency_us"]["sample_spread_pct"] = 0.51

    result = edited(SINGLE, edit)
    assert [v.check for v in result.failures()] == ["stable"]
    assert refusals(result) == []
    assert result.latency.unstable


def test_failed_case_round_trips_and_is_refused(tmp_path):
    requests = [BenchRequest(1, 20000)] * 2
    ok = load(SINGLE)[0]
    path = tmp_path / "out.json"
    results.dump([ok, results.CaseResult.failed("big", requests, "TargetError: too long")], path)
    assert json.loads(path.read_text())[1] == {
        "case": "big",
        "requests": [r.to_json() for r in requests],
        "median_us": None,
        "error": "TargetError: too long",
        "ranks": [],
    }
    first, failed = load(path)
    assert first.ok
    assert not failed.ok
    assert failed.error == "TargetError: too long"
    assert failed.requests == tuple(requests)
    assert failed.median_us is None and failed.ranks == ()
    assert failed.num_tokens == 2
    assert [(v.check, v.ok) for v in verdicts(failed)] == [("ran", False)]
    assert failed_checks(failed) == {"ran"}
    assert failed.line() == "[forward] big: FAILED: TargetError: too long"
    with pytest.raises(ResultsError, match="'big' has no ranks"):
        _ = failed.latency


def test_judge_sets_the_verdict_fields_once():
    def case(times: list[float]) -> results.CaseResult:
        latency = Latency.from_replays(times, 2, "host_perf_counter")
        rank = results.RankResult(
            0, 4, latency, finite=True, graph_vs_eager=None, eager_repeat=results.TensorDiff(0, 0)
        )
        return results.CaseResult.measured("p", [BenchRequest(4, 4)], [rank])

    stable, unstable = case([100.0, 100.0, 100.2, 100.2]), case([100.0, 100.0, 110.0, 110.0])
    assert not stable.judged and "refused" not in stable.to_json()
    for value, marked in ((stable, False), (unstable, True)):
        judged = value.judge()
        assert judged.judged and judged.refused == () and judged.unstable is marked
        assert (judged.to_json()["refused"], judged.to_json()["unstable"]) == ([], marked)
        assert parse([judged.to_json()]) == [judged]
    nan = dataclasses.replace(
        stable, ranks=(dataclasses.replace(stable.ranks[0], finite=False),)
    ).judge()
    assert nan.refused == ("finite: non-finite output on ranks [0]",)
    failed = results.CaseResult.failed("x", [BenchRequest(4, 4)], "TargetError: no")
    assert failed.judge() is failed and "refused" not in failed.judge().to_json()
