"""Base classes for asv suites over the forward bench (`from fwdasv import asvsuite`).

A suite is one configuration (backend, model or target, dtype, parallel layout,
engine options) and its cases, the suite's asv parameter. asv runs `setup_cache`
once per suite and commit: it launches the bench once for all cases (one model
load per configuration), and every benchmark method reads the cached results:
`track_latency` (samples: asv stores the median, its 99% CI and quartiles), the
spread, the graph-vs-eager error, the GPU's clocks and capping while the case ran
(`fwdasv.hw.telemetry`), and a paced suite's `track_relative`. A case that fails
validation fails its `track_latency`; a suite that cannot run here (no GPU, too
few, a vLLM without the forward bench) is skipped the asv way
(`NotImplementedError` in `setup`). Nothing here imports torch or touches CUDA:
asv imports suites and instantiates their classes at discovery.
"""

from __future__ import annotations

import abc
import inspect
import itertools
import linecache
import math
import os
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fwdasv.core.cases import parse_case, unique_cases

if TYPE_CHECKING:
    from fwdasv.backends import RunConfig
    from fwdasv.backends.measure import CaseSummary
    from fwdasv.core.cases import BenchCase
    from fwdasv.core.results import Telemetry

# Per-process environment overrides, so one benchmarks/ directory serves a
# laptop, a CI box and an offline GPU host.
ENV_MODEL_DIR = "FWDASV_MODEL_DIR"  # vLLM suites: local model directories, by `local_model`
ENV_VLLM_ENTRY = "FWDASV_VLLM_ENTRY"  # "cli" or "module"
ENV_LOG_DIR = "FWDASV_LOG_DIR"  # where bench logs and raw JSON are kept
ENV_ITERS = "FWDASV_ITERS"
ENV_SAMPLES = "FWDASV_SAMPLES"
# Case names (comma-separated) to measure, the others left unmeasured: a run that asks
# asv for one case (`--bench 'track_latency\('case'\)'`, as bisect does) still runs the
# suite's `setup_cache`, which would time every case. A list naming none of the suite's
# cases is ignored (another suite's cases).
ENV_CASES = "FWDASV_CASES"


class RefusedLatency(RuntimeError):
    """The case ran but failed validation: no latency may be recorded for it."""


@dataclass(frozen=True)
class SuiteCache:
    """What a suite's `setup_cache` returns, and asv pickles for every benchmark process.

    Either `skip` (why this machine cannot run the suite: every benchmark is
    skipped) or each case's `CaseSummary`, in the suite's order, with the
    configuration measured and where its logs are, for whoever reads the cache.
    """

    summaries: tuple[CaseSummary, ...] = ()
    config: RunConfig | None = None
    log_dir: str | None = None
    skip: str | None = None

    def summary(self, case: str) -> CaseSummary:
        for summary in self.summaries:
            if summary.case == case:
                return summary
        raise KeyError(f"{case}: not a case of this suite's cache")

    def ran(self, case: str) -> CaseSummary:
        """The case's summary; a case whose bench failed fails every benchmark of it."""
        summary = self.summary(case)
        if summary.error is not None:
            raise RuntimeError(f"{case}: the bench failed: {summary.error}")
        return summary

    def telemetry(
        self,
        case: str,
        figure: Callable[[Telemetry], float | None],
        combine: Callable[[list[float]], float],
    ) -> float:
        """`combine` of one telemetry figure over the case's launches; NaN (skipped) without any."""
        values = [v for t in self.ran(case).telemetry if (v := figure(t)) is not None]
        return float(combine(values)) if values else math.nan

    def capped_pct(self, case: str, figure: Callable[[Telemetry], float | None]) -> float:
        """A percentage of readings over the case's launches, each launch weighted by its
        number of readings (a plain mean where some launch has no figure)."""
        summaries = [t for t in self.ran(case).telemetry if t.readings and figure(t) is not None]

        def mean(values: list[float]) -> float:
            if len(values) != len(summaries):
                return statistics.fmean(values)
            weights = [t.readings for t in summaries]
            return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)

        return self.telemetry(case, figure, mean)


