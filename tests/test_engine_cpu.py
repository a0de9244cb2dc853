"""fwdasv's single-stage engine on CPU, through its two command lines.

`python -m fwdasv.engine` runs as a real subprocess; `fwdasv forward` through
click's CliRunner. Both must write vLLM's results JSON, which
`fwdasv.core.results.load` reads, with the host timer's fields.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwdasv.cli import main as fwdasv_main
from fwdasv.core import results
from fwdasv.core.results import refusals

# --device cpu: these tests mean the CPU path, also on a machine with a GPU.
FAST = ["--device", "cpu", "--iters", "3", "--samples", "2", "--warmup-s", "0"]
KINDS = ["decode", "prefill", "hit", "chunk", "verify", "mix"]


@pytest.fixture
def env(clean_env: dict[str, str]) -> dict[str, str]:
    # One intra-op thread: tiny ops only contend on a small shared machine.
    return {**clean_env, "OMP_NUM_THREADS": "1"}


def engine(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "fwdasv.engine", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def check_host_rank(rank: results.RankResult, count: int) -> None:
    assert rank.latency.timer == "host_perf_counter"
    assert rank.latency.count == count == len(rank.latency.samples_us)
    assert rank.graph_vs_eager is None
    assert rank.graph_deterministic is None
    written = rank.to_json()
    assert written["graph_vs_eager"] is None and written["graph_deterministic"] is None
    assert rank.eager_repeat is not None and rank.eager_repeat.exact
    assert rank.finite is True
    assert rank.timing_scope == "target_only"
    assert rank.latency.median > 0
    assert rank.state_reset_bytes > 0


def test_module_engine_runs_every_kind_and_records_a_failing_case(tmp_path, env):
    out = tmp_path / "out.json"
    proc = engine(
        ["--case", "big=1@16385", "--suite", "kinds", *FAST, "--output-json", str(out)],
        env,
        tmp_path,
    )
    # One case failed, the others ran: exit 3.
    assert proc.returncode == 3, proc.stderr
    *warnings, error = proc.stderr.strip().splitlines()
    assert error == f"Error: 1 case(s) failed: big (error) (details in {out})"
    # Host timings on a shared 2-CPU box: unstable ones are said so, one line each.
    assert all(line.startswith("Warning: ") and "unstable timing" in line for line in warnings)
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == (
        "[forward] big: FAILED: TargetError: big: KV length 16385 > the decoder's maximum 16384"
    )
    assert [line.split(":")[0] for line in lines[1:]] == [f"[forward] {k}" for k in KINDS]
    assert all(line.endswith("(host_perf_counter)") for line in lines[1:])

    parsed = results.load(out)
    assert [r.case for r in parsed] == ["big", *KINDS]
    failed, *ran = parsed
    assert not failed.ok and "16385 > the decoder's maximum 16384" in failed.error
    assert failed.requests[0].kv_len == 16385
    for result in ran:
        assert result.ok
        (rank,) = result.ranks
        check_host_rank(rank, count=3 * 2)
        assert result.num_tokens == sum(r.query_len for r in result.requests)
        assert result.median_us == rank.latency.median
        assert refusals(result) == []
        assert rank.engine.target == "fwdasv.targets.decoder:tiny"
        assert rank.engine.device == "cpu"
        assert rank.engine.dtype == "float32"
        assert (rank.engine.iters, rank.engine.samples) == (3, 2)
    # vLLM's layout: a top-level array written with indent=2.
    assert out.read_text().startswith('[\n  {\n    "case": "big"')


GATED_TARGET = '''
"""The tiny decoder, except that case "last" waits until a gate file exists."""

import os
import time
from pathlib import Path

from fwdasv.targets.decoder import tiny


class Gated:
    name = "gated"

    def __init__(self, **kwargs):
        self.inner = tiny(**kwargs)

    def prepare(self, case, seed):
        if case.name == "last":
            gate = Path(os.environ["GATE_FILE"])
            deadline = time.monotonic() + 60
            while not gate.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the test never opened the gate")
                time.sleep(0.01)
        return self.inner.prepare(case, seed)


def target(device="cpu", dtype="float32", stage=0, num_stages=1):
    return Gated(device=device, dtype=dtype, stage=stage, num_stages=num_stages)
'''


def test_each_case_is_written_as_soon_as_it_finishes(tmp_path, env):
    (tmp_path / "gated_target.py").write_text(textwrap.dedent(GATED_TARGET))
    gate = tmp_path / "gate"
    out = tmp_path / "out.json"
    env = {**env, "PYTHONPATH": str(tmp_path), "GATE_FILE": str(gate)}
    args = ["--target", "gated_target:target", "--case", "first=2*1@32", "--case", "last=8"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fwdasv.engine", *args, *FAST, "--output-json", str(out)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = proc.stdout.readline()
        assert first_line.startswith("[forward] first: 2 reqs, 2 tokens, median "), first_line
        # The second case is blocked on the gate: the file holds the first alone.
        (only,) = results.load(out)
        assert only.case == "first" and only.ok
        assert proc.poll() is None
        gate.touch()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert stdout.startswith("[forward] last: 1 reqs, 8 tokens, median ")
    assert [r.case for r in results.load(out)] == ["first", "last"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []


def test_fwdasv_forward_via_cli_runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("cases:\n  - name: hit\n    requests: [{query_len: 4, kv_len: 20}]\n")
    out = tmp_path / "nested" / "out.json"
    args = ["forward", "--device", "cpu", "--case", "decode=2*1@16", "--shapes", str(shapes)]
    args += ["--iters", "2", "--samples", "3", "--warmup-s", "0.01", "--output-json", str(out)]
    result = CliRunner().invoke(fwdasv_main, args)
    assert result.exit_code == 1 and "nested does not exist" in result.output
    result = CliRunner().invoke(fwdasv_main, [*args, "--create-dirs"])
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "[forward] decode",
        "[forward] hit",
    ]
    parsed = results.load(out)
    assert [r.case for r in parsed] == ["decode", "hit"]
    for case in parsed:
        check_host_rank(case.ranks[0], count=2 * 3)
        assert case.ranks[0].engine.warmup_s == 0.01
    assert json.loads(out.read_text())[1]["requests"] == [
        {"query_len": 4, "kv_len": 20, "num_draft_tokens": 0, "chunked": False}
    ]


def test_fwdasv_forward_without_output_json_still_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(fwdasv_main, ["forward", "--case", "p=4", *FAST])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("[forward] p: 1 reqs, 4 tokens, median ")
    assert list(tmp_path.iterdir()) == []


# --- bad input: one line, non-zero, no traceback -----------------------------------------

BAD_INPUTS = {
    "malformed case": (["--case", "x=4@10:3c"], "'x=4@10:3c'"),
    "zero requests": (["--case", "x=0*4"], "'x=0*4'"),
    "unknown target module": (["--case", "p=4", "--target", "nosuch_pkg.mod:f"], "nosuch_pkg"),
    "target without colon": (
        ["--case", "p=4", "--target", "fwdasv.targets.decoder"],
        "'fwdasv.targets.decoder'",
    ),
    "missing attribute": (["--case", "p=4", "--target", "fwdasv.targets.decoder:nope"], "nope"),
    "missing shapes file": (["--shapes", "no-such-shapes.yaml"], "no-such-shapes.yaml"),
    "bad yaml shapes file": (["--shapes", "bad.yaml"], "bad.yaml"),
    "unreadable shapes file": (["--shapes", "."], "Shapes file ."),
    "invalid dtype": (["--case", "p=4", "--dtype", "float64"], "'float64'"),
    "graph timer on cpu": (
        ["--case", "p=4", "--device", "cpu", "--timer", "graph"],
        "--timer graph",
    ),
    "no cases": ([], "--case"),
    "duplicate case name": (["--case", "a=4", "--case", "a=8"], "'a'"),
    "bad target option": (["--case", "p=4", "--target-option", "oops"], "'oops'"),
    "unknown target option": (["--case", "p=4", "--target-option", "width=3"], "width"),
    "reserved target option": (["--case", "p=4", "--target-option", "dtype=float16"], "dtype"),
    "bad target option value": (["--case", "p=4", "--target-option", "num_layers=0"], "num_layers"),
}
# The ones the issue names, also each as a real process.
SUBPROCESS_BAD_INPUTS = [
    "malformed case",
    "unknown target module",
    "target without colon",
    "missing shapes file",
    "bad yaml shapes file",
    "invalid dtype",
    "graph timer on cpu",
]


def write_inputs(directory: Path) -> None:
    (directory / "bad.yaml").write_text("cases: [\n  - name: x\n    requests: [")


def check_no_outputs(directory: Path) -> None:
    assert sorted(p.name for p in directory.iterdir()) == ["bad.yaml"]


def check_one_line(output: str, names: str) -> None:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: ")
    assert names in lines[0]
    assert "Traceback" not in output


@pytest.mark.parametrize(("args", "names"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_via_cli_runner(tmp_path, monkeypatch, args, names):
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path)
    result = CliRunner().invoke(fwdasv_main, ["forward", *FAST, *args])
    assert result.exit_code == 1
    assert result.stdout == ""
    check_one_line(result.output, names)
    check_no_outputs(tmp_path)


def test_bad_input_via_the_module_subprocess(tmp_path, env):
    """Each bad input as its own `python -m fwdasv.engine` process, all at once."""
    write_inputs(tmp_path)
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "fwdasv.engine", *FAST, *args],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in SUBPROCESS_BAD_INPUTS
        for args in [BAD_INPUTS[name][0]]
    }
    try:
        outputs = {name: proc.communicate(timeout=180) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for name, (stdout, stderr) in outputs.items():
        assert procs[name].returncode == 1, (name, stderr)
        assert stdout == "", name
        check_one_line(stderr, BAD_INPUTS[name][1])
    check_no_outputs(tmp_path)


def test_unwritable_output_json_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(
        fwdasv_main, ["forward", *FAST, "--case", "p=4", "--output-json", "file/out.json"]
    )
    assert result.exit_code == 1
    # Checked before the case runs: nothing is measured for a result that cannot be kept.
    check_one_line(result.output, "--output-json file/out.json: a parent of it is a file")


def test_usage_errors_exit_2_with_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(fwdasv_main, ["forward", "--iters", "many"])
    assert result.exit_code == 2
    check_one_line(result.output, "--iters")
    result = CliRunner().invoke(fwdasv_main, ["forward", "--timer", "gpu"])
    assert result.exit_code == 2
    check_one_line(result.output, "--timer")


def test_help_shows_the_grammar():
    result = CliRunner().invoke(fwdasv_main, ["forward", "--help"])
    assert result.exit_code == 0
    assert "[N*]Q[@K][c][:D]" in result.output


# --- the bench itself, in process ----------------------------------------------------------


def test_bench_options_refuse_what_cannot_be_timed():
    from fwdasv.engine.capture import BenchOptions

    for bad in [{"iters": 0}, {"samples": 0}, {"warmup_s": -1.0}, {"timer": "gpu"}]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            BenchOptions(**bad)


def test_graph_timer_needs_cuda_even_in_process():
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.capture import BenchOptions, bench_forward
    from fwdasv.targets.decoder import tiny

    prepared = tiny().prepare(parse_case("p=4"), seed=0)
    with pytest.raises(ValueError, match="graph timer needs a CUDA device"):
        bench_forward(prepared, BenchOptions(timer="graph"), torch.device("cpu"))


def test_host_bench_restores_state_before_every_run():
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.core.results import TensorDiff
    from fwdasv.engine.capture import BenchOptions, bench_forward
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


# --- checks before torch, --profile-dir ------------------------------------------------------

TORCH_FREE_CHECKS = {
    "--output-json a device": (["--output-json", "/dev/null"], "--output-json /dev/null"),
    "--profile-dir a device": (["--profile-dir", "/dev/null"], "--profile-dir /dev/null"),
    "--dtype unknown": (["--dtype", "float64"], "'float64'"),
    "--device unknown": (["--device", "tpu"], "--device 'tpu'"),
}

_TORCH_FREE_PROBE = """
import sys
from click.testing import CliRunner
from fwdasv.cli import main
result = CliRunner().invoke(main, ["forward", "--case", "p=4", *sys.argv[1:]])
print("torch imported" if "torch" in sys.modules else "torch not imported")
print(result.exit_code)
print(result.output, end="")
"""


@pytest.mark.parametrize(("args", "names"), TORCH_FREE_CHECKS.values(), ids=TORCH_FREE_CHECKS)
def test_checks_that_need_no_torch_refuse_before_torch_is_imported(tmp_path, env, args, names):
    write_inputs(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _TORCH_FREE_PROBE, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported, status, *output = done.stdout.splitlines()
    # Nothing was measured: the target (and torch with it) was never imported.
    assert imported == "torch not imported", done.stdout + done.stderr
    assert status == "1", done.stdout
    check_one_line("\n".join(output), names)
    check_no_outputs(tmp_path)


def test_a_profile_that_fails_is_a_failed_case_and_keeps_its_timing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    profiles = tmp_path / "profiles"
    # Where the case's kernels.json goes, a directory: the profile cannot be written.
    (profiles / "p.rank0.kernels.json").mkdir(parents=True)
    result = CliRunner().invoke(
        fwdasv_main,
        [
            "forward",
            *FAST,
            "--case",
            "p=4",
            "--profile-dir",
            str(profiles),
            "--output-json",
            "o.json",
        ],
    )
    assert result.exit_code == 3, result.output
    assert "profile FAILED" in result.output
    assert "p (profile failed)" in result.output
    (case,) = json.loads((tmp_path / "o.json").read_text())
    assert case["median_us"] > 0  # measured, kept
    assert "error" in case["ranks"][0]["profile"]


@pytest.mark.parametrize(("args", "threads"), [([], 1), (["--threads", "2"], 2)])
def test_the_host_timer_times_on_one_thread_unless_told(tmp_path, clean_env, args, threads):
    # No OMP_NUM_THREADS: the engine picks the threads itself, as the asv suites do.
    out = tmp_path / "out.json"
    done = engine([*FAST, "--case", "p=4", *args, "--output-json", str(out)], clean_env, tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())
    engine_info = case["ranks"][0]["engine"]
    assert (engine_info["timer"], engine_info["threads"]) == ("host", threads)


def test_the_reference_workload_is_timed_beside_every_timed_replay(tmp_path, env):
    """--reference: fwdasv's fixed workload runs right after each timed replay in the same
    process; its times pair up with the forward's, replay by replay, and the forward's time
    over it is each block's median ratio."""
    from fwdasv.engine.yardstick import WORKLOAD

    out = tmp_path / "out.json"
    args = [*FAST, "--timer", "host", "--reference", "--case", "p=16", "--output-json", str(out)]
    done = engine(args, env, tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = results.load(out)
    rank = case.ranks[0]
    assert rank.reference is not None and rank.reference.workload == WORKLOAD
    assert rank.reference.latency.count == rank.latency.count == 6  # 2 samples of 3
    assert all(t > 0 for t in rank.reference.latency.samples_us)
    relative = rank.reference.relative(rank.latency, 2)
    forward, workload = rank.latency.samples_us, rank.reference.latency.samples_us
    ratios = [a / b for a, b in zip(forward, workload, strict=True)]
    assert relative == [sorted(ratios[:3])[1], sorted(ratios[3:])[1]]
    # Without the flag, no block: the file is as before.
    plain = engine(
        [*FAST, "--timer", "host", "--case", "p=16", "--output-json", str(tmp_path / "p.json")],
        env,
        tmp_path,
    )
    assert plain.returncode == 0, plain.stderr
    (case,) = results.load(tmp_path / "p.json")
    assert case.ranks[0].reference is None and "reference" not in case.ranks[0].to_json()


def test_the_reference_workload_is_refused_where_it_cannot_pace_the_forward():
    from fwdasv.engine.config import BenchOptions, EngineConfig, EngineOptionError

    with pytest.raises(ValueError, match="host timer"):
        BenchOptions(timer="graph", reference=True)
    options = dict(
        target="fwdasv.targets.decoder:tiny",
        target_options={},
        dtype="auto",
        timer="host",
        protocol="auto",
        iters=1,
        samples=1,
        seed=0,
        warmup_s=0,
        reference=True,
    )
    with pytest.raises(EngineOptionError, match=r"--reference .* in one stage"):
        EngineConfig.from_options(device="cpu", pipeline=True, **options)
    config = EngineConfig.from_options(device="cpu", pipeline=False, **options)
    assert config.options.reference and config.options.timer == "host"
