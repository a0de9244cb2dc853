"""A configuration measured for asv: launches, failure isolation, samples pooled per case.

This is what a suite's `setup_cache` does, as a function of plain values: the
availability check (once), `launches` separate bench processes (the variance
between processes is the variance that matters for regressions), a bench that
dies re-run one case per process (vLLM's bench writes its JSON only at the end
and exits on the first error, so one bad case must cost its own result only),
and each case's results folded into one `CaseSummary` the suite's benchmark
methods read. A summary is plain frozen data: asv pickles what `setup_cache`
returns and unpickles it in every benchmark's process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwdasv.backends import RunConfig, RunOutcome, launch_bench, require_available
from fwdasv.core import results
from fwdasv.core.numbers import nan_as_worst
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT, median, spread_pct
from fwdasv.launch import LaunchError


@dataclass(frozen=True)
class CaseSummary:
    """One case over every launch of a configuration: what asv records for it.

    `samples_s` are the samples asv gets (per-sample medians, in seconds, of
    every launch); `refusals` the failed checks that forbid recording a
    latency (validation, or shapes other than requested); `error` the last
    failure of a launch, when one failed (then every benchmark of the case
    fails). `worst_relative_rms` is the worst graph (or pipeline) vs eager
    relative RMS over ranks and launches (None: not compared, the host timer),
    `clock_uncertainty_us` a pipeline's worst clock bound, `timer` the one that
    timed it, `telemetry` each launch's GPU summary (the worst GPU's), and the
    median, spread and instability are over the pooled samples.
    """

    case: str
    samples_s: tuple[float, ...] = ()
    refusals: tuple[str, ...] = ()
    error: str | None = None
    worst_relative_rms: float | None = None
    clock_uncertainty_us: float | None = None
    timer: str | None = None
    telemetry: tuple[results.Telemetry, ...] = ()
    median_us: float = math.nan
    spread_pct: float = math.nan
    unstable: bool = False
    # Per sample, the forward's time over fwdasv's fixed workload timed beside it (the
    # engine's --reference); empty when a launch ran without it.
    relative: tuple[float, ...] = ()
    # The modules of the code under test the launches imported (fwdasv.engine.imports),
    # over every launch; None when a launch did not record them.
    imported: tuple[str, ...] | None = None

    @classmethod
    def empty(cls, case: str) -> CaseSummary:
        """Before any launch."""
        return cls(case)

    def pooled(
        self,
        got: results.CaseResult | None,
        problems: Sequence[str],
        samples: int,
        tolerance: float,
    ) -> CaseSummary:
        """This summary with one more launch's result for the case folded in.

        `got` None: the case is missing from the launch's output; `problems`
        what the launch did not report itself (missing, other shapes).
        """
        if got is None or not got.ok:
            error = got.error if got is not None else "; ".join(problems)
            return dataclasses.replace(
                self, error=error, spread_pct=math.nan, unstable=False, median_us=math.nan
            )
        refused = [f"{v.check}: {v.detail}" for v in results.refusals(got, tolerance)]
        latency = got.latency
        samples_s = (*self.samples_s, *(m * 1e-6 for m in latency.block_medians(samples)))
        worst = got.worst_graph_vs_eager()
        pipeline = [c for r in got.ranks for c in r.pipeline_vs_eager.values()]
        errors = [c.relative_rms for c in ([worst] if worst else []) + pipeline]
        worst_rms = self.worst_relative_rms
        if errors:
            worst_rms = max([*errors, worst_rms or 0.0], key=nan_as_worst)
        uncertainty = self.clock_uncertainty_us
        if got.clock_uncertainty_us is not None:
            uncertainty = max(got.clock_uncertainty_us, uncertainty or 0.0)
        telemetry = got.telemetry
        pace = got.ranks[0].reference
        # Every launch's, or none: a launch without the workload leaves no relative series.
        relative: tuple[float, ...] = ()
        if pace is not None and (self.relative or not self.samples_s):
            relative = (*self.relative, *pace.relative(got.ranks[0].latency, samples))
        engine = got.ranks[0].engine
        recorded = engine.imported if engine is not None else None
        imported = None
        if recorded is not None and (self.imported is not None or not self.samples_s):
            imported = tuple(sorted({*(self.imported or ()), *recorded}))
        medians_us = [s * 1e6 for s in samples_s]
        median_us = median(medians_us)
        spread = spread_pct(medians_us, median_us)
        return dataclasses.replace(
            self,
            samples_s=samples_s,
            refusals=(*self.refusals, *refused, *problems),
            worst_relative_rms=worst_rms,
            clock_uncertainty_us=uncertainty,
            timer=latency.timer,
            telemetry=self.telemetry if telemetry is None else (*self.telemetry, telemetry),
            median_us=median_us,
            spread_pct=spread,
            unstable=spread > UNSTABLE_SPREAD_PCT,
            relative=relative,
            imported=imported,
        )


def pool(
    config: RunConfig, outcomes: Sequence[RunOutcome], tolerance: float
) -> dict[str, CaseSummary]:
    """Every case of `config` over `outcomes` (the launches, in order), by case name."""
    pooled = {case.name: CaseSummary.empty(case.name) for case in config.cases}
    for outcome in outcomes:
        got = results.by_case(outcome.results)
        for case in outcome.config.cases:
            pooled[case.name] = pooled[case.name].pooled(
                got.get(case.name), outcome.problems.get(case.name, []), config.samples, tolerance
            )
    return pooled


def measure(
    config: RunConfig,
    directory: Path,
    *,
    launches: int = 1,
    tolerance: float = results.DEFAULT_RELATIVE_RMS_TOLERANCE,
    echo: Callable[[str], None] = print,
) -> dict[str, CaseSummary]:
    """Every case's summary (see `pool`); raises BackendUnavailable (asv: a skip)."""
    require_available(config)
    echo(
        f"[fwdasv] {config.backend} bench of {len(config.cases)} case(s), "
        f"{launches} launch(es), logs in {directory}"
    )
    outcomes = [
        outcome
        for index in range(launches)
        for outcome in launch_isolating_failures(config, directory, f"launch{index}", echo)
    ]
    return pool(config, outcomes, tolerance)


def launch_isolating_failures(
    config: RunConfig, directory: Path, tag: str, echo: Callable[[str], None]
) -> list[RunOutcome]:
    """One bench for all cases; if it dies, one bench per case."""
    try:
        return [launch_bench(config, directory, echo=echo, tag=tag)]
    except LaunchError as error:
        if len(config.cases) == 1:
            return [failed_outcome(config, error)]
        echo(
            f"[fwdasv] the bench of {len(config.cases)} cases failed ({error.summary}); "
            "running each case on its own"
        )
    outcomes = []
    for case in config.cases:
        single = dataclasses.replace(config, cases=(case,))
        try:
            outcomes.append(launch_bench(single, directory, echo=echo, tag=f"{tag}-{case.name}"))
        except LaunchError as error:
            outcomes.append(failed_outcome(single, error))
    return outcomes


def failed_outcome(config: RunConfig, error: LaunchError) -> RunOutcome:
    """A bench process that failed: its error (exit status, the rank's error) as each case's result."""
    failed = [results.CaseResult.failed(c.name, c.requests, error.summary) for c in config.cases]
    return RunOutcome(config, failed, error.log_path or Path())
