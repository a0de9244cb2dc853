"""The forward-bench JSON: real vLLM 0.33 files, verdicts, and every way a file can be bad."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest

from fwdasv.core import results
from fwdasv.core.cases import BenchRequest
from fwdasv.core.files import write_atomic
from fwdasv.core.results import ResultsError, load, parse, refusals, verdicts
from fwdasv.core.stats import Latency

REFERENCE = Path(__file__).resolve().parent / "data"
SINGLE = REFERENCE / "vllm-0.33.0-forward-h200-qwen3-0.6b.json"
FOUR = REFERENCE / "vllm-0.33.0-forward-h200-qwen3-0.6b-4cases.json"
LLAMA = REFERENCE / "vllm-0.33.0-forward-h200-llama-3.1-8b.json"
PIPELINE = REFERENCE / "vllm-0.33.0-forward-2xh200-qwen3-0.6b-pp2.json"
FILES = [SINGLE, FOUR, LLAMA, PIPELINE]


def raw(path: Path) -> list[dict]:
    return json.loads(path.read_text())


# --- real vLLM files ------------------------------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_vllm_file_parses_to_the_json_values(path):
    data = raw(path)
    parsed = load(path)
    assert [r.case for r in parsed] == [entry["case"] for entry in data]
    for result, entry in zip(parsed, data, strict=True):
        assert result.ok
        assert result.median_us == entry["median_us"]
        assert result.requests == tuple(BenchRequest(**r) for r in entry["requests"])
        assert len(result.ranks) == len(entry["ranks"])
        for index, (rank, rank_json) in enumerate(zip(result.ranks, entry["ranks"], strict=True)):
            latency_json = rank_json["latency_us"]
            assert rank.rank == index
            assert rank.num_tokens == rank_json["num_tokens"]
            assert rank.finite is rank_json["finite"]
            assert rank.state_reset_bytes == rank_json["state_reset_bytes"]
            assert rank.timing_scope == rank_json["timing_scope"]
            for key in ("timer", "median", "sample_spread_pct", "mean", "std", "min", "p90"):
                assert getattr(rank.latency, key) == latency_json[key], key
            assert rank.latency.count == latency_json["count"] == len(latency_json["samples_us"])
            assert rank.latency.samples_us == tuple(latency_json["samples_us"])
            assert rank.graph_vs_eager.to_json() == rank_json["graph_vs_eager"]
            assert rank.raw == rank_json
        assert result.latency == result.ranks[0].latency
        assert result.num_tokens == entry["ranks"][0]["num_tokens"]


@pytest.mark.parametrize("path", [SINGLE, FOUR, LLAMA], ids=lambda p: p.name)
def test_single_gpu_files_carry_the_graph_fields(path):
    data = raw(path)
    for result, entry in zip(load(path), data, strict=True):
        (rank,) = result.ranks
        (rank_json,) = entry["ranks"]
        assert rank.latency.timer == "graph_events"
        assert rank.latency.count == 100
        assert rank.graph_deterministic is rank_json["graph_deterministic"] is True
        assert rank.eager_repeat.to_json() == rank_json["eager_repeat"]
        assert rank.eager_repeat.exact and rank.graph_vs_eager.exact
        assert not rank.is_pipeline and not result.pipeline
        assert result.clock_uncertainty_us is None


def test_case_counts_and_names_of_the_real_files():
    assert [r.case for r in load(SINGLE)] == ["decode", "prefill"]
    assert [r.case for r in load(FOUR)] == ["decode1", "decode32", "prefill", "mix"]
    assert [r.case for r in load(LLAMA)] == ["decode1", "decode32", "prefill", "mix"]
    mix = results.by_case(load(FOUR))["mix"]
    assert len(mix.requests) == 33
    assert mix.num_tokens == raw(FOUR)[3]["ranks"][0]["num_tokens"]


def test_pipeline_file_fields():
    data = raw(PIPELINE)
    parsed = load(PIPELINE)
    for result, entry in zip(parsed, data, strict=True):
        assert result.pipeline
        assert [r.pp_rank for r in result.ranks] == [0, 1]
        for rank, rank_json in zip(result.ranks, entry["ranks"], strict=True):
            assert rank.latency.timer == "pipeline_correlated_gpu_events_rank_max"
            assert rank.clock_uncertainty_us == rank_json["clock_uncertainty_us"]
            assert rank.eager_repeat is None and rank.graph_deterministic is None
            assert {k: c.to_json() for k, c in rank.pipeline_vs_eager.items()} == rank_json[
                "pipeline_vs_eager"
            ]
            assert {k: c.to_json() for k, c in rank.intermediate_graph_vs_eager.items()} == (
                rank_json["intermediate_graph_vs_eager"]
            )
        assert set(result.ranks[0].pipeline_vs_eager) == {"hidden_states", "residual"}
        assert set(result.ranks[1].pipeline_vs_eager) == {"hidden_states"}
        assert result.clock_uncertainty_us == max(r["clock_uncertainty_us"] for r in entry["ranks"])
    assert parsed[0].clock_uncertainty_us == 47.262499999999996


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


def test_line_is_vllms_stdout_line():
    decode = load(SINGLE)[0]
    assert decode.line() == (
        "[forward] decode: 32 reqs, 32 tokens, median 2334.9 us, sample spread 0.13%, "
        "graph vs eager rel rms 0.0e+00"
    )


# --- verdicts on edited entries --------------------------------------------------------


def edited(path: Path, edit, case: int = 0) -> results.CaseResult:
    data = copy.deepcopy(raw(path))
    edit(data[case])
    return parse(data, "edited.json")[case]


def failed_checks(result) -> set[str]:
    return {v.check for v in refusals(result)}


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


def test_error_entry_round_trips_and_is_refused(tmp_path):
    requests = [BenchRequest(1, 20000)] * 2
    ok_entry = raw(SINGLE)[0]
    path = tmp_path / "out.json"
    results.dump([ok_entry, results.error_entry("big", requests, "TargetError: too long")], path)
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


def test_case_entry_takes_rank_zeros_median():
    latency = Latency.from_replays([1.0, 2.0, 3.0], 1, "host_perf_counter")
    rank = {"num_tokens": 4, "finite": True, "latency_us": latency.to_json()}
    entry = results.case_entry("p", [BenchRequest(4, 4)], [rank])
    assert entry["median_us"] == 2.0
    (parsed,) = parse([entry])
    assert parsed.latency == latency


# --- bad files --------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


def bad_entry(edit) -> str:
    data = copy.deepcopy(raw(FOUR))
    edit(data)
    return json.dumps(data)


def drop(*keys):
    """Remove a nested key from case 1's rank 0 (or from the case itself)."""

    def edit(data):
        node = data[1]
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return edit


