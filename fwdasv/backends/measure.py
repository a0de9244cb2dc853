"""A configuration measured for asv: launches, failure isolation, samples pooled per case.

This is what a suite's `setup_cache` does, as a function of plain values: the
availability check (once), `launches` separate bench processes (the variance
between processes is the variance that matters for regressions), a bench that
dies re-run one case per process (vLLM's bench writes its JSON only at the end
and exits on the first error, so one bad case must cost its own result only),
and each case's results folded into one plain-data entry the suite's
benchmark methods read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fwdasv.backends import BackendUnavailable, RunConfig, RunOutcome, get_backend, launch_bench
from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT, median, spread_pct
from fwdasv.launch import LaunchError


def measure(
    config: RunConfig,
    directory: Path,
    *,
    launches: int = 1,
    tolerance: float = results.DEFAULT_RELATIVE_RMS_TOLERANCE,
    echo: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Every case's pooled entry (see `pool`); raises BackendUnavailable (asv: a skip)."""
    reason = get_backend(config.backend).unavailable(config)
    if reason is not None:
        raise BackendUnavailable(reason)
    echo(
        f"[fwdasv] {config.backend} bench of {len(config.cases)} case(s), "
        f"{launches} launch(es), logs in {directory}"
    )
    pooled: dict[str, dict[str, Any]] = {}
    for index in range(launches):
        for outcome in launch_isolating_failures(config, directory, f"launch{index}", echo):
            for case in outcome.config.cases:
                pool(pooled, case, outcome, config.samples, tolerance)
    return pooled


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
    entries = [results.error_entry(c.name, c.requests, error.summary) for c in config.cases]
    return RunOutcome(config, results.parse(entries, "<failed launch>"), error.log_path or Path())


def pool(
    pooled: dict[str, dict[str, Any]],
    case: BenchCase,
    outcome: RunOutcome,
    samples: int,
    tolerance: float,
) -> None:
    """Fold one launch's result for `case` into the per-case entry.

    The entry holds the samples asv gets (per-sample medians, in seconds, of
    every launch), the validation refusals, the worst graph-vs-eager error, the
    clock uncertainty, the timer, each launch's GPU telemetry summary (the
    worst GPU's, `results.Telemetry` as a dict), and the median and spread over
    the pooled samples.
    """
    entry = pooled.setdefault(
        case.name,
        {
            "samples_s": [],
            "refusals": [],
            "error": None,
            "graph_vs_eager": None,
            "clock_uncertainty_us": None,
            "timer": None,
            "telemetry": [],
        },
    )
    got = results.by_case(outcome.results).get(case.name)
    problems = outcome.problems.get(case.name, [])
    if got is None or not got.ok:
        entry["error"] = got.error if got is not None else "; ".join(problems)
        entry.update(spread_pct=math.nan, unstable=False, median_us=math.nan)
        return
    entry["refusals"] += [f"{v.check}: {v.detail}" for v in results.refusals(got, tolerance)]
    entry["refusals"] += problems
    latency = got.latency
    entry["samples_s"] += [m * 1e-6 for m in latency.block_medians(samples)]
    worst = got.worst_graph_vs_eager()
    pipeline = [c for r in got.ranks for c in r.pipeline_vs_eager.values()]
    errors = [c.relative_rms for c in ([worst] if worst else []) + pipeline]
    if errors:
        entry["graph_vs_eager"] = max(
            [*errors, entry["graph_vs_eager"] or 0.0], key=results.nan_as_worst
        )
    if got.clock_uncertainty_us is not None:
        entry["clock_uncertainty_us"] = max(
            got.clock_uncertainty_us, entry["clock_uncertainty_us"] or 0.0
        )
    entry["timer"] = latency.timer
    telemetry = got.telemetry
    if telemetry is not None:
        entry["telemetry"].append(dataclasses.asdict(telemetry))
    medians_us = [s * 1e6 for s in entry["samples_s"]]
    entry["median_us"] = median(medians_us)
    entry["spread_pct"] = spread_pct(medians_us, entry["median_us"])
    entry["unstable"] = entry["spread_pct"] > UNSTABLE_SPREAD_PCT
