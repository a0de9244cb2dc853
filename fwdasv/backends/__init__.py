"""Things that produce forward-bench JSON, behind one interface.

A backend turns a `RunConfig` (what to time and how) into a launch of a bench
process (or torchrun group) that writes vLLM's results JSON: `torch` runs
fwdasv's own engine on a target from the project under test, `vllm` runs
vLLM's `bench forward`. `run_bench` launches it through `fwdasv.launch` and
then checks what the bench itself did not: that every case ran with exactly
the requested shapes. What differs between backends is said once, in `REGISTRY`
(`BackendSpec`: what it measures, which telemetry it reads, how a commit is
installed); nothing else compares a backend's name.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from fwdasv.backends import telemetry
from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.errors import UserError
from fwdasv.launch import LaunchSpec, launch, run_captured


@dataclass(frozen=True)
class BackendSpec:
    """What one backend is: the module that launches it and what sets it apart."""

    name: str
    module: str  # the `Backend` module (imported when a bench is launched)
    measures: str  # what a case's time is, in words
    # "engine": the bench reads the GPU (clock, power) at every block boundary itself;
    # "sampled": fwdasv samples NVML beside the bench (`fwdasv.backends.telemetry`).
    telemetry: Literal["engine", "sampled"]
    # How asv installs a commit: "build" (the project's own install), or "python-over-base"
    # (the commit's Python over a compiled base when one is named: `fwdasv.asv.vllm_base`).
    installs: Literal["build", "python-over-base"]
    reference: bool = False  # can run fwdasv's fixed workload beside each replay
    steady_malloc: bool = False  # the engine's host allocator settings (engine.hostmem)
    local_models: bool = False  # a model name is looked up under FWDASV_MODEL_DIR
    explain_entry: str | None = None  # the entry that names each kernel's op (explain)


REGISTRY: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "torch",
            "fwdasv.backends.torch",
            measures="fwdasv's engine: a target's forward, CUDA-graph or host timed",
            telemetry="engine",
            installs="build",
            reference=True,
            steady_malloc=True,
        ),
        BackendSpec(
            "vllm",
            "fwdasv.backends.vllm",
            measures="vLLM's `bench forward`: the model runner's forward",
            telemetry="sampled",
            installs="python-over-base",
            local_models=True,
            explain_entry="explain",
        ),
    )
}
BACKENDS = tuple(REGISTRY)


def backend_spec(name: str) -> BackendSpec:
    """The registry's entry for `name`; a UserError naming the known ones otherwise."""
    spec = REGISTRY.get(name)
    if spec is None:
        raise UserError(f"Unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return spec


class BackendUnavailable(UserError):
    """This machine or environment cannot run the configuration (asv: skip, not fail)."""


@dataclass(frozen=True)
class RunConfig:
    """One bench configuration: a model, a parallel layout, engine options and cases."""

    backend: str
    # torch: a target factory `package.module:callable`; vllm: a model name or local path.
    model: str
    cases: tuple[BenchCase, ...]
    dtype: str = "auto"
    pipeline_stages: int = 1
    iters: int = 20
    samples: int = 10
    seed: int = 0
    # torch only: seconds of replays before timing (vLLM's bench fixes ~1 s).
    warmup_s: float = 1.0
    # torch only: the engine's timing protocol (fwdasv.engine.protocol); auto: its default.
    protocol: str = "auto"
    # torch only: keyword options of the target factory.
    model_options: Mapping[str, Any] = field(default_factory=dict)
    # vllm only.
    max_model_len: int | None = None
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = sys.executable
    timeout_s: float = 3600.0
    # torch only: "auto", "cpu", "cuda"; and the timer, "auto", "graph" (CUDA) or "host".
    device: str = "auto"
    timer: str = "auto"
    # torch only, the host timer on CPU: fwdasv's fixed workload beside each replay
    # (the engine's --reference; fwdasv.engine.yardstick).
    reference: bool = False
    # vllm only: "cli" (python -m vllm.entrypoints.cli.main bench forward),
    # "module" (fwdasv's in-process shim, for installs without vLLM's server deps) or
    # "phases" (the shim with startup phase timers in the log: fwdasv.backends.vllm_phases)
    # or "explain" (the shim naming each profiled kernel's op and line: vllm_explain).
    entry: str = "cli"

    def __post_init__(self) -> None:
        spec = backend_spec(self.backend)
        if not self.cases:
            raise UserError("A bench configuration needs at least one case")
        if self.reference and not spec.reference:
            raise UserError("reference (fwdasv's workload beside each replay) is for torch suites")
        if self.iters < 1 or self.samples < 1 or self.pipeline_stages < 1:
            raise UserError(
                f"iters ({self.iters}), samples ({self.samples}) and pipeline_stages "
                f"({self.pipeline_stages}) must all be >= 1"
            )


class Backend(Protocol):
    def unavailable(self, config: RunConfig) -> str | None:
        """Why this environment cannot run `config`, or None."""

    def argv(self, config: RunConfig, output_json: Path) -> list[str]:
        """What follows the interpreter (or torchrun) to run the bench."""


def get_backend(name: str) -> Backend:
    """The backend module of that name (a module is the `Backend` protocol's value)."""
    module: Backend = importlib.import_module(backend_spec(name).module)  # type: ignore[assignment]
    return module


def find_module(python: str, module: str, extra_path: Sequence[str] = ()) -> str | None:
    """Where `module` (a top-level name) is found by the interpreter `python`, without importing
    it; None when it is not. A bench runs in the interpreter of its configuration (asv's
    environment for a commit), which need not be this one."""
    # Not realpath: a virtualenv's python is a link to the base interpreter, another environment.
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        spec = importlib.util.find_spec(module)
        if spec is None and extra_path:
            spec = importlib.machinery.PathFinder.find_spec(module, list(extra_path))
        if spec is None:
            return None
        locations = spec.submodule_search_locations
        return next(iter(locations)) if locations else (spec.origin or module)
    probe = (
        "import importlib.util, importlib.machinery, sys\n"
        "s = importlib.util.find_spec(sys.argv[1]) or importlib.machinery.PathFinder.find_spec("
        "sys.argv[1], sys.argv[2:])\n"
        "print('' if s is None else (next(iter(s.submodule_search_locations)) "
        "if s.submodule_search_locations else (s.origin or sys.argv[1])))\n"
    )
    try:
        done = run_captured([python, "-c", probe, module, *extra_path])
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and found else None


def visible_gpus() -> int:
    """GPUs a child process would see, from NVML and CUDA_VISIBLE_DEVICES; no CUDA init."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        count = min(count, len(entries))
    return count


@dataclass
class RunOutcome:
    config: RunConfig
    results: list[results.CaseResult]
    log_path: Path
    # Problems the bench did not report itself, per case name.
    problems: dict[str, list[str]] = field(default_factory=dict)


def shape_problems(config: RunConfig, outcome: list[results.CaseResult]) -> dict[str, list[str]]:
    """Cases missing from the output, or run with other shapes than requested."""
    problems: dict[str, list[str]] = {}
    by_name = results.by_case(outcome)
    for case in config.cases:
        got = by_name.get(case.name)
        if got is None:
            problems.setdefault(case.name, []).append("missing from the bench output")
        elif got.requests != case.requests:
            problems.setdefault(case.name, []).append(
                "ran other shapes than requested (KV-length jitter?): "
                f"asked {case.body()}, got {BenchCase(case.name, got.requests).body()}"
            )
    return problems


def require_available(config: RunConfig) -> None:
    """Raise BackendUnavailable (asv: a skip) where this environment cannot run `config`."""
    reason = get_backend(config.backend).unavailable(config)
    if reason is not None:
        raise BackendUnavailable(reason)


def run_bench(config: RunConfig, workdir: str | os.PathLike[str]) -> RunOutcome:
    """Launch the configured bench once; raises BackendUnavailable or LaunchError."""
    require_available(config)
    return launch_bench(config, workdir)


def launch_bench(
    config: RunConfig,
    workdir: str | os.PathLike[str],
    echo: Callable[[str], None] | None = None,
    tag: str = "bench",
) -> RunOutcome:
    """Launch the bench once, its availability already checked; raises LaunchError."""
    kind = backend_spec(config.backend)
    backend = get_backend(config.backend)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    output_json = workdir / f"{tag}.json"
    log_path = workdir / f"{tag}.log"
    env = dict(config.env)
    if kind.steady_malloc:
        from fwdasv.engine.hostmem import STEADY_MALLOC_ENV

        env = {**STEADY_MALLOC_ENV, **env}
    spec = LaunchSpec(
        args=backend.argv(config, output_json),
        python=config.python,
        nproc_per_node=config.pipeline_stages,
        env=env,
        timeout_s=config.timeout_s,
    )
    names = [c.name for c in config.cases]
    if kind.telemetry == "engine":
        # The engine reads the GPU at every block boundary itself.
        outcome = launch(spec, output_json, log_path, echo=echo, cases=names)
        return RunOutcome(config, outcome, log_path, shape_problems(config, outcome))
    with telemetry.sampling(config.pipeline_stages) as sampler:
        outcome = launch(
            spec, output_json, log_path, echo=telemetry.marking(echo, sampler, names), cases=names
        )
    if sampler is not None:
        outcome = telemetry.attach(output_json, outcome, sampler)
    return RunOutcome(config, outcome, log_path, shape_problems(config, outcome))