def set_value(value, *keys):
    def edit(data):
        node = data[1]
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (drop("ranks", 0, "latency_us"), ["ranks[0]", "'latency_us'"]),
        (drop("ranks", 0, "finite"), ["ranks[0]", "'finite'"]),
        (drop("ranks", 0, "num_tokens"), ["ranks[0]", "'num_tokens'"]),
        (drop("ranks", 0, "latency_us", "median"), ["latency_us", "'median'"]),
        (drop("ranks", 0, "latency_us", "count"), ["latency_us", "'count'"]),
        (drop("ranks", 0, "graph_vs_eager", "relative_rms"), ["graph_vs_eager", "'relative_rms'"]),
        (drop("ranks"), ["'ranks'"]),
        (drop("median_us"), ["'median_us'"]),
        (drop("requests"), ["'requests'"]),
        (drop("case"), ["[1]", "'case'"]),
        (set_value([], "ranks"), ["'ranks' must be a non-empty list"]),
        (set_value([{"query_len": 1}], "requests"), ["bad request entry"]),
        (set_value([{"query_len": 4, "kv_len": 1}], "requests"), ["bad request entry"]),
        (set_value("x", "ranks", 0), ["ranks[0]", "expected an object"]),
        # Wrong types: one ResultsError too, never a bare TypeError.
        (set_value(None, "median_us"), ["'median_us'"]),
        (set_value(None, "ranks", 0, "num_tokens"), ["'num_tokens'"]),
        (set_value("fast", "ranks", 0, "latency_us", "median"), ["'median'"]),
        (set_value(None, "ranks", 0, "latency_us", "count"), ["'count'"]),
        (set_value("x", "ranks", 0, "graph_vs_eager", "max_abs"), ["'max_abs'"]),
        (set_value("yes", "ranks", 0, "finite"), ["'finite'"]),
        (set_value(7, "requests"), ["bad request entry"]),
        (set_value({"max_abs": 0}, "ranks", 0, "pipeline_vs_eager"), ["pipeline_vs_eager"]),
    ],
)
def test_malformed_entry_is_one_error_naming_file_case_and_key(tmp_path, edit, names):
    path = write(tmp_path, bad_entry(edit))
    with pytest.raises(ResultsError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(str(path))
    for name in names:
        assert name in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("  \n", "empty"),
        ('[{"case": "decode", "requests": [', "not valid JSON"),
        ("{}", "expected a JSON array"),
        ("[1]", "expected an object"),
        ("null", "expected a JSON array"),
    ],
)
def test_truncated_or_empty_file_is_one_error_naming_it(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(ResultsError, match=words) as info:
        load(path)
    assert str(path) in str(info.value)


def test_truncated_real_file(tmp_path):
    text = FOUR.read_text()
    path = write(tmp_path, text[: len(text) // 2])
    with pytest.raises(ResultsError, match=rf"{path}: not valid JSON.*truncated"):
        load(path)


def test_missing_file(tmp_path):
    path = tmp_path / "never-written.json"
    with pytest.raises(ResultsError, match=rf"{path}: no results file"):
        load(path)


# --- writing ---------------------------------------------------------------------------


def test_dump_writes_what_load_reads(tmp_path):
    path = tmp_path / "sub" / "out.json"
    results.dump(raw(FOUR), path)
    assert json.loads(path.read_text()) == raw(FOUR)
    assert load(path) == load(FOUR)
    assert path.read_text().startswith('[\n  {\n    "case"')


def test_write_atomic_replaces_the_file_whole(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "old")
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_atomic_interrupted_leaves_no_partial_file(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "previous complete file")
    # Writing a non-str fails inside write_atomic after the temporary file
    # exists: the failure stands in for a run killed half way through a write.
    with pytest.raises(TypeError):
        write_atomic(path, 12345)  # type: ignore[arg-type]
    assert path.read_text() == "previous complete file"
    assert os.listdir(tmp_path) == ["out.json"]
    with pytest.raises(TypeError):
        write_atomic(tmp_path / "fresh.json", object())  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_atomic_gives_the_file_the_usual_permissions(tmp_path: Path) -> None:
    # mkstemp's 0600 would make results, machine files and published pages
    # unreadable to anyone else (a web server serving the site, a CI user).
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "page.html", "<html></html>\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "page.html").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "page.html").read_text() == "<html></html>\n"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]
