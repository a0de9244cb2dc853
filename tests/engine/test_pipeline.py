"""Pipeline streaming under real torchrun (gloo on CPU): outputs, microbatch counts, schema."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from helpers import PROGRAMS

from fwdasv.core import results
from fwdasv.core.cases import BenchCase, parse_case
from fwdasv.core.results import PipelineTimeline
from fwdasv.engine.config import BenchOptions, EngineConfig
from fwdasv.engine.pipeline import TIMER_PIPELINE_GPU, TIMER_PIPELINE_HOST, pipeline_latency
from fwdasv.engine.pipeline_run import pipeline_main
from fwdasv.engine.ranks import MARGIN_PER_STAGE
from fwdasv.targets.base import TargetSpec

ITERS, SAMPLES = 3, 2


@contextmanager
def threads(count: int) -> Iterator[None]:
    # torchrun gives each rank OMP_NUM_THREADS=1; CPU matmuls split work by
    # thread count, so the reference must use the ranks' count to be bitwise equal.
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def single_process_output(case: BenchCase, device: str = "cpu", dtype: str = "float32"):
    """The whole model's eager output in this process: the reference the stream must equal."""
    target = TargetSpec.parse("fwdasv.targets.decoder:tiny").build(device, dtype)
    with threads(1), torch.inference_mode():
        return target.prepare(case, 0).forward()["hidden_states"].cpu()


def check_pipeline_case(entry: results.CaseResult, stages: int) -> None:
    """Schema and invariants of one pipeline case's rank dicts."""
    margin = MARGIN_PER_STAGE * stages
    count = ITERS * SAMPLES
    assert entry.ok, entry.error
    assert len(entry.ranks) == stages
    assert entry.verdicts() and not [v for v in entry.failures() if v.check != "stable"]
    # As written to the results file.
    latency = entry.ranks[0].to_json()["latency_us"]
    timelines = [rank.to_json()["pipeline_timeline"] for rank in entry.ranks]
    for index, rank in enumerate(entry.ranks):
        raw = rank.to_json()
        assert raw["pp_rank"] == index
        assert raw["latency_us"] == latency  # identical on every rank
        assert raw["pipeline_warmup_microbatches"] == margin
        assert raw["finite"] is True
        assert raw["graph_vs_eager"] is None and raw["intermediate_graph_vs_eager"] is None
        names = ["hidden_states"] if index == stages - 1 else ["hidden_states", "residual"]
        assert sorted(raw["pipeline_vs_eager"]) == sorted(names)
        assert all(
            c == {"max_abs": 0.0, "relative_rms": 0.0} for c in raw["pipeline_vs_eager"].values()
        )
        timeline = raw["pipeline_timeline"]
        assert timeline["stage"] == index and timeline["dp_rank"] == 0
        assert len(timeline["starts_us"]) == len(timeline["ends_us"]) == count + 2 * margin
        assert all(s < e for s, e in zip(timeline["starts_us"], timeline["ends_us"], strict=True))
        assert timeline["clock_uncertainty_us"] >= 0
    assert latency["timer"] == TIMER_PIPELINE_HOST
    assert latency["count"] == count and len(latency["samples_us"]) == count
    # Latency = last stage's end - first stage's start, margins dropped by id.
    first, last = timelines[0], timelines[-1]
    # One replica: its first- plus last-stage clock bounds.
    bound = first["clock_uncertainty_us"] + last["clock_uncertainty_us"]
    assert all(rank.clock_uncertainty_us == bound for rank in entry.ranks)
    expected = [
        end - start for start, end in zip(first["starts_us"], last["ends_us"], strict=True)
    ][margin:-margin]
    assert latency["samples_us"] == pytest.approx(expected)
    # Causality on rank 0's clock: a stage starts a microbatch only after the
    # previous stage has finished it, within the two ranks' clock bounds.
    for before, after in itertools.pairwise(timelines):
        slack = before["clock_uncertainty_us"] + after["clock_uncertainty_us"]
        for end, start in zip(before["ends_us"], after["starts_us"], strict=True):
            assert start >= end - slack, (end, start, slack)
    check_inflight_bound(first, last, stages)


def check_inflight_bound(first: dict, last: dict, stages: int) -> None:
    """At most `stages` microbatches in flight: the first stage starts microbatch i
    only after the last stage has finished i - stages (within the clock bounds).

    On CPU gloo's blocking sends imply this already; on GPUs, where NCCL sends do
    not block the host, only the credits returned by the last stage enforce it.
    """
    slack = first["clock_uncertainty_us"] + last["clock_uncertainty_us"]
    for index in range(stages, len(first["starts_us"])):
        finished = last["ends_us"][index - stages]
        assert first["starts_us"][index] >= finished - slack, (index, finished, slack)


def check_dump(dump: Path, case: BenchCase, stages: int) -> None:
    streamed = torch.load(dump / f"{case.name}.rank{stages - 1}.pt")["hidden_states"]
    reference = single_process_output(case)
    assert streamed.shape == reference.shape
    assert torch.equal(streamed, reference), (streamed - reference).abs().max().item()


