"""The forward-bench JSON: real vLLM 0.33 files, verdicts, and every way a file can be bad."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from pathlib import Path

import pytest

from fwdasv.core import results
from fwdasv.core.cases import BenchRequest
from fwdasv.core.files import write_atomic
from fwdasv.core.kernels import KernelRow
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


def test_a_measured_case_takes_rank_zeros_median():
    latency = Latency.from_replays([1.0, 2.0, 3.0], 1, "host_perf_counter")
    rank = results.RankResult(0, num_tokens=4, latency=latency, finite=True, graph_vs_eager=None)
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], [rank])
    assert case.median_us == 2.0 and case.to_json()["median_us"] == 2.0
    (parsed,) = parse([case.to_json()])
    assert parsed.latency == latency and parsed == case


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


# --- values the engine builds, written and read back -----------------------------------------


def engine_rank(**changes) -> results.RankResult:
    """A single-stage rank as fwdasv's engine builds it on a GPU, every block set."""
    latency = Latency.from_replays([10.0, 11.0, 12.5, 13.0], 2, "graph_events").rounded()
    engine = results.EngineInfo(
        target="pkg.mod:target",
        target_options={"num_layers": 2},
        device="cuda:0",
        dtype="bfloat16",
        iters=2,
        samples=2,
        seed=0,
        warmup_s=1.0,
        timer="graph",
        protocol="duty-cycled",
        torch="2.13.0",
        python="3.12.1",
        gpu="NVIDIA H200",
    )
    reading = results.TelemetryReading(0.0, 1755, 3201, 700.0, 31, 100, ("sw_power_cap",))
    telemetry = results.Telemetry(
        readings=2,
        sm_clock_min_mhz=1755.0,
        sm_clock_median_mhz=1755.0,
        sm_clock_max_mhz=1755.0,
        power_median_w=700.0,
        power_capped_pct=100.0,
        thermal_capped_pct=0.0,
        scope="one reading after each sample block",
        gpu=results.GpuIdentity(0, "GPU-1", "NVIDIA H200"),
        reasons_pct=(("sw_power_cap", 100.0),),
        log=(reading, dataclasses.replace(reading, t_s=0.05)),
        unreadable=(("power", "Not Supported"),),
    )
    row = KernelRow("ns::gemm", 9.5, 80.0, 4, "void ns::gemm<float>(float*)")
    rank = results.RankResult(
        rank=0,
        num_tokens=4,
        latency=latency,
        finite=True,
        graph_vs_eager=results.TensorDiff(0.0, 0.0),
        eager_repeat=results.TensorDiff(0.0, 0.0),
        graph_deterministic=True,
        state_reset_bytes=4096,
        timing_scope="target_only",
        protocol=results.ProtocolRun("duty-cycled", 3.0, 0.05, 0.0, 2, 40, 0.0013, 0.0039),
        telemetry=telemetry,
        engine=engine,
        profile=results.ProfileBlock("p.rank0.kernels.json", 9.5, 12.0, 5, (row,), device="cuda"),
    )
    return dataclasses.replace(rank, **changes)


def written_again(value: results.CaseResult) -> results.CaseResult:
    (again,) = parse(json.loads(results.dumps([value])))
    return again


def test_an_engine_rank_round_trips_in_the_engines_key_order():
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], [engine_rank()]).judge()
    assert written_again(case) == case
    rank = case.to_json()["ranks"][0]
    assert list(rank) == [
        "num_tokens", "timing_scope", "eager_repeat", "graph_vs_eager", "graph_deterministic",
        "finite", "latency_us", "state_reset_bytes", "protocol", "telemetry", "engine", "profile",
    ]  # fmt: skip
    assert list(rank["telemetry"]) == [
        "source",
        "scope",
        "gpu",
        "summary",
        "readings",
        "unreadable",
    ]
    assert (
        rank["engine"]["target_options"] == {"num_layers": 2} and "world_size" not in rank["engine"]
    )
    assert rank["protocol"]["burst_s"] == 0.05
    assert list(case.to_json())[-2:] == ["refused", "unstable"]