def _value_or_skip(value: float | None) -> float:
    """asv records NaN as skipped: for a value this timer does not measure."""
    return math.nan if value is None else value


def _wanted_cases(cases: tuple[BenchCase, ...]) -> tuple[BenchCase, ...]:
    """The suite's cases that ENV_CASES names; all of them when it is unset or names none."""
    named = {n.strip() for n in os.environ.get(ENV_CASES, "").split(",") if n.strip()}
    wanted = tuple(case for case in cases if case.name in named)
    return wanted or cases


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def log_dir(suite: str) -> Path:
    base = os.environ.get(ENV_LOG_DIR) or os.path.join(
        os.path.expanduser("~"), ".cache", "fwdasv", "logs"
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    # asv names the commit it measures: a log per commit (the per-commit cost tables read it).
    commit = os.environ.get("ASV_COMMIT", "")[:8]
    return Path(base) / "-".join(filter(None, (suite, commit, stamp, str(os.getpid()))))


class ForwardSuite(abc.ABC):
    """One bench configuration timed per commit; subclass and set `cases` and the model.

    Abstract (so asv's discovery skips it when a benchmark module imports it);
    a subclass becomes concrete by setting `cases`:

        class Qwen3(VllmSuite):
            model = "Qwen/Qwen3-0.6B"
            cases = ("decode_bs32_1k=32*1@1024", "prefill_2k=2048")

    `track_latency`'s samples are the per-sample medians (blocks of `iters`
    replays), not raw replays, which are autocorrelated. `track_relative` (torch
    suites with `reference = True`, the host timer on a CPU) is the forward's time
    over fwdasv's fixed workload timed right after each replay in the same process
    (`fwdasv.engine.yardstick`): a busy machine's own changes of speed cancel.
    """

    # --- configuration (override in subclasses) ---
    backend: ClassVar[str] = "torch"
    # torch: target factory `package.module:callable`; vllm: model name or path.
    model: ClassVar[str] = "fwdasv.targets.decoder:tiny"
    # vLLM suites: directory name under $FWDASV_MODEL_DIR that replaces `model` (offline hosts).
    local_model: ClassVar[str | None] = None
    model_options: ClassVar[dict[str, Any]] = {}
    dtype: ClassVar[str] = "auto"
    device: ClassVar[str] = "auto"
    timer: ClassVar[str] = "auto"
    pipeline_stages: ClassVar[int] = 1
    iters: ClassVar[int] = 20
    samples: ClassVar[int] = 10
    seed: ClassVar[int] = 0
    warmup_s: ClassVar[float] = 1.0
    # torch suites: the engine's timing protocol (fwdasv.engine.protocol); auto: its default.
    protocol: ClassVar[str] = "auto"
    max_model_len: ClassVar[int | None] = None
    extra_args: ClassVar[tuple[str, ...]] = ()
    env: ClassVar[dict[str, str]] = {}
    # torch suites: directories outside the tracked repository the target is imported
    # from (`fwdasv init --target-path`). asv starts benchmark processes without the
    # user's PYTHONPATH; these go on every bench's PYTHONPATH (asv's, confirm's,
    # explain's, bisect's: all start it from `run_config`), ahead of `env`'s.
    target_path: ClassVar[tuple[str, ...]] = ()
    # Separate bench processes per commit, their samples pooled: the variance
    # between processes is the variance that matters for regressions.
    launches: ClassVar[int] = 1
    # Relative RMS allowed between graph (or pipeline) and eager outputs.
    tolerance: ClassVar[float] = 1e-3
    # torch suites on the host timer (CPU): time fwdasv's fixed workload after each replay
    # (fwdasv.engine.yardstick) and add `track_relative`, the forward's time over it: the
    # machine's own changes of speed cancel (a busy or shared box).
    reference: ClassVar[bool] = False

    # --- asv attributes ---
    # Explicit, so editing a suite file does not orphan its history.
    version: ClassVar[str] = "1"
    # Covers model load plus all cases (asv's timeout is an inactivity timeout;
    # the bench's output is echoed so progress keeps it alive). The bench's own,
    # wall-clock, is a minute shorter (`launch_timeout`).
    timeout: ClassVar[float] = 3600.0
    param_names: ClassVar[list[str]] = ["case"]
    params: ClassVar[list[list[str]]]
    # Set on each concrete subclass (`__init_subclass__`), never on this class.
    _parsed_cases: ClassVar[tuple[BenchCase, ...]]
    setup_cache: ClassVar[Callable[[ForwardSuite], SuiteCache]]

    @property
    @abc.abstractmethod
    def cases(self) -> tuple[str, ...]:
        """The case strings (`NAME=[N*]Q[@K][c][:D],...`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ABCMeta marks abstract classes only after this hook: test the member itself
        # (the property on an abstract class, the subclass's case strings otherwise).
        cases: object = cls.cases
        if getattr(cases, "__isabstractmethod__", False):
            return
        if not isinstance(cases, Iterable):
            raise TypeError(f"{cls.__name__}.cases: give case strings, not {cases!r}")
        parsed = unique_cases(parse_case(text) for text in cases)
        cls._parsed_cases = tuple(parsed)
        cls.params = [[case.name for case in parsed]]
        cls.setup_cache = _own_setup_cache(cls)
        if cls.reference:
            cls.track_relative = _track_relative  # type: ignore[attr-defined]

    # --- what asv calls ---

    def _measure(self) -> SuiteCache:
        """The body of every suite's `setup_cache`: launch the bench, keep plain data."""
        # Here, not at the top: asv's discovery imports every suite, and must not load numpy
        # (tests/benchmarks/test_asv_check.py).
        from fwdasv.backends import BackendUnavailable
        from fwdasv.backends.measure import measure

        config = self.run_config()
        name = type(self).__name__
        directory = log_dir(name)

        def say(line: str) -> None:
            print(line, flush=True)

        # As asv names it: the module under benchmark_dir (asv imports it as a package).
        module = type(self).__module__.split(".", 1)[-1]
        try:
            cases = measure(
                config, directory, launches=self.launches, tolerance=self.tolerance, echo=say
            )
        except BackendUnavailable as error:
            _record_environment(f"{module}.{name}", say)
            say(f"[fwdasv] {name}: skipped: {error}")
            return SuiteCache(skip=str(error))
        _record_environment(f"{module}.{name}", say, cases.values())
        return SuiteCache(tuple(cases.values()), config, str(directory))

    def run_config(self) -> RunConfig:
        from fwdasv.backends import RunConfig, backend_spec

        model = self.model
        env = dict(self.env)
        if self.target_path:
            given = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*self.target_path, *given]))
        if backend_spec(self.backend).local_models:
            model_dir = os.environ.get(ENV_MODEL_DIR)
            if model_dir and self.local_model:
                model = os.path.join(model_dir, self.local_model)
                # A local directory: never reach for a hub.
                env.setdefault("HF_HUB_OFFLINE", "1")
                env.setdefault("TRANSFORMERS_OFFLINE", "1")
        return RunConfig(
            backend=self.backend,
            model=model,
            cases=_wanted_cases(type(self)._parsed_cases),
            dtype=self.dtype,
            pipeline_stages=self.pipeline_stages,
            iters=_env_int(ENV_ITERS, self.iters),
            samples=_env_int(ENV_SAMPLES, self.samples),
            seed=self.seed,
            warmup_s=self.warmup_s,
            protocol=self.protocol,
            model_options=dict(self.model_options),
            max_model_len=self.max_model_len,
            extra_args=tuple(self.extra_args),
            env=env,
            python=sys.executable,
            timeout_s=launch_timeout(float(self.timeout)),
            device=self.device,
            timer=self.timer,
            reference=self.reference,
            entry=os.environ.get(ENV_VLLM_ENTRY, "cli"),
        )

    def setup(self, cache: SuiteCache, case: str) -> None:
        if cache.skip is not None:
            raise NotImplementedError(cache.skip)
        try:
            error = cache.summary(case).error
        except KeyError:
            # Left out by ENV_CASES: unmeasured here (asv's skip), never a failure.
            raise NotImplementedError(f"{case}: not measured in this run ({ENV_CASES})") from None
        if error is not None and error.startswith(("OutOfMemoryError", "torch.OutOfMemoryError")):
            # Does not fit this machine: not measurable here, not a failure of the commit.
            raise NotImplementedError(f"{case}: {error}")

    def track_latency(self, cache: SuiteCache, case: str) -> dict[str, object]:
        """asv's samples result: `{"samples": [seconds...], "number": 1}`."""
        summary = _recorded(cache, case)
        if summary.unstable:
            print(
                f"[fwdasv] {case}: unstable timing (sample spread {summary.spread_pct:.2f}%)",
                file=sys.stderr,
            )
        return {"samples": list(summary.samples_s), "number": 1}

    track_latency.unit = "seconds"  # type: ignore[attr-defined]

    def track_spread_pct(self, cache: SuiteCache, case: str) -> float:
        return cache.ran(case).spread_pct

    track_spread_pct.unit = "%"  # type: ignore[attr-defined]

    def track_graph_vs_eager(self, cache: SuiteCache, case: str) -> float:
        """Worst relative RMS of graph (or pipeline) vs eager output; NaN (skipped) if not measured."""
        return _value_or_skip(cache.ran(case).worst_relative_rms)

    track_graph_vs_eager.unit = "relative rms"  # type: ignore[attr-defined]

    # GPU telemetry (fwdasv.hw.telemetry), so a step in latency can be told from a
    # change of machine state: NaN (skipped) where no GPU was read (CPU, no NVML).

    def track_sm_clock_mhz(self, cache: SuiteCache, case: str) -> float:
        """Median SM clock while the case ran (median over launches of each launch's median)."""
        return cache.telemetry(case, lambda t: t.sm_clock_median_mhz, statistics.median)

    track_sm_clock_mhz.unit = "MHz"  # type: ignore[attr-defined]

    def track_sm_clock_min_mhz(self, cache: SuiteCache, case: str) -> float:
        """Lowest SM clock read while the case ran, over every launch."""
        return cache.telemetry(case, lambda t: t.sm_clock_min_mhz, min)

    track_sm_clock_min_mhz.unit = "MHz"  # type: ignore[attr-defined]

    def track_power_capped_pct(self, cache: SuiteCache, case: str) -> float:
        """Percent of readings (blocks, in fwdasv's engine) whose clocks were cut for power."""
        return cache.capped_pct(case, lambda t: t.power_capped_pct)

    track_power_capped_pct.unit = "%"  # type: ignore[attr-defined]

    def track_thermal_capped_pct(self, cache: SuiteCache, case: str) -> float:
        """Percent of readings whose clocks were cut for heat."""
        return cache.capped_pct(case, lambda t: t.thermal_capped_pct)

    track_thermal_capped_pct.unit = "%"  # type: ignore[attr-defined]