@pytest.mark.slow
def test_two_stage_cli_streams_the_single_process_output_and_records_failures(
    tmp_path: Path, clean_env
) -> None:
    """`python -m fwdasv.engine --pipeline-stages 2` relaunches itself under torchrun."""
    out, dump = tmp_path / "pp2.json", tmp_path / "dump"
    cases = {
        c.name: c for c in map(parse_case, ["d=2*1@64", "boom=8", "long=1@20000", "mix=8,2*1@32"])
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PROGRAMS), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "fwdasv.engine", "--target", "pipeline_targets:failing_stage1"]
    for case in cases.values():
        command += ["--case", case.to_string()]
    command += ["--pipeline-stages", "2", "--iters", str(ITERS), "--samples", str(SAMPLES)]
    command += ["--output-json", str(out), "--dump-output", str(dump), "--timeout-s", "240"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    # Exit 3: some cases failed, each with its error recorded, the others timed.
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"2 case(s) failed: boom (error), long (error) (details in {out})" in done.stderr
    assert "[forward] d: 2 reqs, 2 tokens, median" in done.stdout
    by_case = results.by_case(results.load(out))
    assert list(by_case) == ["d", "boom", "long", "mix"]
    # One rank failed in its eager forward: both agree, the error names the rank.
    assert by_case["boom"].error == "rank 1 (eager pass): RuntimeError: stage 1 cannot run boom"
    # Both refused the case while preparing it.
    assert by_case["long"].error.startswith(
        "ranks 0,1 (prepare): TargetError: long: KV length 20000"
    )
    for name in ("d", "mix"):
        check_pipeline_case(by_case[name], stages=2)
        check_dump(dump, cases[name], stages=2)


@pytest.mark.slow
def test_three_stage_pipeline_main_matches_single_process(tmp_path: Path, clean_env) -> None:
    out, dump = tmp_path / "pp3.json", tmp_path / "dump"
    cases = [parse_case("hit=16@48"), parse_case("verify=2*4@40:3")]
    config = EngineConfig(
        target="fwdasv.targets.decoder:tiny",
        target_options={},
        device="cpu",
        dtype="float32",
        options=BenchOptions(iters=ITERS, samples=SAMPLES, seed=0, warmup_s=0.0, timer="host"),
    )
    lines: list[str] = []
    warnings: list[str] = []
    judged = pipeline_main(
        config,
        cases,
        3,
        out,
        timeout_s=240,
        dump_output=dump,
        echo=lines.append,
        warn=warnings.append,
    )
    assert [(r.case, r.ok, r.refused) for r in judged] == [("hit", True, ()), ("verify", True, ())]
    # 3 ranks on a 2-CPU box share CPUs: said once, before any rank starts.
    assert all(w.startswith("Warning: ") for w in warnings)
    assert any(line.startswith("[forward] hit: 1 reqs, 16 tokens") for line in lines)
    loaded = results.load(out)
    assert [r.case for r in loaded] == ["hit", "verify"]
    for entry, case in zip(loaded, cases, strict=True):
        check_pipeline_case(entry, stages=3)
        check_dump(dump, case, stages=3)
    engine = loaded[0].ranks[2].engine
    assert engine.pipeline_stages == 3 and engine.world_size == 3


def test_pipeline_latency_is_last_end_minus_first_start_max_over_replicas() -> None:
    margin = 1

    def timeline(stage: int, replica: int, starts: list[float], ends: list[float], u: float):
        return PipelineTimeline(stage, replica, tuple(starts), tuple(ends), u)

    timelines = [
        timeline(0, 0, [0, 10, 20, 30], [5, 15, 25, 35], 1.0),
        timeline(1, 0, [6, 16, 26, 36], [9, 19, 29, 39], 2.0),
        timeline(0, 1, [0, 10, 20, 30], [5, 15, 25, 35], 0.5),
        timeline(1, 1, [6, 16, 26, 36], [9, 22, 29, 44], 4.0),
    ]
    latency, uncertainty_us = pipeline_latency(timelines, num_stages=2, margin=margin)
    # Microbatches 1 and 2 survive the margins; replica 1 is slower on microbatch 1.
    assert latency.tolist() == [12.0, 9.0]
    # The worst replica's first- plus last-stage bounds.
    assert uncertainty_us == 4.5


@pytest.mark.multigpu
def test_two_gpu_pipeline_graphs_and_correlated_events(tmp_path: Path, clean_env) -> None:
    """On two GPUs: CUDA graphs per stage over NCCL, events on rank 0's clock."""
    out, dump = tmp_path / "gpu.json", tmp_path / "dump"
    case = parse_case("d=8*1@1024")
    command = [
        sys.executable,
        "-m",
        "fwdasv.engine",
        "--case",
        case.to_string(),
        "--device",
        "cuda",
    ]
    command += ["--pipeline-stages", "2", "--iters", "20", "--samples", "5"]
    command += ["--output-json", str(out), "--dump-output", str(dump), "--timeout-s", "300"]
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = results.load(out)
    assert entry.ok and not [v for v in entry.failures() if v.check != "stable"], entry.verdicts()
    for index, rank in enumerate(entry.ranks):
        raw = rank.to_json()
        assert raw["latency_us"]["timer"] == TIMER_PIPELINE_GPU
        assert raw["latency_us"]["count"] == 100
        assert raw["graph_vs_eager"] == {"max_abs": 0.0, "relative_rms": 0.0}
        assert all(c["max_abs"] == 0.0 for c in raw["intermediate_graph_vs_eager"].values())
        assert all(c["max_abs"] == 0.0 for c in raw["pipeline_vs_eager"].values())
        assert len(raw["pipeline_timeline"]["starts_us"]) == 100 + 2 * 8
        assert 0 < raw["clock_uncertainty_us"] < 1000
        assert raw["engine"]["device"] == f"cuda:{index}"
    timelines = [rank.to_json()["pipeline_timeline"] for rank in entry.ranks]
    check_inflight_bound(timelines[0], timelines[-1], 2)
    streamed = torch.load(dump / "d.rank1.pt")["hidden_states"]
    reference = single_process_output(case, device="cuda:0", dtype="bfloat16")
    assert torch.equal(streamed, reference), (
        (streamed.float() - reference.float()).abs().max().item()
    )