@pytest.mark.parametrize(
    "changes",
    [
        {"telemetry": None},
        {"telemetry": None, "telemetry_unavailable": "NVML cannot start here"},
        {"profile": results.ProfileBlock.failed("ProfileRunError: no GPU activity")},
        {"graph_vs_eager": None, "graph_deterministic": None, "protocol": None, "engine": None},
    ],
    ids=["no-telemetry", "nvml-unavailable", "profile-failed", "host-timer"],
)
def test_engine_ranks_without_some_blocks_round_trip(changes):
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], [engine_rank(**changes)])
    assert written_again(case) == case
    rank = case.to_json()["ranks"][0]
    # vLLM's comparison keys are always written (null when not measured); fwdasv's blocks not.
    assert {"eager_repeat", "graph_vs_eager", "graph_deterministic"} <= rank.keys()
    if changes.get("telemetry_unavailable"):
        assert rank["telemetry"] == {
            "source": "nvml", "unavailable": "NVML cannot start here", "summary": None
        }  # fmt: skip
    elif "telemetry" in changes:
        assert "telemetry" not in rank


def test_a_pipeline_rank_round_trips_in_vllms_pipeline_order():
    latency = Latency.from_replays([100.0, 101.0, 99.5, 100.5], 2, "pipeline_host_perf_counter")
    timeline = results.PipelineTimeline(0, 0, (0.0, 5.0), (4.0, 9.0), 12.5, "rank 0")
    engine = dataclasses.replace(engine_rank().engine, pipeline_stages=2, world_size=2)
    ranks = [
        results.RankResult(
            rank=index,
            num_tokens=4,
            latency=latency,
            finite=True,
            graph_vs_eager=None,
            state_reset_bytes=0,
            timing_scope="target_only",
            pp_rank=index,
            pipeline_vs_eager={"hidden_states": results.TensorDiff(0.0, 0.0)},
            clock_uncertainty_us=25.0,
            engine=engine,
            pipeline_timeline=dataclasses.replace(timeline, stage=index),
            pipeline_warmup_microbatches=8,
        )
        for index in range(2)
    ]
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], ranks).judge()
    assert written_again(case) == case and case.pipeline
    rank = case.to_json()["ranks"][1]
    assert list(rank) == [
        "num_tokens", "pp_rank", "timing_scope", "graph_vs_eager", "intermediate_graph_vs_eager",
        "state_reset_bytes", "pipeline_vs_eager", "finite", "engine", "pipeline_timeline",
        "pipeline_warmup_microbatches", "clock_uncertainty_us", "latency_us",
    ]  # fmt: skip
    assert rank["graph_vs_eager"] is None and rank["intermediate_graph_vs_eager"] is None
    assert list(rank["engine"])[-2:] == ["pipeline_stages", "world_size"]
    assert rank["pipeline_timeline"]["clock_method"] == "rank 0"


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (lambda r: r["protocol"].pop("name"), ["protocol", "'name'"]),
        (lambda r: r["engine"].update(iters="3"), ["engine", "'iters'"]),
        (lambda r: r["telemetry"]["summary"].update(readings=None), ["telemetry", "'readings'"]),
        (lambda r: r["telemetry"].update(readings=[{"t_s": "x"}]), ["readings[0]", "'t_s'"]),
        (lambda r: r["profile"].update(top_kernels=[{"name": 1}]), ["top_kernels[0]"]),
    ],
)
def test_a_malformed_engine_block_is_one_error_naming_it(edit, names):
    data = json.loads(
        results.dumps([results.CaseResult.measured("p", [BenchRequest(4, 4)], [engine_rank()])])
    )
    edit(data[0]["ranks"][0])
    with pytest.raises(ResultsError) as info:
        parse(data, "f.json")
    for name in names:
        assert name in str(info.value), str(info.value)


def test_a_reference_block_round_trips_after_the_protocol():
    from fwdasv.core.stats import Latency

    workload = Latency.from_replays([501.5, 498.25, 502.0, 499.75], 2, "host_perf_counter")
    rank = engine_rank(reference=results.ReferenceRun("gemm-relu-chain-64x256x4", workload))
    case = results.CaseResult.measured("p", [BenchRequest(4, 4)], [rank]).judge()
    assert written_again(case) == case
    written = case.to_json()["ranks"][0]
    keys = list(written)
    assert keys.index("reference") == keys.index("protocol") + 1
    assert written["reference"]["workload"] == "gemm-relu-chain-64x256x4"
    assert written["reference"]["latency_us"]["samples_us"] == [501.5, 498.25, 502.0, 499.75]
    broken = json.loads(results.dumps([case]))
    del broken[0]["ranks"][0]["reference"]["latency_us"]
    with pytest.raises(results.ResultsError, match=r"reference: .*latency_us"):
        parse(broken)