def _recorded(cache: SuiteCache, case: str) -> CaseSummary:
    """The case's summary, when it ran and its checks let a time be recorded."""
    summary = cache.ran(case)
    if summary.refusals:
        raise RefusedLatency(f"{case}: no latency recorded: " + "; ".join(summary.refusals))
    return summary


def _track_relative(self: ForwardSuite, cache: SuiteCache, case: str) -> dict[str, object]:
    """asv's samples result of the forward's time over fwdasv's fixed workload timed beside
    it (`reference = True`): per sample, the median of the replay-by-replay ratios."""
    summary = _recorded(cache, case)
    if not summary.relative:
        raise RefusedLatency(f"{case}: the bench wrote no reference workload times")
    return {"samples": list(summary.relative), "number": 1}


_track_relative.unit = "ratio"  # type: ignore[attr-defined]
_track_relative.__name__ = "track_relative"
_track_relative.__qualname__ = "ForwardSuite.track_relative"


def _record_environment(
    suite: str, say: Callable[[str], None], cases: Iterable[CaseSummary] = ()
) -> None:
    """What this benchmark process ran with, beside asv's results (fwdasv.asv.ranenv): the
    software, and from the cases' summaries the bench's timer and the modules of the code
    under test it imported (every case's, or none); a record that cannot be written costs a
    line, never the measurement."""
    from fwdasv.asv import ranenv

    summaries = [c for c in cases if c.error is None]
    timers = {c.timer for c in summaries if c.timer is not None}
    imported = None
    if summaries and all(c.imported is not None for c in summaries):
        imported = sorted({name for c in summaries for name in c.imported or ()})
    try:
        ran = ranenv.record(
            suite, timer=min(timers) if len(timers) == 1 else None, imported=imported
        )
    except (OSError, ValueError) as error:
        say(f"[fwdasv] {suite}: the environment was not recorded: {error}")
        return
    if ran is not None:
        say(f"[fwdasv] {suite}: running with {ran.environment.describe()}")


