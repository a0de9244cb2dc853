"""The vLLM backend's argv against vLLM 0.33's own parsers, for every vLLM suite in benchmarks/.

For each `VllmSuite` of benchmarks/forward.py and benchmarks/pipeline.py, with
and without FWDASV_MODEL_DIR and with both entries (FWDASV_VLLM_ENTRY=cli and
=module), fwdasv builds the RunConfig and the argv. One subprocess (vLLM imports
torch and edits os.environ on import, so it stays out of the pytest process)
then parses every argv three ways with vLLM's real code:

- `vllm.benchmarks.forward.main.add_cli_args` on a `FlexibleArgumentParser`
  (the subcommand parser, what the bench's `main` reads);
- the full entry the argv names, run as `python -m` would run it (runpy):
  `vllm.entrypoints.cli.main` builds vLLM's top-level CLI parser (`vllm bench
  forward ...`, which does build on CPU: the CLI switches in CpuPlatform for
  `bench`) and dispatches to the forward subcommand; fwdasv's shim
  `fwdasv.backends.vllm_forward` builds its own parser from `add_cli_args`.
  The one boundary replaced is the bench's `main(args)`, which needs CUDA: it
  records the namespace it was handed instead of loading a model.
- each case string through vLLM's own `parse_case` and `jitter_kv_lens`.

The tests then check the namespaces hold what the suite means.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from fake_nvml import FakeNvml
from helpers import benchmark_suites

import benchmarks.forward
import benchmarks.pipeline
from fwdasv.asv import suite as asvsuite
from fwdasv.backends import RunConfig
from fwdasv.backends import vllm as vllm_backend
from fwdasv.core.cases import parse_case

pytestmark = pytest.mark.vllm

ENTRIES = ("cli", "module")
MODEL_SOURCES = ("hub", "local")
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}


SUITES = benchmark_suites(asvsuite.VllmSuite)
KEYS = [(cls, source, entry) for cls in SUITES for source in MODEL_SOURCES for entry in ENTRIES]


def key_id(cls: type, source: str, entry: str) -> str:
    return f"{cls.__name__}-{source}-{entry}"


def test_every_vllm_suite_is_discovered():
    # The benchmarks/ files as of this writing; a new suite is picked up by itself.
    names = {cls.__name__ for cls in SUITES}
    assert {"Qwen3_0_6B", "Qwen3_0_6B_Verify", "Llama31_8B", "Qwen3_0_6B_PP2"} <= names
    assert all(cls.backend == "vllm" for cls in SUITES)


# --- the probe: vLLM's parsers in one subprocess ------------------------------------

PROBE = r"""
import argparse, json, runpy, sys
from collections.abc import Iterator
from dataclasses import asdict

import vllm.benchmarks.forward.main as bench_main_module
import vllm.entrypoints.cli.benchmark.forward as cli_forward
from vllm.benchmarks.forward.main import add_cli_args
from vllm.benchmarks.forward.shapes import jitter_kv_lens, parse_case
from vllm.utils.argparse_utils import FlexibleArgumentParser

jobs_path, out_path = sys.argv[1:3]
jobs = json.load(open(jobs_path))
recorded = []

def record(args):  # stands in for the bench's main: it needs CUDA
    recorded.append(vars(args).copy())

bench_main_module.main = record  # what the shim imports at call time
cli_forward.main = record  # what `vllm bench forward` calls

def plain(ns):
    return json.loads(json.dumps(ns, default=repr))

def case_json(case):
    return {"name": case.name, "requests": [asdict(r) for r in case.requests]}

