"""`fwdasv.core.results.blocks`: the values in a rank's dict the engine builds (engine info,
protocol, reference workload, telemetry, profile, pipeline timeline), written and read
back.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fwdasv.core import results
from fwdasv.core.cases import BenchRequest
from fwdasv.core.kernels import KernelRow
from fwdasv.core.results import ResultsError, parse
from fwdasv.core.stats import Latency

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


def test_the_worst_gpu_of_a_pipeline_is_the_case_telemetry():
    fast = results.Telemetry(
        10, sm_clock_min_mhz=1900, sm_clock_median_mhz=1980, power_capped_pct=0
    )
    slow = results.Telemetry(
        10, sm_clock_min_mhz=1605, sm_clock_median_mhz=1700, power_capped_pct=80
    )
    worst = fast.worst(slow)
    assert (worst.sm_clock_min_mhz, worst.sm_clock_median_mhz) == (1605, 1700)
    assert worst.power_capped_pct == 80 and worst.readings == 20


def test_a_reference_that_does_not_pair_with_the_replays_is_refused() -> None:
    from fwdasv.core.stats import Latency

    forward = Latency.from_replays([10.0, 11.0, 12.0, 13.0], 2, "host_perf_counter")
    pace = results.ReferenceRun("w", Latency.from_replays([5.0, 5.0], 1, "host_perf_counter"))
    with pytest.raises(results.ResultsError, match="2 workload times beside 4 replays"):
        pace.relative(forward, 2)
    pace = results.ReferenceRun("w", Latency.from_replays([5.0, 5.5, 4.0, 6.5], 2, "x"))
    assert pace.relative(forward, 2) == [(10 / 5 + 11 / 5.5) / 2, (12 / 4 + 13 / 6.5) / 2]
