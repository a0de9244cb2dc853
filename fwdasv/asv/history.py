"""asv's results/ tree read back as flat records, one per (commit, machine, env, benchmark, case).

asv keeps one JSON file per (machine, commit, environment), in its v2 format:
each benchmark's row zips with `result_columns`, and a parameterized row holds
one value per `itertools.product(*params)` combination. This module undoes
that packing so a spreadsheet, pandas or a CI script can read the history
without asv's internal (and unstable, asv#413) API. Files are read one at a
time (a generator), so a history of 10,000 commits never sits in memory.

asv's own rules are kept: a result whose benchmark `version` differs from
`benchmarks.json` is stale and dropped, as `asv publish` drops it; a benchmark
no longer in `benchmarks.json` is dropped too. Both are counted in `Report`.

Validation fields come from the companion benchmarks of the suite: the value of
`<suite>.track_spread_pct` and `<suite>.track_graph_vs_eager` for the same
commit, machine, environment and case is joined onto every record of `<suite>`.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import math
import os
import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fwdasv.core.errors import UserError
from fwdasv.launch import run_captured

RESULTS_API_VERSION = 2  # asv.results.Results.api_version in asv 0.6.6

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

GIT_TIMEOUT_S = 60

# Where bisect keeps its own measurements (an asv results dir of their own, beside the
# history's): appended to the stored results, a re-measure from another window of load
# would move their medians and make a finding, and publish would plot it.
REMEASURES_DIR = ".fwdasv-remeasures"


def remeasure_results_dir(results_dir: str | os.PathLike[str]) -> Path:
    """The directory of re-measures that belongs to `results_dir` (never read as history)."""
    return Path(results_dir).parent / REMEASURES_DIR


class HistoryError(UserError):
    """The results tree (or a filter on it) cannot be read at all."""


class ResultFileError(Exception):
    """One result file is unreadable; the export goes on without it (see `Report.problems`)."""


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


@dataclass(frozen=True)
class ResultFile:
    """`results/<machine>/<sha8>-<env>.json`."""

    path: Path
    machine: str

    @property
    def sha8(self) -> str:
        return self.path.name.split("-", 1)[0]


def iso_utc(ms: object, timespec: str = "seconds") -> str | None:
    """asv's JavaScript timestamps (ms since the epoch) as ISO 8601 UTC, `...Z`; None for
    anything else."""
    if not isinstance(ms, (int, float)) or not math.isfinite(ms):
        return None
    when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return when.isoformat(timespec=timespec).replace("+00:00", "Z")


def param_label(value_repr: str) -> str:
    """asv stores parameter values as Python reprs; show them as asv does (`'a'` -> `a`)."""
    for pattern in (r"^'(.+)'$", r"^u'(.+)'$", r"^<class '(.+)'>$"):
        match = re.match(pattern, value_repr)
        if match and match.group(1).strip():
            return match.group(1)
    return value_repr


def _finite_or_none(value: Any) -> Any:
    """NaN means "skipped" to asv and has no place in CSV or JSON: None. Infinities stay.
    (Any: a value of asv's JSON goes through unchanged unless it is NaN.)"""
    if isinstance(value, float) and value != value:
        return None
    return value


def _clean(values: list[Any]) -> list[Any]:
    """`_finite_or_none` over a list (NaN is the only value unequal to itself)."""
    return [v if v == v else None for v in values]


# --- filters ------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitFilter:
    """A set of commits: full hashes and/or hash prefixes (asv's file names carry sha[:8])."""

    prefixes: frozenset[str]

    def __post_init__(self) -> None:
        prefixes = frozenset(p.lower() for p in self.prefixes)
        object.__setattr__(self, "prefixes", prefixes)
        # Sets for the long ones: a resolved range can hold thousands of full hashes.
        object.__setattr__(self, "_full", frozenset(p for p in prefixes if len(p) == 40))
        object.__setattr__(self, "_partial", tuple(p for p in prefixes if len(p) < 40))
        object.__setattr__(self, "_sha8", frozenset(p[:8] for p in prefixes if len(p) >= 8))
        object.__setattr__(self, "_short", tuple(p for p in prefixes if len(p) < 8))

    def matches(self, commit_hash: str) -> bool:
        commit_hash = commit_hash.lower()
        return commit_hash in self._full or commit_hash.startswith(self._partial)

    def may_match_file(self, sha8: str) -> bool:
        """Cheap pre-check on a result file's name, before the file is read."""
        sha8 = sha8.lower()
        return sha8 in self._sha8 or sha8.startswith(self._short)


_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


def parse_commit_filter(specs: Iterable[str], repo: str | os.PathLike[str] | None) -> CommitFilter:
    """`A..B` (or `A...B`) ranges via `git rev-list` in `repo`; anything else is a hash prefix.

    Several specs (or a comma-separated list) add up. A range takes every commit
    git lists, merges' other parents included, unlike asv's `--first-parent`
    runs: an export should not hide results asv did store.
    """
    prefixes: set[str] = set()
    for spec in specs:
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            if ".." in part:
                prefixes.update(_rev_list(part, repo))
            elif _HEX.match(part):
                prefixes.add(part.lower())
            else:
                raise HistoryError(
                    f"commit {part!r} is neither a hash prefix (4-40 hex digits) nor a git "
                    "range A..B; give hashes, or a range with --repo pointing at the project's clone"
                )
    return CommitFilter(frozenset(prefixes))


def _rev_list(range_spec: str, repo: str | os.PathLike[str] | None) -> list[str]:
    if repo is None:
        raise HistoryError(
            f"the commit range {range_spec!r} needs the project's git clone to resolve it: "
            "add --repo DIR (asv.conf.json's 'repo')"
        )
    repo = Path(repo)
    if not repo.is_dir():
        raise HistoryError(f"--repo {repo}: no such directory (give the project's git clone)")
    try:
        done = run_captured(
            ["git", "-C", str(repo), "rev-list", range_spec, "--"], timeout_s=GIT_TIMEOUT_S
        )
    except FileNotFoundError:
        raise HistoryError("git is not installed; give commit hashes instead of a range") from None
    except subprocess.TimeoutExpired:
        raise HistoryError(
            f"git rev-list {range_spec} in {repo} took over {GIT_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"
        raise HistoryError(
            f"git rev-list {range_spec!r} failed in {repo}: {reason} "
            "(check both ends exist there: git fetch, or fix the names)"
        )
    return [line.strip().lower() for line in done.stdout.splitlines() if line.strip()]


# --- the tree -----------------------------------------------------------------------

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
        (benchmarks_speed/export_speed.py)."""
        record = object.__new__(cls)
        object.__setattr__(record, "__dict__", fields)
        return record


_RECORD_FIELDS = (*FIELDS, SAMPLES_FIELD)
assert tuple(f.name for f in dataclasses.fields(Record)) == _RECORD_FIELDS, "FIELDS != Record"


@dataclass(frozen=True)
class BenchmarkInfo:
    """What benchmarks.json says of one benchmark (as far as the records need it)."""

    params: tuple[tuple[str, ...], ...]  # parameter values, as Python reprs
    param_names: tuple[str, ...]
    unit: str | None
    version: object  # compared with a result's own, never read

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> BenchmarkInfo:
        params = raw.get("params")
        names = raw.get("param_names")
        unit = raw.get("unit")
        return cls(
            params=tuple(tuple(str(v) for v in p) for p in params if isinstance(p, list))
            if isinstance(params, list)
            else (),
            param_names=tuple(str(n) for n in names) if isinstance(names, list) else (),
            unit=unit if isinstance(unit, str) else None,
            version=raw.get("version"),
        )


def _load_json(path: Path) -> object:
    # Python's json reads asv's NaN / Infinity / -Infinity tokens as floats.
    with open(path, "rb") as f:
        return json.loads(f.read())


@dataclass(frozen=True)
class ResultHeader:
    """The commit and environment a result file says it holds."""

    commit_hash: str | None
    env_name: str | None


def result_header(path: str | os.PathLike[str]) -> ResultHeader:
    """What a result file says it holds. Raises ResultFileError when it is not readable JSON."""
    try:
        data = _load_json(Path(path))
    except (OSError, ValueError) as error:
        raise ResultFileError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise ResultFileError(f"{path}: not an asv result file")
    commit_hash, env_name = data.get("commit_hash"), data.get("env_name")
    return ResultHeader(
        commit_hash if isinstance(commit_hash, str) else None,
        env_name if isinstance(env_name, str) else None,
    )


@dataclass(frozen=True)
class _ResultJson:
    """A results file that passed the format checks: its top-level fields."""

    commit_hash: str
    columns: list[object]
    results: dict[str, object]
    date: object
    params: Mapping[str, object]  # the machine file as it was at run time
    env_name: str | None


def _parse_result_file(path: Path) -> _ResultJson:
    """The file's fields, or ResultFileError saying why it is not asv's v2 results JSON."""
    try:
        data = _load_json(path)
    except (OSError, ValueError) as error:
        raise ResultFileError(f"not readable JSON ({error}); truncated or corrupt") from None
    if not isinstance(data, dict):
        raise ResultFileError("not an asv results file (expected a JSON object)")
    version = data.get("version")
    if version != RESULTS_API_VERSION:
        raise ResultFileError(
            f"results format version {version!r}, expected {RESULTS_API_VERSION} "
            "(asv 0.6; run `asv update` for older files)"
        )
    try:
        commit_hash = data["commit_hash"]
        columns = data["result_columns"]
        results = data["results"]
    except KeyError as error:
        raise ResultFileError(f"missing key {error}") from None
    if not isinstance(results, dict) or not isinstance(columns, list):
        raise ResultFileError("'results' must be an object and 'result_columns' a list")
    if not isinstance(commit_hash, str):
        raise ResultFileError(f"'commit_hash' is {commit_hash!r}, expected a string")
    env_name = data.get("env_name")
    if env_name is not None and not isinstance(env_name, str):
        raise ResultFileError(f"'env_name' is {env_name!r}, expected a string")
    params = data.get("params")
    return _ResultJson(
        commit_hash=commit_hash,
        columns=columns,
        results=results,
        date=data.get("date"),
        params=params if isinstance(params, dict) else {},
        env_name=env_name,
    )


def _rows(parsed: _ResultJson) -> dict[str, _Row]:
    """Each benchmark's row, zipped with the file's columns."""
    column = {str(name): i for i, name in enumerate(parsed.columns)}
    try:
        return {name: _Row(row, column, name) for name, row in parsed.results.items()}
    except (TypeError, ValueError) as error:
        raise ResultFileError(str(error)) from None


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
        if not self.results_dir.is_dir():
            raise HistoryError(
                f"{self.results_dir}: no such results directory (give asv's results_dir, "
                "where `asv run` writes <machine>/machine.json and benchmarks.json)"
            )
        self.benchmarks = self._load_benchmarks()
        self.known_machines = sorted(
            entry.name
            for entry in os.scandir(self.results_dir)
            if entry.is_dir() and not entry.name.startswith(".")
        )
        unknown = [m for m in machines if m not in self.known_machines]
        if unknown:
            known = ", ".join(self.known_machines) or "none"
            raise HistoryError(
                f"unknown machine {', '.join(map(repr, unknown))} in {self.results_dir} "
                f"(known: {known})"
            )
        self.machines = list(dict.fromkeys(machines)) or self.known_machines
        patterns = [bench] if isinstance(bench, str) else list(bench or ())
        try:
            self.bench = [re.compile(p) for p in patterns]
        except re.error as error:
            raise HistoryError(f"--bench: bad regular expression: {error}") from None
        self.commits = commits
        self.samples = samples
        self.report = Report()
        self.machine_info: dict[str, Mapping[str, object]] = {}
        # (benchmark, params) -> per combination (case label, params dict, kept by --bench)
        self._combos: dict[tuple[str, object], list[tuple[str, dict[str, str], bool]]] = {}

    @property
    def fields(self) -> tuple[str, ...]:
        return (*FIELDS, SAMPLES_FIELD) if self.samples else FIELDS

    def _load_benchmarks(self) -> dict[str, BenchmarkInfo]:
        path = self.results_dir / "benchmarks.json"
        try:
            data = _load_json(path)
        except FileNotFoundError:
            raise HistoryError(
                f"{path}: missing (asv writes it when it discovers the suite: "
                "`asv run --bench just-discover`)"
            ) from None
        except (OSError, ValueError) as error:
            raise HistoryError(
                f"{path}: not readable JSON ({error}); regenerate it with "
                "`asv run --bench just-discover`"
            ) from None
        if not isinstance(data, dict):
            raise HistoryError(f"{path}: expected an object of benchmarks")
        return {
            k: BenchmarkInfo.from_json(v)
            for k, v in data.items()
            if k != "version" and isinstance(v, dict)
        }

    def _machine(self, machine: str) -> Mapping[str, object]:
        info = self.machine_info.get(machine)
        if info is None:
            path = self.results_dir / machine / "machine.json"
            try:
                loaded = _load_json(path)
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
            names = sorted(
                entry.name
                for entry in os.scandir(folder)
                if entry.name.endswith(".json")
                and entry.is_file()
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
        parsed = _parse_result_file(file.path)
        if self.commits is not None and not self.commits.matches(parsed.commit_hash):
            return None
        run = self._run_fields(file, parsed)
        rows = _rows(parsed)
        companions = self._companions(rows)
        records: list[Record] = []
        for name, row in rows.items():
            if self._kept(name, row):
                records.extend(self._row_records(name, row, run, companions))
        return records

    def _run_fields(self, file: ResultFile, parsed: _ResultJson) -> dict[str, object]:
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

    def _companions(self, rows: Mapping[str, _Row]) -> _Companions:
        """The companion benchmarks' values (`COMPANIONS`) of this file, by suite."""
        companions: _Companions = {}
        for name, row in rows.items():
            suite, _, metric = name.rpartition(".")
            for record_field, method in COMPANIONS.items():
                if metric == method and self._current(name, row):
                    values = (_finite_or_none(v) for v in row.values("result"))
                    companions[(suite, record_field)] = dict(zip(row.combos(), values, strict=True))
        return companions

    def _kept(self, name: str, row: _Row) -> bool:
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
        self, name: str, row: _Row, run: dict[str, object], companions: _Companions
    ) -> list[Record]:
        """One record per parameter combination of one benchmark's row that --bench keeps."""
        suite, _, metric = name.rpartition(".")
        unit = self.benchmarks[name].unit
        started_at = iso_utc(row.get("started_at"), "milliseconds")
        duration = _finite_or_none(row.get("duration"))
        result = row.values("result")
        median = _clean(result)
        ci_a = _clean(row.values("stats_ci_99_a"))
        ci_b = _clean(row.values("stats_ci_99_b"))
        q_25 = _clean(row.values("stats_q_25"))
        q_75 = _clean(row.values("stats_q_75"))
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
                SAMPLES_FIELD: tuple(_clean(sample_list)) if stored else None,
            }
            records.append(Record._of_fields(fields))
        return records

    def _current(self, name: str, row: _Row) -> bool:
        """asv's rule (Results.get_result_keys): a stored version must match benchmarks.json."""
        bench = self.benchmarks.get(name)
        if bench is None:
            return False
        version = row.get("version")
        return version is None or version == bench.version


