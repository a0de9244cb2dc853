"""`fwdasv.core.results.file`: the forward-bench JSON read and written: real vLLM 0.33 files
(tests/recorded_runs.py), every way a file can be bad, and byte-identical round trips.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest
from recorded_runs import (
    FILES,
    FOUR,
    LLAMA,
    PIPELINE,
    SINGLE,
    VLLM_ITERS,
    VLLM_SAMPLES,
    edited,
    failed_checks,
    raw,
)

from fwdasv.core import results
from fwdasv.core.cases import BenchRequest
from fwdasv.core.results import ResultsError, load, parse
from fwdasv.core.stats import Latency

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
            assert rank.to_json() == rank_json
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


def test_line_is_vllms_stdout_line():
    decode = load(SINGLE)[0]
    assert decode.line() == (
        "[forward] decode: 32 reqs, 32 tokens, median 2334.9 us, sample spread 0.13%, "
        "graph vs eager rel rms 0.0e+00"
    )


def test_a_measured_case_takes_rank_zeros_median():
    latency = Latency.from_replays([1.0, 2.0, 3.0], 1, "host_perf_counter")
    rank = results.RankResult(0, num_tokens=4, latency=latency, finite=True, graph_vs_eager=None)
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], [rank])
    assert case.median_us == 2.0 and case.to_json()["median_us"] == 2.0
    (parsed,) = parse([case.to_json()])
    assert parsed.latency == latency and parsed == case


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
    results.dump(load(FOUR), path)
    assert json.loads(path.read_text()) == raw(FOUR)
    assert load(path) == load(FOUR)
    assert path.read_text().startswith('[\n  {\n    "case"')


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_real_file_read_and_written_again_is_byte_identical(path):
    """vLLM writes `json.dump(results, f, indent=2)`; fwdasv adds only the final newline."""
    text = path.read_text()
    parsed = load(path)
    assert results.dumps(parsed) == text.rstrip("\n") + "\n"
    assert parse(json.loads(results.dumps(parsed))) == parsed


def test_the_pipeline_files_latency_keeps_vllms_pipeline_key_order():
    rank = load(PIPELINE)[0].ranks[0]
    assert list(rank.to_json()["latency_us"]) == list(raw(PIPELINE)[0]["ranks"][0]["latency_us"])
    assert list(rank.to_json()) == list(raw(PIPELINE)[0]["ranks"][0])
    # Built by fwdasv (no layout read): vLLM's single-GPU order.
    fresh = dataclasses.replace(rank.latency, layout=())
    assert list(fresh.to_json())[:3] == ["timer", "median", "sample_spread_pct"]


def test_a_nan_comparison_is_written_as_null_and_read_back_as_nan(tmp_path):
    result = edited(
        SINGLE,
        lambda e: e["ranks"][0].update(graph_vs_eager={"max_abs": math.nan, "relative_rms": 1.0}),
    )
    path = tmp_path / "out.json"
    results.dump([result], path)
    assert '"max_abs": null' in path.read_text()
    (again,) = load(path)
    assert math.isnan(again.ranks[0].graph_vs_eager.max_abs)
    assert failed_checks(again) == failed_checks(result) == {"graph_vs_eager"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parser_reads_every_real_vllm_file(path):
    parsed = results.load(path)
    data = raw(path)
    assert [r.case for r in parsed] == [entry["case"] for entry in data]
    for result in parsed:
        assert result.ok and result.ranks
        assert result.latency.count == VLLM_ITERS * VLLM_SAMPLES == len(result.latency.samples_us)
        assert results.refusals(result) == []
