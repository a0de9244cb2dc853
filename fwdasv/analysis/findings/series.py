"""A series: one benchmark and case on one machine and environment, over the commit order.

The results directory is read directly (`fwdasv.asv.history`), no publish needed:
`read_series` puts each record's samples (its median where it stored none) at its
commit's place in the branch's first-parent order (commit dates when the
repository is not on disk), and records what the machine ran under (torch, driver,
CUDA) per commit. Every benchmark is read: latency series are judged, canaries and
clocks tell drift (`fwdasv.analysis.findings.findings`). A commit without results (not
measured, or failed) has no samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from fwdasv.analysis.rules.noise import commit_medians
from fwdasv.asv.history import History, Problem, Record
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.errors import UserError

LATENCY_UNIT = "seconds"
# A paced suite's series (`reference = True`, fwdasv.asv.suite): the forward's time over
# fwdasv's fixed workload timed beside it. Where a case has it, it is judged in place of
# the case's latency: the machine's own changes of speed cancel in it, and they do not in
# the latency (a busy box's latency series steps with its neighbours).
RELATIVE_METRIC = "track_relative"
RELATIVE_UNIT = "ratio"
LATENCY_METRIC = "track_latency"
CANARY_PREFIX = "Canary"
# The suite's GPU clock series (fwdasv.asv.suite): a clock that fell explains a slower step.
CLOCK_METRIC = "track_sm_clock_mhz"


def metric_name(relative: bool) -> str:
    """The metric of a case's judged series: RELATIVE_METRIC for a paced one, else
    LATENCY_METRIC."""
    return RELATIVE_METRIC if relative else LATENCY_METRIC


class FindingsError(UserError):
    """The results cannot be read, or a filter names nothing."""


@dataclass(frozen=True)
class SeriesKey:
    machine: str
    env_name: str | None  # None only where a result file names no environment
    benchmark: str  # "forward.TinyLM.track_latency"
    case: str  # the parameter label ("" for a benchmark without parameters)

    @property
    def suite(self) -> str:
        return self.benchmark.rpartition(".")[0]

    @property
    def suite_class(self) -> str:
        return self.suite.rpartition(".")[2]

    @property
    def metric(self) -> str:
        return self.benchmark.rpartition(".")[2]

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark


@dataclass
class Series:
    """One series over the commit order: each commit's samples (empty: not measured/failed)."""

    key: SeriesKey
    unit: str | None
    params: dict[str, str]
    history: list[list[float]]
    # Per commit, the machine's recorded environment (torch, driver, CUDA); None: unknown.
    environments: list[tuple[object, ...] | None] = field(default_factory=list)

    def medians(self) -> list[float | None]:
        return commit_medians(self.history)


def commit_order(project: AsvProject, records: Iterable[Record]) -> list[str]:
    """The commits with results, oldest first: the branches' first-parent order when the
    repository is on disk (as `asv publish` plots them), else commit dates."""
    dated: dict[str, float] = {}
    for record in records:
        dated.setdefault(record.commit_hash, _date_key(record.commit_date))
    order: list[str] = []
    try:
        for branch in project.branches:
            for commit in project.git("rev-list", "--first-parent", "--reverse", branch).split():
                if commit in dated and commit not in order:
                    order.append(commit)
    except AsvError:
        order = []
    if not order:
        order = sorted(dated, key=lambda c: (dated[c], c))
    return order


def _date_key(value: str | None) -> float:
    if value is None:
        return math.inf
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def load_series(
    project: AsvProject, machine: str | None = None
) -> tuple[list[str], dict[SeriesKey, Series]]:
    """Every series of the results (all benchmarks: canaries and clocks judge drift)."""
    order, series, _ = read_series(project, machine)
    return order, series


def read_series(
    project: AsvProject, machine: str | None = None
) -> tuple[list[str], dict[SeriesKey, Series], tuple[Problem, ...]]:
    """`load_series`, and the files that could not be read (each one may hide a step)."""
    try:
        history = History(project.results_dir, machines=[machine] if machine else (), samples=True)
    except UserError as error:
        raise FindingsError(str(error)) from None
    records = list(history.records())
    order = commit_order(project, records)
    position = {commit: i for i, commit in enumerate(order)}
    series: dict[SeriesKey, Series] = {}
    for record in records:
        index = position.get(record.commit_hash)
        if index is None:
            continue  # not on the branch: asv publish leaves it out too
        key = SeriesKey(record.machine, record.env_name, record.benchmark, record.case)
        entry = series.get(key)
        if entry is None:
            entry = series[key] = Series(
                key, record.unit, dict(record.params), [[] for _ in order], [None] * len(order)
            )
        entry.environments[index] = environment(record)
        if record.status != "ok":
            continue
        samples = record.sample_values()
        if not samples and record.median is not None:
            samples = [float(record.median)]
        entry.history[index].extend(samples)
    return order, series, tuple(history.report.problems)


def environment(record: Record) -> tuple[object, ...]:
    """What a record says of the machine's software under the code: torch, driver, CUDA."""
    return (record.torch, record.driver, record.cuda)
