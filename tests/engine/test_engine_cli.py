"""fwdasv's single-stage engine on CPU, through its two command lines.

`python -m fwdasv.engine` runs as a real subprocess; `fwdasv forward` through
click's CliRunner. Both must write vLLM's results JSON, which
`fwdasv.core.results.load` reads, with the host timer's fields.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import FAST, engine

from fwdasv.cli import main as fwdasv_main
from fwdasv.core import results
from fwdasv.core.results import refusals

KINDS = ["decode", "prefill", "hit", "chunk", "verify", "mix"]


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


def test_fwdasv_forward_via_cli_runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("cases:\n  - name: hit\n    requests: [{query_len: 4, kv_len: 20}]\n")
    out = tmp_path / "nested" / "out.json"
    args = ["forward", "--device", "cpu", "--case", "decode=2*1@16", "--shapes", str(shapes)]
    args += ["--iters", "2", "--samples", "3", "--warmup-s", "0.01", "--output-json", str(out)]
    result = CliRunner().invoke(fwdasv_main, args)
    assert result.exit_code == 2 and "nested does not exist" in result.output
    # The error names the option that creates it.
    assert result.output.rstrip().endswith("create it first, or pass --create-dirs")
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
    # The reason in the grammar's terms, not the request's repr.
    "kv shorter than the query": (
        ["--case", "x=512@128"],
        "Case 'x=512@128': Invalid request 512@128: the KV length K counts the query",
    ),
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
    assert result.exit_code == 2
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
        assert procs[name].returncode == 2, (name, stderr)
        assert stdout == "", name
        check_one_line(stderr, BAD_INPUTS[name][1])
    check_no_outputs(tmp_path)


def test_unwritable_output_json_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(
        fwdasv_main, ["forward", *FAST, "--case", "p=4", "--output-json", "file/out.json"]
    )
    assert result.exit_code == 2
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
    assert status == "2", done.stdout  # bad input
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
