"""Keep series no timer measured off the published site.

A suite's companion series exist on every machine, but some are measured by
one timer only: the graph-vs-eager error needs a CUDA graph, so the host timer
(CPU) records NaN, which asv stores as "skipped". `asv publish` still lists
such a benchmark, and the summary grid shows an empty tile that looks broken.
After publishing, every benchmark whose graphs hold no value at all (asv
writes `[]` for a graph with nothing measured) is removed from the site's
index and its graph files are deleted, and its rows are taken out of every
`graphs/**/summary.json` (the Benchmark list page's tables: a row whose
benchmark is not in the index makes that page throw and stay at "Loading...";
`summary_tables` reads those tables, for `fwdasv.analysis.publish.listing` too).
A benchmark measured on any machine, at any commit, stays, as do its empty
graphs on other machines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fwdasv.core.files import write_atomic


def _has_value(point: Any) -> bool:
    """A graph point `[revision, value]`: value a number, or a list (params) with one."""
    if not isinstance(point, list) or len(point) < 2:
        return False
    values = point[1] if isinstance(point[1], list) else [point[1]]
    return any(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def graph_files(html_dir: Path, benchmark: str) -> list[Path]:
    """Every graph asv wrote for `benchmark` (one per machine/params/branch, and the summary)."""
    return sorted((html_dir / "graphs").rglob(f"{benchmark}.json"))


def measured(files: list[Path]) -> bool:
    for path in files:
        try:
            points = json.loads(path.read_text())
        except (OSError, ValueError):
            return True  # unreadable: not ours to judge, keep it
        if isinstance(points, list) and any(_has_value(p) for p in points):
            return True
    return False


def drop_unmeasured(html_dir: str | Path) -> list[str]:
    """Remove benchmarks without a single measured value from a published site.

    Returns their names. Idempotent; a site without index.json is left alone.
    """
    html_dir = Path(html_dir)
    index_path = html_dir / "index.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        return []
    benchmarks = index.get("benchmarks")
    if not isinstance(benchmarks, dict):
        return []
    dropped = []
    for name in sorted(benchmarks):
        files = graph_files(html_dir, name)
        if files and not measured(files):
            dropped.append(name)
            for path in files:
                path.unlink()
    if dropped:
        index["benchmarks"] = {k: v for k, v in benchmarks.items() if k not in dropped}
        # asv writes index.json compact; so do we.
        write_atomic(index_path, json.dumps(index, separators=(",", ":")))
    _drop_summary_rows(html_dir, set(index["benchmarks"]))
    return dropped


def summary_tables(html_dir: Path) -> Iterator[tuple[Path, list[Any]]]:
    """Each `graphs/**/summary.json` of the Benchmark list with its rows; a file that cannot
    be read, or holds no list, is passed over (not ours to judge)."""
    for path in sorted((html_dir / "graphs").rglob("summary.json")):
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rows, list):
            yield path, rows


def _drop_summary_rows(html_dir: Path, kept: set[str]) -> None:
    """Each `summary.json` of the Benchmark list without rows of benchmarks not in the index."""
    for path, rows in summary_tables(html_dir):
        left = [r for r in rows if not isinstance(r, dict) or r.get("name") in kept]
        if len(left) != len(rows):
            write_atomic(path, json.dumps(left, separators=(",", ":")))
