"""asv's results/ tree read back as flat records, one per (commit, machine, env, benchmark, case).

`History` lists the result files its filters leave (machines, `--bench`
patterns, a `CommitFilter`) and reads them one at a time (a generator: a history
of 10,000 commits never sits in memory), each through `fwdasv.asv.result_files`.
A `Record` is one stored result, with NaN ("skipped") as None and the suite's
companion benchmarks (`track_spread_pct`, `track_graph_vs_eager`) of the same
commit, machine, environment and case joined on. asv's own rules are kept: a
result whose benchmark `version` differs from benchmarks.json is stale and
dropped, as `asv publish` drops it, and so is one of a benchmark no longer
there; `Report` counts both, and the files it could not read.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fwdasv.asv.commit_filter import (
    CommitFilter,
)
from fwdasv.asv.result_files import (
    HistoryError,
    ResultFile,
    ResultFileError,
    ResultJson,
    Row,
    file_rows,
    iso_utc,
    load_benchmarks,
    load_json,
    param_label,
    parse_result_file,
)
from fwdasv.core.clitools import bench_regexes
from fwdasv.core.numbers import nan_to_none

# machine.json keys copied into every record (fwdasv's hardware module writes them;
# torch: on a machine without NVIDIA GPUs, where the host timer times torch's kernels).
MACHINE_KEYS = ("gpu", "gpu_count", "gpu_uuids", "driver", "cuda", "clock_policy", "torch")

# record field -> the companion benchmark method of the same suite that holds it.
COMPANIONS = {"spread_pct": "track_spread_pct", "graph_vs_eager": "track_graph_vs_eager"}

# The record's fields (`Record`), in the order every writer uses. `samples` is last and
# optional.
FIELDS = (
    "commit_hash",
    "commit_date",
    "machine",
    *MACHINE_KEYS,
    "env_name",
    "benchmark",
    "suite",
    "metric",
    "case",
    "params",
    "unit",
    "status",
    "median",
    "ci_99_a",
    "ci_99_b",
    "q_25",
    "q_75",
    "sample_count",
    *COMPANIONS,
    "started_at",
    "duration_s",
)
SAMPLES_FIELD = "samples"

# Where bisect keeps its own measurements (an asv results dir of their own, beside the
# history's): appended to the stored results, a re-measure from another window of load
# would move their medians and make a finding, and publish would plot it.
REMEASURES_DIR = ".fwdasv-remeasures"


def remeasure_results_dir(results_dir: str | os.PathLike[str]) -> Path:
    """The directory of re-measures that belongs to `results_dir` (never read as history)."""
    return Path(results_dir).parent / REMEASURES_DIR


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def line(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Report:
    """What one pass over the history read, dropped and could not read."""

    files_read: int = 0
    records: int = 0
    dropped_version: int = 0
    dropped_unknown: int = 0
    problems: list[Problem] = field(default_factory=list)

    def lines(self) -> list[str]:
        files = "file" if self.files_read == 1 else "files"
        out = [f"{self.records} records from {self.files_read} result {files}"]
        if self.dropped_version:
            out.append(
                f"dropped {self.dropped_version} results whose benchmark version differs "
                "from benchmarks.json (stale: the benchmark's code changed since)"
            )
        if self.dropped_unknown:
            out.append(
                f"dropped {self.dropped_unknown} results of benchmarks missing from "
                "benchmarks.json (removed or renamed)"
            )
        if self.problems:
            count = len(self.problems)
            out.append(f"{count} result file{'s' if count != 1 else ''} could not be read:")
            out.extend(f"  {p.line()}" for p in self.problems)
        return out


RecordStatus = Literal["ok", "failed", "skipped"]  # asv stored a value / null / NaN


@dataclass(frozen=True)
class Record:
    """One stored result: a commit, machine, environment, benchmark and case.

    asv's v2 row unpacked, with the companion benchmarks' spread and
    graph-vs-eager check joined on and NaN ("skipped") as None. The machine
    keys are whatever the machine file holds (any JSON value). `samples` is
    None unless the history was read with samples (and asv stored some).
    """

    commit_hash: str
    commit_date: str | None
    machine: str
    gpu: object
    gpu_count: object
    gpu_uuids: object
    driver: object
    cuda: object
    clock_policy: object
    torch: object
    env_name: str | None
    benchmark: str  # "forward.TinyLM.track_latency"
    suite: str  # "forward.TinyLM"
    metric: str  # "track_latency"
    case: str  # the parameter label ("" without parameters)
    params: dict[str, str]
    unit: str | None
    status: RecordStatus
    median: float | None
    ci_99_a: float | None
    ci_99_b: float | None
    q_25: float | None
    q_75: float | None
    sample_count: int | None
    spread_pct: float | None
    graph_vs_eager: float | None
    started_at: str | None
    duration_s: float | None
    samples: tuple[float | None, ...] | None = None

    def as_row(self, fields: Sequence[str] = FIELDS) -> dict[str, object]:
        """The record as one flat JSON object, keys in `fields` order (samples a list)."""
        row = {name: getattr(self, name) for name in fields}
        if SAMPLES_FIELD in row and self.samples is not None:
            row[SAMPLES_FIELD] = list(self.samples)
        return row

    def sample_values(self) -> list[float]:
        """The stored samples that are numbers (asv stores NaN for a skipped one)."""
        return [s for s in self.samples or () if s is not None and not math.isnan(s)]

    @classmethod
    def _of_fields(cls, fields: dict[str, object]) -> Record:
        """A record whose __dict__ is `fields` (every field, in order: the caller's to
        keep; tests/test_history_export.py checks them), as pickle restores one. The frozen __init__ sets 28 attributes one at a time: 2.6 us a record against
        0.3 here, which made `fwdasv export` of a long history half again as slow
        (bench/speed/export_speed.py)."""
        record = object.__new__(cls)
        object.__setattr__(record, "__dict__", fields)
        return record


_RECORD_FIELDS = (*FIELDS, SAMPLES_FIELD)
assert tuple(f.name for f in dataclasses.fields(Record)) == _RECORD_FIELDS, "FIELDS != Record"

# (suite, record field) -> per parameter combination, the companion benchmark's value
_Companions = dict[tuple[str, str], dict[tuple[str, ...], object]]


class History:
    """An asv results directory, its benchmarks.json and machine files, with filters.

    `files()` lists the result files the filters leave (cheap: names only);
    `records(files)` reads them one at a time and yields a `Record` per stored
    result (with `samples` when asked), tallying into `report`.
    """

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        machines: Sequence[str] = (),
        bench: Sequence[str] | str | None = None,
        commits: CommitFilter | None = None,
        samples: bool = False,
    ):
        self.results_dir = Path(results_dir)
        if self.results_dir.exists() and not self.results_dir.is_dir():
            raise HistoryError(
                f"{self.results_dir} is a file, not a results directory (give asv's "
                "results_dir, where `asv run` writes <machine>/machine.json and benchmarks.json)"
            )
        if not self.results_dir.is_dir():
            raise HistoryError(
                f"{self.results_dir}: no such results directory (give asv's results_dir, "
                "where `asv run` writes <machine>/machine.json and benchmarks.json)"
            )
        self.benchmarks = load_benchmarks(self.results_dir)
        self.known_machines = sorted(
            entry.name
            for entry in os.scandir(self.results_dir)
            if entry.is_dir() and not entry.name.startswith(".")
        )
        unknown = [m for m in machines if m not in self.known_machines]
        if unknown:
            known = ", ".join(self.known_machines) or "none"
            fix = "measure under that name first (`asv run --machine NAME`)"
            if self.known_machines:
                fix = f"pass --machine with one of those, or {fix}"
            raise HistoryError(
                f"unknown machine {', '.join(map(repr, unknown))} in {self.results_dir} "
                f"(known: {known}): no results are stored under that name; {fix}"
            )
        self.machines = list(dict.fromkeys(machines)) or self.known_machines
        patterns = [bench] if isinstance(bench, str) else list(bench or ())
        self.bench = bench_regexes(patterns, HistoryError)
        self.commits = commits
        self.samples = samples
        self.report = Report()
        self.machine_info: dict[str, Mapping[str, object]] = {}
        # (benchmark, params) -> per combination (case label, params dict, kept by --bench)
        self._combos: dict[tuple[str, object], list[tuple[str, dict[str, str], bool]]] = {}

    def benchmark_names(self) -> Iterator[str]:
        """What `--bench` searches, of every benchmark benchmarks.json knows: its name, and
        'name(params)' for each combination of its parameters (as `_selected` matches)."""
        for name, info in self.benchmarks.items():
            yield name
            for combo in itertools.product(*info.params) if info.params else ():
                yield f"{name}({', '.join(combo)})"

    @property
    def fields(self) -> tuple[str, ...]:
        return (*FIELDS, SAMPLES_FIELD) if self.samples else FIELDS

    def _machine(self, machine: str) -> Mapping[str, object]:
        info = self.machine_info.get(machine)
        if info is None:
            path = self.results_dir / machine / "machine.json"
            try:
                loaded = load_json(path)
                if not isinstance(loaded, dict):
                    raise ValueError("not an object")
                info = loaded
            except FileNotFoundError:
                info = {}
            except (OSError, ValueError) as error:
                # Every result file repeats the machine keys in its params: go on without.
                self.report.problems.append(Problem(str(path), f"unreadable ({error})"))
                info = {}
            self.machine_info[machine] = info
        return info

    def files(self) -> list[ResultFile]:
        """The result files to read, machine by machine, in file-name order."""
        out: list[ResultFile] = []
        for machine in self.machines:
            folder = self.results_dir / machine
            # Whatever is at a result's name (a dangling link, a directory, a FIFO) is
            # listed: reading it names it as a problem, where skipping it would drop a
            # commit's results unsaid.
            names = sorted(
                entry.name
                for entry in os.scandir(folder)
                if entry.name.endswith(".json")
                and entry.name != "machine.json"
                and not entry.name.startswith(".")
            )
            for name in names:
                file = ResultFile(folder / name, machine)
                if self.commits is None or self.commits.may_match_file(file.sha8):
                    out.append(file)
        return out

    def records(self, files: Iterable[ResultFile] | None = None) -> Iterator[Record]:
        """The records, one file read at a time; a bad file becomes a `Problem`."""
        for file in self.files() if files is None else files:
            try:
                records = self.file_records(file)
            except ResultFileError as error:
                self.report.problems.append(Problem(str(file.path), str(error)))
                continue
            if records is None:
                continue
            self.report.files_read += 1
            self.report.records += len(records)
            yield from records

    def _selected(
        self, name: str, params: list[list[str]]
    ) -> list[tuple[str, dict[str, str], bool]]:
        key = (name, tuple(tuple(p) for p in params))
        combos = self._combos.get(key)
        if combos is None:
            info = self.benchmarks.get(name)
            names = list(info.param_names) if info is not None else []
            if len(names) != len(params):
                names = [f"param{i + 1}" for i in range(len(params))]
            combos = []
            for combo in itertools.product(*params) if params else [()]:
                labels = [param_label(v) for v in combo]
                full = f"{name}({', '.join(combo)})" if combo else name
                kept = not self.bench or any(p.search(name) or p.search(full) for p in self.bench)
                combos.append((", ".join(labels), dict(zip(names, labels, strict=True)), kept))
            self._combos[key] = combos
        return combos

    def file_records(self, file: ResultFile) -> list[Record] | None:
        """All records of one result file (None: its commit is filtered out).

        Raises ResultFileError when the file is not asv's v2 results JSON.
        """
        parsed = parse_result_file(file.path)
        if self.commits is not None and not self.commits.matches(parsed.commit_hash):
            return None
        run = self._run_fields(file, parsed)
        rows = file_rows(parsed)
        companions = self._companions(rows)
        records: list[Record] = []
        for name, row in rows.items():
            if self._kept(name, row):
                records.extend(self._row_records(name, row, run, companions))
        return records

    def _run_fields(self, file: ResultFile, parsed: ResultJson) -> dict[str, object]:
        """The leading fields every record of the file shares (commit, machine, env), in
        FIELDS order. The file's params are the machine file as it was at run time;
        machine.json is only the latest copy."""
        machine_info = self._machine(file.machine)
        run = parsed.params
        machine = run.get("machine", file.machine)
        return {
            "commit_hash": parsed.commit_hash,
            "commit_date": iso_utc(parsed.date),
            "machine": machine if isinstance(machine, str) else file.machine,
            **{key: run.get(key, machine_info.get(key)) for key in MACHINE_KEYS},
            "env_name": parsed.env_name,
        }

    def _companions(self, rows: Mapping[str, Row]) -> _Companions:
        """The companion benchmarks' values (`COMPANIONS`) of this file, by suite."""
        companions: _Companions = {}
        for name, row in rows.items():
            suite, _, metric = name.rpartition(".")
            for record_field, method in COMPANIONS.items():
                if metric == method and self._current(name, row):
                    values = (nan_to_none(v) for v in row.values("result"))
                    companions[(suite, record_field)] = dict(zip(row.combos(), values, strict=True))
        return companions

    def _kept(self, name: str, row: Row) -> bool:
        """Whether benchmarks.json knows the row's benchmark at its version; what is
        dropped (and the filters would have kept) is counted in the report."""
        if name in self.benchmarks and self._current(name, row):
            return True
        dropped = sum(1 for _, _, kept in self._selected(name, row.params) if kept)
        if name not in self.benchmarks:
            self.report.dropped_unknown += dropped
        else:
            self.report.dropped_version += dropped
        return False

    def _row_records(
        self, name: str, row: Row, run: dict[str, object], companions: _Companions
    ) -> list[Record]:
        """One record per parameter combination of one benchmark's row that --bench keeps."""
        suite, _, metric = name.rpartition(".")
        unit = self.benchmarks[name].unit
        started_at = iso_utc(row.get("started_at"), "milliseconds")
        duration = nan_to_none(row.get("duration"))
        result = row.values("result")
        median = list(map(nan_to_none, result))
        ci_a = list(map(nan_to_none, row.values("stats_ci_99_a")))
        ci_b = list(map(nan_to_none, row.values("stats_ci_99_b")))
        q_25 = list(map(nan_to_none, row.values("stats_q_25")))
        q_75 = list(map(nan_to_none, row.values("stats_q_75")))
        repeat = row.values("stats_repeat")
        samples = row.values("samples")
        spread = companions.get((suite, "spread_pct")) or {}
        graph_vs_eager = companions.get((suite, "graph_vs_eager")) or {}
        combos = row.combos()
        records = []
        for j, (case, params, kept) in enumerate(self._selected(name, row.params)):
            if not kept:
                continue
            sample_list = samples[j]
            count = repeat[j]
            if count is None and isinstance(sample_list, list):
                count = len(sample_list)
            status = (
                "failed" if result[j] is None else ("ok" if median[j] is not None else "skipped")
            )
            stored = self.samples and isinstance(sample_list, list)
            # One dict display: the record's fields in order, built in one step.
            fields = {
                **run,
                "benchmark": name,
                "suite": suite,
                "metric": metric,
                "case": case,
                "params": dict(params),
                "unit": unit,
                "status": status,
                "median": median[j],
                "ci_99_a": ci_a[j],
                "ci_99_b": ci_b[j],
                "q_25": q_25[j],
                "q_75": q_75[j],
                "sample_count": count,
                "spread_pct": spread.get(combos[j]),
                "graph_vs_eager": graph_vs_eager.get(combos[j]),
                "started_at": started_at,
                "duration_s": duration,
                SAMPLES_FIELD: tuple(map(nan_to_none, sample_list)) if stored else None,
            }
            records.append(Record._of_fields(fields))
        return records

    def _current(self, name: str, row: Row) -> bool:
        """asv's rule (Results.get_result_keys): a stored version must match benchmarks.json."""
        bench = self.benchmarks.get(name)
        if bench is None:
            return False
        version = row.get("version")
        return version is None or version == bench.version
