"""The bench processes confirm and bisect kept, read as a commit's results for `compare`.

bisect measures the commits inside a range that `asv run --steps` never stored, and
confirm re-measures a finding's pair; each keeps its processes (`processes.jsonl` under
`.fwdasv-confirm/` and `.fwdasv-bisect/`, `fwdasv.analysis.confirm.processes`), one
line a process: the commit and each followed series' process median. `kept_records`
gives a commit without stored results a `Record` per series those processes measured,
shaped as the series' stored records (machine, environment, unit: from one of them)
with the process medians as its samples, so `compare PARENT CULPRIT` works right after
bisect. They are never written into asv's results (a re-measure from another window of
load would move the history's medians); compare marks them as re-measures.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fwdasv.analysis.confirm.processes import BISECT_DIR, CONFIRM_DIR, PROCESSES_FILE
from fwdasv.asv.history import History, Record
from fwdasv.asv.project import AsvProject
from fwdasv.core.files import read_regular


@dataclass(frozen=True)
class Kept:
    """One commit's kept process medians per series name (`SeriesRef.name`), and where."""

    commit: str  # the full hash, as the processes name it ("" when none was kept)
    values: dict[str, list[float]]
    files: tuple[Path, ...]


def kept_processes(project: AsvProject, commit: str, machine: str | None = None) -> Kept:
    """Every kept process of `commit` (a full hash or a prefix), by series name; with
    `machine`, none a line says another machine measured."""
    root = project.config_path.parent
    values: dict[str, list[float]] = {}
    files = []
    full = ""
    for kind in (CONFIRM_DIR, BISECT_DIR):
        for path in sorted((root / kind).glob(f"*/{PROCESSES_FILE}")):
            try:
                lines = read_regular(path).decode("utf-8", "replace").splitlines()
            except OSError:
                continue
            used = False
            for line in lines:
                try:
                    raw = json.loads(line)
                    if not str(raw["commit"]).startswith(commit.lower()):
                        continue
                    if machine is not None and raw.get("machine") not in (None, machine):
                        continue
                    measured = {str(k): float(v) for k, v in raw["values"].items()}
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a line cut short
                for name, value in measured.items():
                    values.setdefault(name, []).append(value)
                full, used = str(raw["commit"]), True
            if used:
                files.append(path)
    return Kept(full, values, tuple(files))


def _name(record: Record) -> str:
    return f"{record.benchmark}({record.case})" if record.case else record.benchmark


def kept_records(kept: Kept, templates: Iterable[Record]) -> list[Record]:
    """A record per kept series with a stored record among `templates` to take its shape
    from: the process medians as samples, their median as the median."""
    out = []
    seen: set[str] = set()
    for template in templates:
        name = _name(template)
        values = kept.values.get(name)
        if not values or name in seen:
            continue
        seen.add(name)
        out.append(
            replace(
                template,
                commit_hash=kept.commit,
                status="ok",
                median=statistics.median(values),
                ci_99_a=None,
                ci_99_b=None,
                q_25=None,
                q_75=None,
                sample_count=len(values),
                spread_pct=None,
                graph_vs_eager=None,
                started_at=None,
                duration_s=None,
                samples=tuple(values),
            )
        )
    return out


def series_templates(
    project: AsvProject, names: Sequence[str], machine: str | None, bench: Sequence[str]
) -> list[Record]:
    """One stored record of each named series (any commit), read until all are found."""
    history = History(project.results_dir, machines=[machine] if machine else (), bench=bench)
    wanted, found = set(names), {}
    for record in history.records():
        name = _name(record)
        if name in wanted and name not in found:
            found[name] = record
            if len(found) == len(wanted):
                break
    return list(found.values())
