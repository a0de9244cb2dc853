"""asv's JSON files under results/, parsed and checked: a result file (v2) and benchmarks.json.

asv keeps one result file per (machine, commit, environment): each benchmark's
row zips with `result_columns`, and a parameterized row holds one value per
`itertools.product(*params)` combination (`Row` undoes that packing). Python's
json reads asv's NaN / Infinity tokens as floats. Nothing here uses asv's own
(unstable, asv#413) API. HistoryError: the tree cannot be read at all;
ResultFileError: one file cannot, and a reader goes on without it.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.core.errors import UserError
from fwdasv.core.files import NotRegularFileError, read_regular

RESULTS_API_VERSION = 2  # asv.results.Results.api_version in asv 0.6.6


class HistoryError(UserError):
    """The results tree (or a filter on it) cannot be read at all."""


class ResultFileError(Exception):
    """One result file is unreadable; the export goes on without it (see `Report.problems`)."""


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


def load_json(path: Path) -> object:
    """The JSON at `path`; OSError (NotRegularFileError: a FIFO, a directory, a dangling
    link, never waited on) or ValueError when it cannot be read."""
    # Python's json reads asv's NaN / Infinity / -Infinity tokens as floats.
    return json.loads(read_regular(path))


def load_benchmarks(results_dir: Path) -> dict[str, BenchmarkInfo]:
    """benchmarks.json of `results_dir`, by benchmark name; HistoryError when it is missing or
    unreadable (asv writes it when it discovers the suite)."""
    path = results_dir / "benchmarks.json"
    try:
        data = load_json(path)
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


@dataclass(frozen=True)
class ResultHeader:
    """The commit and environment a result file says it holds."""

    commit_hash: str | None
    env_name: str | None


def result_header(path: str | os.PathLike[str]) -> ResultHeader:
    """What a result file says it holds. Raises ResultFileError when it is not readable JSON."""
    try:
        data = load_json(Path(path))
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
class ResultJson:
    """A results file that passed the format checks: its top-level fields."""

    commit_hash: str
    columns: list[object]
    results: dict[str, object]
    date: object
    params: Mapping[str, object]  # the machine file as it was at run time
    env_name: str | None


def parse_result_file(path: Path) -> ResultJson:
    """The file's fields, or ResultFileError saying why it is not asv's v2 results JSON."""
    try:
        data = load_json(path)
    except NotRegularFileError as error:
        raise ResultFileError(f"{error}; asv writes a result file here") from None
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
    return ResultJson(
        commit_hash=commit_hash,
        columns=columns,
        results=results,
        date=data.get("date"),
        params=params if isinstance(params, dict) else {},
        env_name=env_name,
    )


def file_rows(parsed: ResultJson) -> dict[str, Row]:
    """Each benchmark's row, zipped with the file's columns."""
    column = {str(name): i for i, name in enumerate(parsed.columns)}
    try:
        return {name: Row(row, column, name) for name, row in parsed.results.items()}
    except (TypeError, ValueError) as error:
        raise ResultFileError(str(error)) from None


class Row:
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