class _Row:
    """One benchmark's row of a results file, zipped with `result_columns`."""

    __slots__ = ("_column", "_combos", "_row", "name", "params", "size")

    def __init__(self, row: Any, column: dict[str, int], name: str):
        if not isinstance(row, list):
            raise ValueError(f"benchmark {name!r}: row is {type(row).__name__}, expected a list")
        self._row = row
        self._column = column
        self.name = name
        params = self.get("params") or []
        if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
            raise ValueError(f"benchmark {name!r}: 'params' is not a list of lists")
        self.params: list[list[str]] = params
        self.size = math.prod(len(p) for p in params) if params else 1
        self._combos: list[tuple[str, ...]] | None = None

    def get(self, key: str) -> Any:
        i = self._column.get(key)
        # asv drops trailing nulls from a row.
        return self._row[i] if i is not None and i < len(self._row) else None

    def values(self, key: str) -> list[Any]:
        """The column's per-combination list, None-filled where asv stored null."""
        value = self.get(key)
        if value is None:
            return [None] * self.size
        if not isinstance(value, list):
            value = [value]
        if len(value) != self.size:
            raise ResultFileError(
                f"benchmark {self.name!r}: {key!r} has {len(value)} values for "
                f"{self.size} parameter combinations"
            )
        return value

    def combos(self) -> list[tuple[str, ...]]:
        if self._combos is None:
            self._combos = list(itertools.product(*self.params)) if self.params else [()]
        return self._combos