# asv ends a setup_cache silent for the suite's `timeout` with SIGTERM to its process
# group and SIGKILL 1 s later (`asv.util.check_output`): the bench, a session of its own,
# would get only the SIGTERM its caller passes on before being killed, too little for a
# bench that ignores it. A bench silent from its start would meet asv's timeout first (it
# starts earlier), so the bench's own wall-clock timeout is shorter, by this much, and
# ends the whole tree itself.
LAUNCH_TIMEOUT_MARGIN_S = 60.0


def launch_timeout(asv_timeout_s: float) -> float:
    """The bench's wall-clock timeout under asv's `asv_timeout_s`: a minute earlier (a
    tenth earlier for a timeout under ten minutes)."""
    return asv_timeout_s - min(LAUNCH_TIMEOUT_MARGIN_S, asv_timeout_s / 10)


def _own_setup_cache(cls: type[ForwardSuite]) -> types.FunctionType:
    """A `setup_cache` that asv keys to this class alone.

    asv runs one `setup_cache` per key, and the key is the function's module and
    the line of its `def`: an inherited method would give every suite the same
    key, and so the first suite's results. Each suite gets a small function
    whose source (registered with linecache, so inspect and tracebacks show it)
    puts its `def` on the line of the suite's `class` statement.
    """
    try:
        lineno = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        # No source file (a class made in a REPL): any distinct line will do.
        lineno = next(_fallback_lines)
    filename = f"<fwdasv setup_cache of {cls.__module__}.{cls.__qualname__}>"
    source = "\n" * (lineno - 1) + "def setup_cache(self):\n    return self._measure()\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    function: types.FunctionType = namespace["setup_cache"]
    function.__module__ = cls.__module__
    function.__qualname__ = f"{cls.__qualname__}.setup_cache"
    function.__doc__ = "Launch the bench once for all cases of this suite (ForwardSuite._measure)."
    function.__dict__["timeout"] = cls.timeout  # asv reads it as an attribute of the function
    return function


_fallback_lines = itertools.count(100_000)


class TorchSuite(ForwardSuite, abc.ABC):
    """fwdasv's engine on a target (`model = "package.module:callable"`)."""

    backend: ClassVar[str] = "torch"


class VllmSuite(ForwardSuite, abc.ABC):
    """vLLM's `bench forward` on a model (a hub name, or a local dir via FWDASV_MODEL_DIR)."""

    backend: ClassVar[str] = "vllm"
    model: ClassVar[str] = "Qwen/Qwen3-0.6B"
    dtype: ClassVar[str] = "auto"


class PipelineSuite(ForwardSuite, abc.ABC):
    """A pipeline over `pipeline_stages` processes (GPUs); also tracks the clock uncertainty."""

    pipeline_stages: ClassVar[int] = 2

    def track_clock_uncertainty_us(self, cache: SuiteCache, case: str) -> float:
        return _value_or_skip(cache.ran(case).clock_uncertainty_us)

    track_clock_uncertainty_us.unit = "us"  # type: ignore[attr-defined]
