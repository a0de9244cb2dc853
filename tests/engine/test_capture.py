"""`fwdasv.engine.capture`: timing one prepared forward, in process on the CPU, and the
CUDA-graph path on the tiny decoder in bfloat16 (tests marked `gpu`).

A correct capture replays exactly the eager forward: graph vs eager and the
eager repeat are bitwise 0, and two replays are bitwise equal, which also shows
the state restore is inside the graph (without it the second replay would see
longer sequences and compute something else).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fwdasv.core import results
from fwdasv.core.cases import parse_case, suite_cases
from fwdasv.core.results import refusals
from fwdasv.engine.capture import bench_forward
from fwdasv.engine.config import BenchOptions
from fwdasv.targets.decoder import llama3_8b_layers, tiny

ITERS, SAMPLES = 5, 3
EXACT = results.TensorDiff(0.0, 0.0)


def check_graph_rank(rank: results.RankResult, num_tokens: int) -> None:
    latency = rank.latency
    assert latency.timer == "graph_events"
    assert latency.count == ITERS * SAMPLES == len(latency.samples_us)
    assert latency.median > 0 and latency.min > 0
    assert rank.graph_vs_eager == EXACT
    assert rank.eager_repeat == EXACT
    assert rank.graph_deterministic is True
    assert rank.finite is True
    assert rank.num_tokens == num_tokens
    assert rank.state_reset_bytes > 0


@pytest.fixture(scope="module")
def device() -> torch.device:
    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    return device


@pytest.mark.gpu
@pytest.mark.parametrize("case", suite_cases("kinds"), ids=lambda c: c.name)
def test_graph_path_on_every_kind(device, case):
    target = tiny(device=str(device), dtype="bfloat16")
    prepared = target.prepare(case, seed=0)
    options = BenchOptions(iters=ITERS, samples=SAMPLES, warmup_s=0.05, timer="graph")
    rank = bench_forward(prepared, options, device)
    check_graph_rank(rank, case.num_tokens)
    assert rank.timing_scope == "target_only"
    measured = results.CaseResult.measured(case.name, case.requests, [rank])
    (parsed,) = results.parse(json.loads(results.dumps([measured])))
    assert parsed == measured and refusals(parsed) == []


@pytest.mark.gpu
def test_graph_path_on_llama_sized_layers(device):
    case = parse_case("decode=8*1@1024")
    target = llama3_8b_layers(device=str(device), dtype="bfloat16", num_layers=2)
    prepared = target.prepare(case, seed=0)
    options = BenchOptions(iters=ITERS, samples=SAMPLES, warmup_s=0.05, timer="graph")
    check_graph_rank(bench_forward(prepared, options, device), case.num_tokens)


@pytest.mark.gpu
def test_host_timer_on_cuda_leaves_graph_fields_null(device):
    case = parse_case("mix=32,4*1@64")
    prepared = tiny(device=str(device), dtype="bfloat16").prepare(case, seed=0)
    options = BenchOptions(iters=ITERS, samples=SAMPLES, warmup_s=0, timer="host")
    rank = bench_forward(prepared, options, device)
    assert rank.latency.timer == "host_perf_counter"
    assert rank.latency.count == ITERS * SAMPLES
    assert rank.graph_vs_eager is None and rank.graph_deterministic is None
    assert rank.eager_repeat == EXACT


@pytest.mark.gpu
def test_module_engine_defaults_to_graphs_in_bfloat16_on_cuda(tmp_path, clean_env):
    out = tmp_path / "out.json"
    args = ["--suite", "kinds", "--case", "big=1@16385", "--iters", str(ITERS)]
    args += ["--samples", str(SAMPLES), "--warmup-s", "0.1", "--output-json", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "fwdasv.engine", *args],
        env=clean_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # The oversized case fails alone; the others run on the graph path.
    assert proc.returncode == 3, proc.stderr
    parsed = results.load(out)
    assert [r.case for r in parsed] == ["big", *(c.name for c in suite_cases("kinds"))]
    assert not parsed[0].ok
    for result in parsed[1:]:
        (rank,) = result.ranks
        check_graph_rank(rank, result.num_tokens)
        assert rank.engine.dtype == "bfloat16"
        assert rank.engine.device.startswith("cuda")
        assert rank.engine.gpu == torch.cuda.get_device_name()
        assert refusals(result) == []
        assert result.line().endswith("graph vs eager rel rms 0.0e+00")


def test_graph_timer_needs_cuda_even_in_process():
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.capture import bench_forward
    from fwdasv.engine.config import BenchOptions
    from fwdasv.targets.decoder import tiny

    prepared = tiny().prepare(parse_case("p=4"), seed=0)
    with pytest.raises(ValueError, match="graph timer needs a CUDA device"):
        bench_forward(prepared, BenchOptions(timer="graph"), torch.device("cpu"))


def test_host_bench_restores_state_before_every_run():
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.core.results import TensorDiff
    from fwdasv.engine.capture import bench_forward
    from fwdasv.engine.config import BenchOptions
    from fwdasv.targets.decoder import tiny

    case = parse_case("v=2*4@40:3")
    prepared = tiny().prepare(case, seed=0)
    before = [view.clone() for view in prepared.state]
    options = BenchOptions(iters=2, samples=2, warmup_s=0, timer="host")
    rank = bench_forward(prepared, options, torch.device("cpu"))
    assert rank.eager_repeat == TensorDiff(0.0, 0.0)
    assert rank.latency.count == 4
    assert rank.state_reset_bytes == sum(v.numel() * v.element_size() for v in before)
    # The last timed run started from the restored state: the counters advanced once.
    assert prepared.state[0].tolist() == [r.kv_len for r in case.requests]
