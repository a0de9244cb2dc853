"""asv's Benchmark list with each series' newest value and fwdasv's finding in it.

asv's list page (summarylist.js) shows, per series (benchmark, parameter combination,
graph parameters), a row of `graphs/<params>/summary.json`: `last_value` and the
"Recent change" (`prev_value`, `change_rev`) of asv's own step fit, i.e. the fitted
last level (not the newest measurement) and a change fwdasv may not have found.
`rewrite_summaries` makes each row show the newest measured value (the series'
graph's last point) and the change and commits of the newest finding in the series:
`prev_value` is set so that the page's `last_value / prev_value - 1` is the finding's
percent, and `change_rev` is its [last revision at the old level (None when one
commit), first at the new]. A series with no finding shows no change, so the list
and the Regressions page say the same.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.graph_paths import graph_file_path
from fwdasv.asv.result_files import param_label
from fwdasv.asv.unmeasured import summary_tables
from fwdasv.core.files import write_atomic

SUMMARY = "summary"  # asv's summary file name: no benchmark can be called that


def entry_name(finding: Finding, index: Mapping[str, Any]) -> tuple[str, int | None]:
    """asv's `name(param reprs)` of the finding's series and its parameter index."""
    info = index.get("benchmarks", {}).get(finding.key.benchmark, {})
    params = info.get("params") or []
    if not params:
        return finding.key.benchmark, None
    for position, combo in enumerate(itertools.product(*params)):
        if ", ".join(param_label(v) for v in combo) == finding.key.case:
            return f"{finding.key.benchmark}({', '.join(combo)})", position
    return finding.key.name, None


def newest_point(graph: Path, idx: int | None) -> tuple[int, float] | None:
    """The last (revision, value) with a finite value in one of asv's graph files (points
    `[rev, value]`, or `[rev, [value per parameter combination]]`); None without one."""
    try:
        points = json.loads(graph.read_text())
    except (OSError, ValueError):
        return None
    for point in reversed(points if isinstance(points, list) else []):
        if not isinstance(point, list) or len(point) < 2 or not isinstance(point[0], int):
            continue
        value = point[1]
        if isinstance(value, list):
            value = value[idx] if idx is not None and idx < len(value) else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            return point[0], float(value)
    return None


def rewrite_summaries(
    html_dir: str | Path, found: Sequence[Finding], index: Mapping[str, Any]
) -> int:
    """Each Benchmark list row as the module says; returns how many rows show a finding."""
    html_dir = Path(html_dir)
    revision = {commit: int(rev) for rev, commit in index.get("revision_to_hash", {}).items()}
    newest: dict[tuple[str, str, int | None], Finding] = {}
    for finding in found:
        if finding.after_commit not in revision or finding.before_commit not in revision:
            continue  # not among the published commits (another branch)
        where = graph_file_path(finding.graph_params, SUMMARY) + ".json"
        key = (where, finding.key.benchmark, entry_name(finding, index)[1])
        held = newest.get(key)
        if held is None or revision[finding.after_commit] > revision[held.after_commit]:
            newest[key] = finding
    shown = 0
    for path, rows in summary_tables(html_dir):
        where = path.relative_to(html_dir).as_posix()
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("name"), str):
                continue
            latest = newest_point(path.parent / f"{row['name']}.json", row.get("idx"))
            if latest is not None:
                row["last_rev"], row["last_value"] = latest
            shown_finding = newest.get((where, row["name"], row.get("idx")))
            row["prev_value"], row["change_rev"] = None, None
            if shown_finding is not None and row.get("last_value"):
                single = len(shown_finding.commits) <= 1
                row["prev_value"] = row["last_value"] / (1 + shown_finding.percent / 100)
                row["change_rev"] = [
                    None if single else revision[shown_finding.before_commit],
                    revision[shown_finding.after_commit],
                ]
                shown += 1
        write_atomic(path, json.dumps(rows, separators=(",", ":")))
    return shown
