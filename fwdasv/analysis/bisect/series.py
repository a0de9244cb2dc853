"""The series a bisection follows: which benchmark case, its samples per commit, where bisect's
own runs go.

`resolve_benchmark` names one benchmark (and case) as `asv find` does, the
environment canary set aside; `StoredSamples` reads a commit's samples from the
history's results dir, then from bisect's own (`remeasure_project`: the same
configuration with a results dir of its own, never the history's: a re-measure
from a quieter window appended to the stored results would move their medians).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fwdasv.analysis.bisect.environment import PER_COMMIT_ENVS, BisectError, check_per_commit
from fwdasv.analysis.series import CANARY_PREFIX
from fwdasv.asv.commit_filter import CommitFilter
from fwdasv.asv.history import History, Record, remeasure_results_dir
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.asv.result_files import BenchmarkInfo, HistoryError, param_label


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


@dataclass
class StoredSamples:
    """Samples of one benchmark case per commit: the history's (the results dir) followed by
    bisect's own re-measures (`remeasures`, a results dir of their own)."""

    project: AsvProject
    machine: str
    benchmark: BenchmarkCase
    env_name: str | None = None
    notes: list[str] = field(default_factory=list)
    remeasures: AsvProject | None = None

    def samples(self, commit: str) -> list[float]:
        """The history's samples of `commit`, then bisect's re-measures of it."""
        out = samples_of(self.read(commit))
        if self.remeasures is not None and (self.remeasures.results_dir / self.machine).is_dir():
            out += samples_of(self.read(commit, self.remeasures))
        return out

    def read(self, commit: str, where: AsvProject | None = None) -> Record | None:
        """The record of this commit (the chosen env), or None when there is none."""
        project = where or self.project
        if not (project.results_dir / self.machine).is_dir():
            return None
        history = History(
            project.results_dir,
            machines=[self.machine],
            bench=[f"^{re.escape(self.benchmark.name)}$"],
            commits=CommitFilter(frozenset([commit])),
            samples=True,
        )
        records = [
            r
            for r in history.records()
            if self.benchmark.case is None or r.case == self.benchmark.case
        ]
        per_commit = [r for r in records if (r.env_name or "").split("-", 1)[0] in PER_COMMIT_ENVS]
        if len(per_commit) < len(records):
            self.notes.append(f"{commit[:8]}: ignored stored results from an existing environment")
        if self.env_name is not None:
            per_commit = [r for r in per_commit if r.env_name == self.env_name]
        envs = sorted({r.env_name or "" for r in per_commit})
        if len(envs) > 1:
            raise BisectError(
                f"{commit[:8]} has results in several environments ({', '.join(envs)}); "
                "bisect follows one: limit the configuration to one python/matrix entry"
            )
        if not per_commit:
            return None
        record = per_commit[0]
        check_per_commit(record.commit_hash, record.env_name, commit)
        if self.env_name is None:
            self.env_name = record.env_name
        return record


def samples_of(record: Record | None) -> list[float]:
    """A record's samples; none for a failed or skipped result, or no record."""
    if record is None or record.status != "ok":
        return []
    return record.sample_values()


def remeasure_project(project: AsvProject) -> AsvProject:
    """The asv project bisect measures into: the same configuration, environments and
    benchmarks, with a results dir of its own (`remeasure_results_dir`)."""
    root = remeasure_results_dir(project.results_dir)
    config = dict(project.raw)
    config.update(
        repo=project.repo,
        results_dir=str(root / "results"),
        html_dir=str(root / "html"),
        env_dir=str(project.env_dir),
        benchmark_dir=str(project.benchmark_dir),
    )
    root.mkdir(parents=True, exist_ok=True)
    path = root / "asv.conf.json"
    text = json.dumps(config, indent=2) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    try:
        return AsvProject.load(path)
    except (AsvError, HistoryError) as error:
        raise BisectError(f"bisect's results dir {root}: {error}") from None
