"""benchmarks/ as asv sees it on a machine without a GPU (and without torch or vLLM at discovery).

asv imports every benchmark module and instantiates every suite class to
discover them, in the benchmark environment, which on a nightly box holds a
vLLM commit being built and on a laptop maybe nothing at all. So discovery must
never import torch or vLLM. Here:

- `asv check` (real asv, `--python=same`, this repo's asv.conf.json) passes,
  also with poisoned `torch` and `vllm` packages first on the benchmark
  processes' path (asv passes ASV_PYTHONPATH on as PYTHONPATH): importing
  either kills the process. A poisoned `fwdasv` is the control: it proves the
  poison is on the path asv uses.
- importing the suite modules and instantiating every suite leaves torch and
  vllm out of sys.modules.
- asv's own discovery (`asv/benchmark.py discover`, the script asv runs in the
  environment) lists each suite's benchmarks with their units, parameters and
  a setup_cache key of its own.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, benchmark_suites

import benchmarks.forward
import benchmarks.pipeline
from fwdasv.asv import suite as asvsuite

CONFIG = ROOT / "asv.conf.json"

MODULES = (benchmarks.forward, benchmarks.pipeline)
POISON_EXIT = 97


SUITES = benchmark_suites(asvsuite.ForwardSuite, MODULES)


def asv_name(cls: type) -> str:
    """asv names a benchmark by its module under benchmark_dir, class and method."""
    module = next(m for m in MODULES if getattr(m, cls.__name__, None) is cls)
    return f"{module.__name__.removeprefix('benchmarks.')}.{cls.__name__}"


def poison(root: Path, *packages: str) -> Path:
    """A directory whose `packages` end the process when imported."""
    for package in packages:
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(
            "import os, sys\n"
            f"sys.stderr.write('POISON: {package} imported at discovery\\n')\n"
            "sys.stderr.flush()\n"
            f"os._exit({POISON_EXIT})\n"
        )
    return root


@pytest.fixture
def asv_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ASV_PYTHONPATH")}
    env["HOME"] = str(home)
    return env


def asv_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asv", "check", "--python=same", "--config", str(CONFIG)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_suites_found_here_are_the_expected_ones():
    # Guards the discovery helper itself: every suite of benchmarks/ as written.
    assert {cls.__name__ for cls in SUITES} == {
        "Qwen3_0_6B",
        "Qwen3_0_6B_Verify",
        "Llama31_8B",
        "CanaryDecoder",
        "Llama3_8BLayersGraph",
        "Qwen3_0_6B_PP2",
        "DecoderPP2",
    }


def test_asv_check_finds_no_problems(asv_env):
    proc = asv_check(asv_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Discovering benchmarks" in out
    assert "No problems found." in out


def test_asv_check_passes_with_torch_and_vllm_poisoned(tmp_path, asv_env):
    poisoned = poison(tmp_path / "poison", "torch", "vllm")
    proc = asv_check({**asv_env, "ASV_PYTHONPATH": str(poisoned)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No problems found." in out
    assert "POISON" not in out


def test_the_poison_is_on_asvs_path(tmp_path, asv_env):
    """Control: the same path with `fwdasv` poisoned makes asv's discovery fail."""
    poisoned = poison(tmp_path / "poison", "fwdasv")
    proc = asv_check({**asv_env, "ASV_PYTHONPATH": str(poisoned)})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "POISON: fwdasv imported at discovery" in out
    assert f"exit status {POISON_EXIT}" in out
    assert "No problems found." not in out


IMPORT_ONLY = r"""
import inspect, json, sys
import benchmarks.forward, benchmarks.pipeline
from fwdasv.asv import suite as asvsuite
made = []
for module in (benchmarks.forward, benchmarks.pipeline):
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, asvsuite.ForwardSuite) and not inspect.isabstract(cls):
            suite = cls()
            suite.params, suite.param_names, suite.setup_cache, suite.track_latency
            made.append(cls.__name__)
print(json.dumps({"made": sorted(set(made)),
                  "heavy": sorted(m for m in ("torch", "vllm", "numpy") if m in sys.modules)}))
"""


def test_discovery_never_imports_torch_or_vllm(asv_env):
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ONLY],
        cwd=ROOT,
        env=asv_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["made"] == sorted(cls.__name__ for cls in SUITES)
    assert got["heavy"] == []


@pytest.fixture(scope="module")
def discovered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """asv's discovery, run as asv runs it (its benchmark.py script), torch and vllm poisoned."""
    from asv import runner

    tmp = tmp_path_factory.mktemp("discover")
    poisoned = poison(tmp / "poison", "torch", "vllm")
    out = tmp / "result.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(poisoned)
    proc = subprocess.run(
        [
            sys.executable,
            runner.BENCHMARK_RUN_SCRIPT,
            "discover",
            str(ROOT / "benchmarks"),
            str(out),
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return {b["name"]: b for b in json.loads(out.read_text())}


def expected_methods(cls: type) -> dict[str, str]:
    methods = {
        "track_latency": "seconds",
        "track_spread_pct": "%",
        "track_graph_vs_eager": "relative rms",
        "track_sm_clock_mhz": "MHz",
        "track_sm_clock_min_mhz": "MHz",
        "track_power_capped_pct": "%",
        "track_thermal_capped_pct": "%",
    }
    if issubclass(cls, asvsuite.PipelineSuite):
        methods["track_clock_uncertainty_us"] = "us"
    return methods


def test_discovery_lists_exactly_the_suites_benchmarks(discovered):
    expected = {f"{asv_name(cls)}.{method}" for cls in SUITES for method in expected_methods(cls)}
    assert set(discovered) == expected


@pytest.mark.parametrize("cls", SUITES, ids=lambda cls: cls.__name__)
def test_each_suites_benchmarks_as_asv_records_them(discovered, cls):
    case_names = [case.name for case in cls._parsed_cases]
    assert len(case_names) == len(cls.cases)
    line = inspect.getsourcelines(cls)[1]
    for method, unit in expected_methods(cls).items():
        bench = discovered[f"{asv_name(cls)}.{method}"]
        assert bench["type"] == "track"
        assert bench["unit"] == unit
        assert bench["param_names"] == ["case"]
        assert bench["params"] == [[repr(name) for name in case_names]]
        assert bench["version"] == cls.version
        assert bench["timeout"] == cls.timeout
        # One setup_cache per suite, keyed on the module and line of its class statement
        # (where it is defined: fwdasv.vllm_suites for the vLLM ones forward.py imports).
        defined = cls.__module__.split(".", 1)[1]
        assert bench["setup_cache_key"] == f"{defined}:{line}"
        assert bench["setup_cache_timeout"] == cls.timeout


def test_every_suite_has_a_setup_cache_key_of_its_own(discovered):
    keys: dict[str, set[str]] = {}
    for name, bench in discovered.items():
        suite = name.rsplit(".", 1)[0]
        keys.setdefault(suite, set()).add(bench["setup_cache_key"])
    assert all(len(k) == 1 for k in keys.values()), keys
    distinct = {next(iter(k)) for k in keys.values()}
    assert len(distinct) == len(keys) == len(SUITES)
