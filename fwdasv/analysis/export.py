"""Writers over `fwdasv.asv.history` records: CSV, JSON lines, Markdown (`fwdasv export`).

Records stream from the result files straight into the output, so a history of
any length exports in constant memory. A file output is written to a temporary
file beside it and renamed at the end: an interrupted export never leaves half
a file where the last good one was.

Non-finite numbers: asv's NaN ("skipped") is already None in the records, so
CSV shows an empty cell and JSON lines `null`. Infinities are real values (a
99% CI from one sample is unbounded): CSV writes `inf` / `-inf` (Python's
`float()` and pandas read them back), JSON lines the `Infinity` / `-Infinity`
tokens asv's own files use (Python's json reads them; strict parsers do not).
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import itertools
import json
import operator
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO

import click

from fwdasv.asv.history import MACHINE_KEYS, SAMPLES_FIELD, History, Record, Report
from fwdasv.core.errors import UserError
from fwdasv.core.files import atomic_output
from fwdasv.core.tables import markdown_cell

FORMATS = ("csv", "jsonl", "markdown")

# The leading record fields that one result file shares (commit, machine, env).
PER_FILE_FIELDS = frozenset({"commit_hash", "commit_date", "machine", *MACHINE_KEYS, "env_name"})

# Record fields that may hold a dict or list (machine keys are whatever machine.json holds).
NESTED_FIELDS = frozenset({"params", SAMPLES_FIELD, *MACHINE_KEYS})

# An automatic progress bar only pays for itself on a long history.
PROGRESS_MIN_FILES = 200

# Markdown is for reading: the columns a person scans, not every field.
MARKDOWN_FIELDS = (
    "commit_hash",
    "commit_date",
    "machine",
    "benchmark",
    "case",
    "status",
    "median",
    "ci_99_a",
    "ci_99_b",
    "sample_count",
    "spread_pct",
    "graph_vs_eager",
)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _tuple_getter(keys: Sequence[str]) -> Callable[[Record], tuple[object, ...]]:
    if len(keys) == 1:
        key = keys[0]
        return lambda record: (getattr(record, key),)
    return operator.attrgetter(*keys) if keys else lambda record: ()


def write_csv(records: Iterable[Record], stream: IO[str], fields: Sequence[str]) -> int:
    """One row per record, `fields` in order; nested values (params, samples) as JSON."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(fields)
    # Formatting is the cost here, not reading (csv.DictWriter's per-row key walk
    # included): the leading per-file fields (commit, machine, env) are formatted
    # once per file, the rest taken with one attrgetter; only nested values go to json.
    lead = 0
    while lead < len(fields) and fields[lead] in PER_FILE_FIELDS:
        lead += 1
    take_lead = _tuple_getter(fields[:lead])
    take_rest = _tuple_getter(fields[lead:])
    nested = [i for i, key in enumerate(fields[lead:]) if key in NESTED_FIELDS]
    params_json: dict[tuple[tuple[str, object], ...], str] = {}  # a few cases, many times
    last_lead: tuple[object, ...] | None = None
    prefix = ""
    write = stream.write
    count = 0
    for record in records:
        values = take_lead(record)
        if values != last_lead:
            last_lead = values
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="").writerow(
                [_json(v) if isinstance(v, (dict, list, tuple)) else v for v in values]
            )
            prefix = buffer.getvalue() + "," if values else ""
        row = list(take_rest(record))
        for i in nested:
            value = row[i]
            if isinstance(value, dict):
                key = tuple(value.items())
                text = params_json.get(key)
                if text is None:
                    text = params_json[key] = _json(value)
                row[i] = text
            elif isinstance(value, (list, tuple)):
                row[i] = _json(value)
        write(prefix)
        writer.writerow(row)
        count += 1
    return count


def write_jsonl(records: Iterable[Record], stream: IO[str], fields: Sequence[str]) -> int:
    """One JSON object per line, keys in `fields` order."""
    count = 0
    write = stream.write
    for record in records:
        write(_json(record.as_row(fields)))
        write("\n")
        count += 1
    return count


def _markdown_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return markdown_cell(_json(value) if isinstance(value, (dict, list, tuple)) else str(value))


def history_order(record: Record) -> tuple[float, str, str, str, str]:
    """A table's row order: the commit's date (oldest first, undated last), then the
    machine, benchmark and case; not the result files' hash order."""
    try:
        stamp = datetime.datetime.fromisoformat(str(record.commit_date).replace("Z", "+00:00"))
        when = stamp.timestamp()
    except ValueError:
        when = float("inf")
    return (when, record.commit_hash, record.machine, record.benchmark, record.case)


def write_markdown(records: Iterable[Record], stream: IO[str], fields: Sequence[str]) -> int:
    """A pipe table of the columns in MARKDOWN_FIELDS (hashes shortened to 8), in the
    history's order (`history_order`): a table to read."""
    columns = [f for f in MARKDOWN_FIELDS if f in fields]
    stream.write("| " + " | ".join(columns) + " |\n")
    stream.write("|" + "|".join("---" for _ in columns) + "|\n")
    count = 0
    for record in sorted(records, key=history_order):
        cells = []
        for key in columns:
            value = getattr(record, key)
            if key == "commit_hash" and isinstance(value, str):
                value = value[:8]
            cells.append(_markdown_cell(value))
        stream.write("| " + " | ".join(cells) + " |\n")
        count += 1
    return count


WRITERS: dict[str, Callable[[Iterable[Record], IO[str], Sequence[str]], int]] = {
    "csv": write_csv,
    "jsonl": write_jsonl,
    "markdown": write_markdown,
}


class EmptySelection(UserError):
    """The results and filters select no record: nothing would be exported."""


def _nothing_selected(history: History, selection: str) -> str:
    where = history.results_dir
    if selection:
        return f"no record in {where} matches {selection}; nothing was written"
    return f"no record in {where} (nothing measured yet?); nothing was written"


def export(
    history: History,
    fmt: str,
    output: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    selection: str = "",
) -> Report:
    """Write every record of `history` as `fmt` to `output` (None or "-": stdout).

    progress None: a bar on stderr when writing a file, stderr is a terminal
    and the history has at least PROGRESS_MIN_FILES result files. A selection of no
    record is an error (`EmptySelection`, naming `selection`: the filters as given),
    before anything is written.
    """
    writer = WRITERS[fmt]
    files = history.files()
    path = None if output is None or str(output) == "-" else output
    if progress is None:
        progress = path is not None and sys.stderr.isatty() and len(files) >= PROGRESS_MIN_FILES

    with contextlib.ExitStack() as stack:
        if progress:
            bar = stack.enter_context(
                click.progressbar(
                    files, label="exporting result files", file=sys.stderr, show_pos=True
                )
            )
            records = history.records(bar)
        else:
            records = history.records(files)
        first = next(iter(records), None)
        if first is None:
            raise EmptySelection(_nothing_selected(history, selection))
        records = itertools.chain([first], records)
        if path is None:
            writer(records, sys.stdout, history.fields)
        else:
            with atomic_output(path, make_parents=False, what="--output") as stream:
                writer(records, stream, history.fields)
    return history.report
