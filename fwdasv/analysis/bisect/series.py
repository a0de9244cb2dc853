"""The series a bisection follows: how a bench process measures it, and its noise prior.

`resolve_benchmark` names one benchmark (and case) as `asv find` does, the environment
canary set aside (hand use: `fwdasv bisect GOOD..BAD BENCH`); `follow_benchmark` and
`follow_finding` turn a benchmark case, or a finding, into a `Followed` series: its
`SeriesRef` (one bench process of its suite measures it), its unit, the noise of one
process's median from its stored history on this machine (`history_prior`: None
without a history to estimate it from) and the change it is bisected for (the
finding's; None by hand, taken from the ends' re-measure).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.confirm.processes import SeriesRef
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.series import (
    CANARY_PREFIX,
    LATENCY_METRIC,
    RELATIVE_METRIC,
    Series,
    load_series,
)
from fwdasv.analysis.remeasure import (
    RemeasureError,
    process_layout,
    resolve,
    stored_prior,
)
from fwdasv.analysis.rules.noise import Noise
from fwdasv.asv.history import History
from fwdasv.asv.project import AsvProject
from fwdasv.asv.result_files import BenchmarkInfo, param_label


@dataclass(frozen=True)
class BenchmarkCase:
    """The benchmark (and case) a bisection follows."""

    name: str
    case: str | None
    unit: str | None
    pattern: str  # for asv run --bench: this benchmark (and case) only


def _is_canary(name: str) -> bool:
    """A benchmark of the environment canary's suite (`module.CanaryX.track_latency`)."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[-2].startswith(CANARY_PREFIX)


def resolve_benchmark(
    benchmarks: Mapping[str, BenchmarkInfo], bench: str, case: str | None
) -> BenchmarkCase:
    """asv find's rule: an exact name, else a regex that matches exactly one benchmark.

    The environment canary (a `Canary*` suite, beside the project's own in every
    `fwdasv init` project) is set aside when the regex also matches a benchmark of the
    project's: `track_latency` names the model's latency, not the canary's. Only an
    exact name or a regex that matches the canary alone bisects the canary.
    """
    if bench in benchmarks:
        names = [bench]
    else:
        try:
            regex = re.compile(bench)
        except re.error as error:
            raise BisectError(f"BENCH {bench!r}: bad regular expression: {error}") from None
        names = sorted(n for n in benchmarks if regex.search(n))
        names = [n for n in names if not _is_canary(n)] or names
    if len(names) != 1:
        found = ", ".join(names[:10]) if names else "none"
        raise BisectError(f"BENCH {bench!r} must name exactly one benchmark (matches: {found})")
    name = names[0]
    info = benchmarks[name]
    params = info.params
    combos = [", ".join(c) for c in _product(params)]
    labels = [", ".join(param_label(v) for v in c) for c in _product(params)]
    if not params:
        if case is not None:
            raise BisectError(f"{name} has no parameters: drop --case")
        return BenchmarkCase(name, None, info.unit, f"^{re.escape(name)}$")
    if case is None:
        if len(labels) != 1:
            raise BisectError(
                f"{name} has {len(labels)} cases ({', '.join(labels)}): pick one with --case"
            )
        case = labels[0]
    if case not in labels:
        raise BisectError(f"{name} has no case {case!r} (cases: {', '.join(labels)})")
    combo = combos[labels.index(case)]
    pattern = f"^{re.escape(name)}\\({re.escape(combo)}\\)$"
    return BenchmarkCase(name, case, info.unit, pattern)


def _product(params: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    return list(itertools.product(*params)) if params else [()]


@dataclass(frozen=True)
class Followed:
    """One series of a bisection."""

    ref: SeriesRef
    unit: str | None
    prior: Noise | None  # one process's noise from the stored history; None: the run's own
    claimed_pct: float | None = None  # the finding's change; None: the ends' re-measure
    finding: Finding | None = None


def history_prior(project: AsvProject, series: Series | None, suite: str) -> Noise | None:
    """The noise of one process's median from the series' stored history, with each
    commit's loaded processes left out, as check and confirm take it (`stored_prior`); None
    when the history is too short to estimate it (the prior alone says only "about 1%")."""
    if series is None:
        return None
    return stored_prior(series.history, process_layout(project, suite))


def follow_finding(project: AsvProject, finding: Finding, series: Series | None) -> Followed:
    return Followed(
        SeriesRef.of(finding.key),
        finding.unit,
        history_prior(project, series, finding.key.suite),
        finding.percent,
        finding,
    )


def follow_benchmark(project: AsvProject, machine: str, bench: str, case: str | None) -> Followed:
    """The series of BENCH (and --case) on `machine`, as the user names it by hand."""
    known = project.results_dir / "benchmarks.json"
    if known.is_file():
        target = resolve_benchmark(History(project.results_dir).benchmarks, bench, case)
        name, case = target.name, target.case
    else:
        name = bench
    metric = name.rpartition(".")[2]
    if metric not in (LATENCY_METRIC, RELATIVE_METRIC):
        raise BisectError(
            f"BENCH {name}: bisect follows a fwdasv suite's {LATENCY_METRIC} or "
            f"{RELATIVE_METRIC} (it re-measures bench processes); for another benchmark use "
            "`asv find`"
        )
    try:
        target_case = resolve(project, name, case)
    except RemeasureError as error:
        raise BisectError(str(error)) from None
    # Nothing measured yet (bisect from no stored samples): no history, no prior.
    stored = project.results_dir.is_dir()
    all_series = load_series(project, machine)[1] if stored else {}
    candidates = [
        s for key, s in all_series.items() if key.benchmark == name and key.case == target_case.case
    ]
    series = max(candidates, key=lambda s: sum(map(bool, s.history)), default=None)
    ref = SeriesRef(target_case.suite, target_case.case, metric == RELATIVE_METRIC)
    unit = series.unit if series is not None else ("ratio" if ref.relative else "seconds")
    return Followed(ref, unit, history_prior(project, series, target_case.suite))
