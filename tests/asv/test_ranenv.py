"""`fwdasv.asv.ranenv`: what a benchmark process ran with, and results labelled otherwise.

The record is written as a suite's setup_cache writes it (asv's ASV_* variables
pointing at a real configuration); result files are written by asv's own
`Results` class, under a machine entry as asv copies it into params.
"""

from __future__ import annotations

import json
import time
from importlib import metadata
from pathlib import Path

from fwdasv.asv import ranenv

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ENV_NAME = "fwdasv-py3.11"


def asv_environ(conf_dir: Path) -> dict[str, str]:
    (conf_dir / "asv.conf.json").write_text(json.dumps({"version": 1, "results_dir": "res"}))
    return {"ASV_COMMIT": COMMIT, "ASV_ENV_NAME": ENV_NAME, "ASV_CONF_DIR": str(conf_dir)}


def store_result(results_dir: Path, machine: str, torch: str) -> Path:
    """A result file as `asv run` writes it, the machine entry's keys in its params."""
    from asv.results import Results

    params = {"machine": machine, "host": ranenv.RanEnvironment.current().host, "torch": torch}
    (results_dir / machine).mkdir(parents=True, exist_ok=True)
    (results_dir / machine / "machine.json").write_text(json.dumps({**params, "version": 1}))
    result = Results(params, {}, COMMIT, 0, "3.11", ENV_NAME, {})
    result.save(str(results_dir))
    (path,) = (results_dir / machine).glob(f"{COMMIT[:8]}-*.json")
    return path


def test_the_record_is_this_interpreters_software(tmp_path: Path) -> None:
    import torch

    ran = ranenv.record("forward.Mymodel", asv_environ(tmp_path))
    assert ran is not None
    (path,) = (tmp_path / "res" / ranenv.RAN_DIR).glob("*.jsonl")
    (loaded,) = ranenv.load_records(tmp_path / "res")
    assert loaded == ran and path.name.endswith(".jsonl")  # asv reads only *.json
    env = loaded.environment
    assert (env.torch, env.torch_cuda) == (metadata.version("torch"), torch.version.cuda)
    assert env.fwdasv == metadata.version("fwdasv") and env.python.count(".") == 2
    assert (loaded.commit, loaded.env_name, loaded.suite) == (COMMIT, ENV_NAME, "forward.Mymodel")


def test_the_record_says_what_the_bench_timed_with_and_imported(tmp_path: Path) -> None:
    """What `fwdasv.analysis.findings.untouched` reads a commit's diff against; a record without
    them (an older line, the vLLM bench) reads back as None."""
    imported = ("mymodel", "mymodel.bench")
    ran = ranenv.record(
        "forward.Mymodel", asv_environ(tmp_path), timer="host_perf_counter", imported=imported
    )
    bare = ranenv.record("forward.Other", asv_environ(tmp_path))
    assert ranenv.load_records(tmp_path / "res") == [ran, bare]
    assert ran is not None and (ran.timer, ran.imported) == ("host_perf_counter", imported)
    assert bare is not None and (bare.timer, bare.imported) == (None, None)
    assert "imported" not in bare.to_json()


def test_outside_asv_nothing_is_recorded(tmp_path: Path) -> None:
    assert ranenv.record("forward.Mymodel", {}) is None
    assert (
        ranenv.record("s", {**asv_environ(tmp_path), "ASV_CONF_DIR": str(tmp_path / "x")}) is None
    )
    assert not (tmp_path / "res").exists()


def test_a_result_labelled_with_another_torch_is_reported(tmp_path: Path) -> None:
    results = tmp_path / "res"
    ranenv.record("forward.Mymodel", asv_environ(tmp_path))
    time.sleep(0.01)
    ran_torch = metadata.version("torch")
    store_result(results, "agrees", ran_torch)
    store_result(results, "relabelled", "2.14.1")

    found = ranenv.disagreements(results)
    assert found == [ranenv.Disagreement("relabelled", COMMIT, "torch", "2.14.1", ran_torch)]
    (line,) = ranenv.warning_lines(found)
    assert line.startswith("Warning: 1 result(s) of machine 'relabelled' are labelled with ")
    assert f"the machine entry says torch 2.14.1, the benchmark ran torch {ran_torch}" in line
    assert "The results are kept" in line


def test_results_without_a_record_are_not_judged(tmp_path: Path) -> None:
    store_result(tmp_path / "res", "old", "2.14.1")
    assert ranenv.disagreements(tmp_path / "res") == []