def run_entry(module, args):
    recorded.clear()
    sys.argv = ["probe", *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        return {"exit": repr(exit.code)}
    if len(recorded) != 1:
        return {"exit": f"bench main called {len(recorded)} times"}
    return plain(recorded[0])

out = {"jobs": {}, "texts": {}}
for job in jobs["jobs"]:
    parser = FlexibleArgumentParser(prog="vllm bench forward")
    add_cli_args(parser)
    ns = parser.parse_args(job["options"])
    cases = [parse_case(text) for text in ns.case]
    exact = [
        case_json(jitter_kv_lens(c, ns.kv_len_jitter, ns.max_model_len, ns.seed)) for c in cases
    ]
    out["jobs"][job["id"]] = {
        "sub": plain(vars(ns)),
        "cases": [case_json(c) for c in cases],
        "jittered": exact,
        "entry": run_entry(job["module"], job["entry_args"]),
    }
for text in jobs["texts"]:
    out["texts"][text] = case_json(parse_case(text))
json.dump(out, open(out_path, "w"))
"""


def _config(cls: type, source: str, entry: str, model_dir: Path) -> RunConfig:
    with pytest.MonkeyPatch.context() as patch:
        for name in (asvsuite.ENV_ITERS, asvsuite.ENV_SAMPLES):
            patch.delenv(name, raising=False)
        patch.setenv(asvsuite.ENV_VLLM_ENTRY, entry)
        if source == "local":
            patch.setenv(asvsuite.ENV_MODEL_DIR, str(model_dir))
        else:
            patch.delenv(asvsuite.ENV_MODEL_DIR, raising=False)
        return cls().run_config()


@pytest.fixture(scope="module")
def shim_help(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    """`python -m fwdasv.backends.vllm_forward --help`, started early to overlap the probe."""
    env = {**os.environ, **VLLM_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fwdasv.backends.vllm_forward", "--help"],
        cwd=tmp_path_factory.mktemp("shim-help"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield proc
    if proc.poll() is None:  # the help test was not selected
        proc.kill()
    proc.communicate()


@pytest.fixture(scope="module")
def contract(
    tmp_path_factory: pytest.TempPathFactory, shim_help: subprocess.Popen
) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vllm-contract")
    model_dir = root / "models"
    built: dict[str, dict[str, Any]] = {}
    jobs = []
    texts = set()
    for cls, source, entry in KEYS:
        job_id = key_id(cls, source, entry)
        config = _config(cls, source, entry, model_dir)
        output_json = root / "out" / f"{job_id}.json"
        argv = vllm_backend.argv(config, output_json)
        prefix = vllm_backend.CLI_ENTRY if entry == "cli" else vllm_backend.MODULE_ENTRY
        built[job_id] = {
            "config": config,
            "argv": argv,
            "output_json": output_json,
            "model_dir": model_dir,
        }
        assert argv[1] == prefix[1]
        jobs.append(
            {
                "id": job_id,
                "options": argv[len(prefix) :],
                # What `python -m <module>` sees as sys.argv[1:].
                "module": argv[1],
                "entry_args": argv[2:],
            }
        )
        texts.update(cls.cases)
        texts.update(c.to_string() for c in config.cases)
    (root / "jobs.json").write_text(json.dumps({"jobs": jobs, "texts": sorted(texts)}))
    (root / "probe.py").write_text(PROBE)
    proc = subprocess.run(
        [sys.executable, str(root / "probe.py"), str(root / "jobs.json"), str(root / "out.json")],
        cwd=root,
        env={**os.environ, **VLLM_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    parsed = json.loads((root / "out.json").read_text())
    return {"built": built, "parsed": parsed["jobs"], "texts": parsed["texts"]}


def _expected_model(cls: type, source: str, model_dir: Path) -> str:
    if source == "local":
        assert cls.local_model, f"{cls.__name__} has no local_model for offline hosts"
        return str(model_dir / cls.local_model)
    return cls.model


@pytest.mark.parametrize(("cls", "source", "entry"), KEYS, ids=[key_id(*k) for k in KEYS])
def test_argv_prefix_is_the_entry(contract, cls, source, entry):
    argv = contract["built"][key_id(cls, source, entry)]["argv"]
    if entry == "cli":
        assert argv[:4] == ["-m", "vllm.entrypoints.cli.main", "bench", "forward"]
        assert argv[:4] == vllm_backend.CLI_ENTRY
    else:
        assert argv[:2] == ["-m", "fwdasv.backends.vllm_forward"]
        # The shim takes the bench's options directly, no subcommand words.
        assert argv[2] == "--model"


@pytest.mark.parametrize(("cls", "source", "entry"), KEYS, ids=[key_id(*k) for k in KEYS])
def test_vllm_subcommand_parser_reads_the_intended_values(contract, cls, source, entry):
    job_id = key_id(cls, source, entry)
    built = contract["built"][job_id]
    config: RunConfig = built["config"]
    ns = contract["parsed"][job_id]["sub"]
    model = _expected_model(cls, source, built["model_dir"])
    assert config.model == model
    assert ns["model"] == model
    assert ns["pipeline_parallel_size"] == cls.pipeline_stages
    assert ns["seed"] == cls.seed
    assert ns["kv_len_jitter"] == 0.0
    assert ns["iters"] == cls.iters
    assert ns["samples"] == cls.samples
    assert ns["load_format"] == "dummy"
    assert ns["skip_tokenizer_init"] is True
    assert ns["max_model_len"] == cls.max_model_len
    assert ns["dtype"] == cls.dtype
    assert ns["output_json"] == str(built["output_json"])
    assert ns["case"] == [parse_case(text).to_string() for text in cls.cases]
    # Nothing the bench reads has a surprising value from some other flag.
    assert ns["shapes"] is None and ns["profile_dir"] is None
    assert ns["enable_prefix_caching"] is False
    if source == "local":
        # A local directory: the bench must never reach for a hub.
        assert config.env["HF_HUB_OFFLINE"] == "1"
        assert config.env["TRANSFORMERS_OFFLINE"] == "1"
    else:
        assert "HF_HUB_OFFLINE" not in config.env


@pytest.mark.parametrize(("cls", "source", "entry"), KEYS, ids=[key_id(*k) for k in KEYS])
def test_extra_args_reach_vllm(contract, cls, source, entry):
    ns = contract["parsed"][key_id(cls, source, entry)]["sub"]
    extra = list(cls.extra_args)
    if "--speculative-config" in extra:
        expected = json.loads(extra[extra.index("--speculative-config") + 1])
        assert ns["speculative_config"] == expected
        assert isinstance(ns["speculative_config"], dict)
    else:
        assert ns["speculative_config"] is None
    assert ns["exclude_drafter"] is ("--exclude-drafter" in extra)


def test_verify_suite_times_the_target_only_with_three_draft_slots(contract):
    ns = contract["parsed"][key_id(benchmarks.forward.Qwen3_0_6B_Verify, "hub", "cli")]["sub"]
    assert ns["exclude_drafter"] is True
    assert ns["speculative_config"]["method"] == "ngram"
    # vLLM refuses a case with more draft tokens than num_speculative_tokens.
    drafts = max(
        r.num_draft_tokens
        for text in benchmarks.forward.Qwen3_0_6B_Verify.cases
        for r in parse_case(text).requests
    )
    assert drafts == 3 <= ns["speculative_config"]["num_speculative_tokens"]


@pytest.mark.parametrize(("cls", "source", "entry"), KEYS, ids=[key_id(*k) for k in KEYS])
def test_vllm_parse_case_gives_fwdasv_requests_and_no_jitter(contract, cls, source, entry):
    job = contract["parsed"][key_id(cls, source, entry)]
    config: RunConfig = contract["built"][key_id(cls, source, entry)]["config"]
    ours = [{"name": c.name, "requests": [asdict(r) for r in c.requests]} for c in config.cases]
    assert job["cases"] == ours
    # With the argv's --kv-len-jitter, --max-model-len and --seed, vLLM's own
    # jitter leaves every request exact (and no KV length exceeds the maximum).
    assert job["jittered"] == ours
    # The canonical strings in the argv mean to vLLM what the suite's strings mean.
    for text, case in zip(cls.cases, config.cases, strict=True):
        assert contract["texts"][text] == contract["texts"][case.to_string()]
        assert contract["texts"][text]["requests"] == [asdict(r) for r in case.requests]


@pytest.mark.parametrize(("cls", "source", "entry"), KEYS, ids=[key_id(*k) for k in KEYS])
def test_the_full_entry_parses_to_the_same_namespace(contract, cls, source, entry):
    """`python -m vllm.entrypoints.cli.main bench forward ...` (vLLM's top-level
    parser, its `bench` and `forward` subparsers) or fwdasv's shim hand the
    bench's main exactly the subcommand parser's namespace."""
    job = contract["parsed"][key_id(cls, source, entry)]
    got = job["entry"]
    assert "exit" not in got, got
    sub = job["sub"]
    if entry == "cli":
        assert got["subparser"] == "bench" and got["bench_type"] == "forward"
        # The top-level parser adds its routing keys and its own logging options.
        assert {"subparser", "bench_type", "dispatch_function"} <= set(got) - set(sub)
        # Dispatched through `bench` to the forward subcommand's own cmd.
        assert "BenchmarkForwardSubcommand.cmd" in got["dispatch_function"]
        got = {k: v for k, v in got.items() if k in sub}
    assert got == sub


# --- the shim and the probe for the forward bench ---------------------------------


def test_shim_help_runs_vllms_forward_parser(shim_help: subprocess.Popen):
    stdout, stderr = shim_help.communicate(timeout=300)
    assert shim_help.returncode == 0, stderr[-3000:]
    assert stdout.startswith("usage: python -m fwdasv.backends.vllm_forward")
    for flag in ("--case", "--kv-len-jitter", "--exclude-drafter", "--iters", "--samples"):
        assert flag in stdout, flag
    # vLLM's EngineArgs options come with add_cli_args.
    assert "--pipeline-parallel-size" in stdout and "--load-format" in stdout


def test_has_forward_bench_finds_the_installed_vllm():
    ok, where = vllm_backend.has_forward_bench()
    assert ok is True
    spec = importlib.util.find_spec("vllm")
    assert Path(where) == Path(spec.origin).parent
    assert (Path(where) / "benchmarks" / "forward" / "main.py").is_file()


def test_unavailable_counts_gpus_for_the_pipeline(monkeypatch):

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    FakeNvml.h200(count=1).install(monkeypatch)
    single = benchmarks.forward.Qwen3_0_6B().run_config()
    pipeline = benchmarks.pipeline.Qwen3_0_6B_PP2().run_config()
    assert vllm_backend.unavailable(single) is None
    assert vllm_backend.unavailable(pipeline) == (
        "vLLM's forward bench needs 2 CUDA device(s); 1 visible"
    )
    FakeNvml.h200(count=2).install(monkeypatch)
    assert vllm_backend.unavailable(pipeline) is None


FAKE_PROBE = r"""
import json, sys
from fwdasv.backends import RunConfig
from fwdasv.backends.vllm import has_forward_bench, unavailable
from fwdasv.core.cases import parse_case
ok, reason = has_forward_bench()
config = RunConfig(backend="vllm", model="m", cases=(parse_case("d=1@8"),))
print(json.dumps({"ok": ok, "reason": reason, "unavailable": unavailable(config),
                  "imported": "vllm" in sys.modules}))
"""


def _fake_vllm(root: Path, with_forward: bool) -> Path:
    package = root / "vllm"
    (package / "benchmarks").mkdir(parents=True)
    # The probe must not import vLLM: importing this fake fails loudly.
    (package / "__init__.py").write_text('raise ImportError("the fake vllm was imported")\n')
    (package / "benchmarks" / "__init__.py").write_text("")
    (package / "benchmarks" / "latency.py").write_text("")
    if with_forward:
        (package / "benchmarks" / "forward").mkdir()
        (package / "benchmarks" / "forward" / "__init__.py").write_text("")
        (package / "benchmarks" / "forward" / "main.py").write_text("")
    return package


@pytest.mark.parametrize("with_forward", [False, True], ids=["vllm-0.32", "with-forward"])
def test_has_forward_bench_on_a_fake_vllm(tmp_path, with_forward):
    package = _fake_vllm(tmp_path, with_forward)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", FAKE_PROBE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["imported"] is False
    assert got["ok"] is with_forward
    if with_forward:
        assert Path(got["reason"]) == package
        # Past the version check, only the GPU count can refuse.
        assert got["unavailable"] is None or "CUDA device" in got["unavailable"]
    else:
        assert got["reason"] == (
            f"this vLLM ({package}) has no vllm.benchmarks.forward "
            "(the forward bench needs vLLM >= 0.33)"
        )
        assert got["unavailable"] == got["reason"]
