"""The regressions `asv publish` found, as a list a person or a CI job can act on.

asv detects steps in every published graph (`asv.step_detect`: a weighted L1
piecewise-constant fit, then `detect_regressions` keeps the *upward* steps above
the configured threshold; higher is worse, which suits latency) and writes them
to `html/regressions.json`, but has no command that lists them (asv#450):

    {"regressions": [[entry_name, graph_path, graph_params, param_index,
                      latest, best, [[rev_before | null, rev_after,
                                      value_before, best_value_after], ...]], ...]}

Revisions are positions in asv's commit order, mapped to hashes by
`html/index.json`'s `revision_to_hash`; a null `rev_before` means asv found the
jump to be one commit. Each jump becomes one `Regression` here; its percent is
asv's own: 100 * (after - before) / before.

The gate: a regression is *above threshold* when its percent exceeds the
threshold asv itself used for that series (the largest `regressions_thresholds`
value whose regex `re.match`es `name(params)@branch`, else 5%), or the one given
on the command line. Parsing and judging are pure functions over the two JSON
documents; git (commit subjects) and files are at the edges.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.asv.history import param_label
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.errors import UserError
from fwdasv.core.tables import human_value, markdown_table, percent, text_table

DEFAULT_THRESHOLD = 0.05  # asv's default in regressions._get_threshold

FORMATS = ("table", "json", "markdown")


class RegressionsError(UserError):
    """The published site is missing or unreadable."""


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str | None = None

    def label(self, width: int = 8) -> str:
        return self.hash[:width] + (f" {self.subject}" if self.subject else "")


@dataclass(frozen=True)
class Regression:
    """One upward step of one published series."""

    benchmark: str  # "forward.TinyLM.track_latency"
    entry: str  # asv's "name(param reprs)", what its thresholds match
    params: dict[str, str]  # the benchmark's parameters, readable: {"case": "decode_bs8"}
    graph_params: dict[str, str]  # the graph's machine / env / branch parameters, all of them
    varying: tuple[str, ...]  # graph parameters that tell series apart (asv's graph_params keys)
    graph_path: str
    before_commit: str | None  # last commit at the old level; None: asv found one commit
    after_commit: str  # first commit at the new level
    before: float
    after: float
    latest: float
    best: float
    unit: str | None
    threshold: float  # relative (0.05 = 5%)
    commits: tuple[Commit, ...] = ()  # the commits in the range, oldest first (local repo only)

    @property
    def percent(self) -> float:
        return 100 * (self.after - self.before) / self.before if self.before else float("inf")

    @property
    def above_threshold(self) -> bool:
        return self.percent > 100 * self.threshold

    @property
    def machine(self) -> str | None:
        return self.graph_params.get("machine")

    @property
    def case(self) -> str | None:
        """The fwdasv suites' one parameter (asv's only one, whatever its name), else None."""
        if "case" in self.params:
            return self.params["case"]
        return next(iter(self.params.values())) if len(self.params) == 1 else None

    def commit_range(self) -> tuple[str, str]:
        """(GOOD, BAD) to bisect: the old level's commit (the parent, for one commit), the new."""
        return (self.before_commit or f"{self.after_commit}^", self.after_commit)

    @property
    def params_label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def range_label(self) -> str:
        if self.before_commit is None:
            return self.after_commit[:8]
        return f"{self.before_commit[:8]}..{self.after_commit[:8]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "entry": self.entry,
            "params": dict(self.params),
            "machine": self.machine,
            "graph_params": dict(self.graph_params),
            "graph_path": self.graph_path,
            "before_commit": self.before_commit,
            "after_commit": self.after_commit,
            "single_commit": self.before_commit is None,
            "commits": [dataclasses.asdict(c) for c in self.commits],
            "before": self.before,
            "after": self.after,
            "percent": self.percent if math.isfinite(self.percent) else None,
            "latest": self.latest,
            "best": self.best,
            "unit": self.unit,
            "threshold_pct": 100 * self.threshold,
            "above_threshold": self.above_threshold,
        }


# --- pure logic -----------------------------------------------------------------------


def asv_threshold(thresholds: Mapping[str, Any], entry: str, branch: str | None) -> float:
    """The threshold asv applied to `entry`: the largest matching value, else 5%.

    As asv's `_GraphDataFilter._get_threshold`: each regex is `re.match`ed
    against "name(params)@branch" (no suffix without a branch).
    """
    key = entry + (f"@{branch}" if branch else "")
    matched = [float(value) for regex, value in thresholds.items() if re.match(regex, key)]
    return max(matched) if matched else DEFAULT_THRESHOLD


def graph_file_path(params: Mapping[str, Any], benchmark: str) -> str:
    """asv's `Graph.get_file_path` (the JS frontend's graph_to_path), to find a graph's params."""
    parts = []
    for key, value in params.items():
        if value is None:
            part = f"{key}-null"
        elif value:
            part = f"{key}-{value}"
        else:
            part = key
        parts.append(_sanitize(part))
    parts.sort()
    return "/".join(["graphs", *parts, _sanitize(benchmark)])


def _sanitize(name: str) -> str:
    # asv.util.sanitize_filename, character for character (its class has no backslash).
    name = re.sub('[<>:"/\\^|?*\x00-\x1f]', "_", name)
    if re.fullmatch(r"CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9]", name.upper()):
        name += "_"
    return name


def parse_regressions(
    regressions_json: Mapping[str, Any],
    index_json: Mapping[str, Any],
    thresholds: Mapping[str, Any] | None = None,
) -> list[Regression]:
    """One `Regression` per jump in asv's regressions.json, hashes and parameters resolved.

    `index_json` is html/index.json (revision_to_hash, benchmarks, graph_param_list);
    `thresholds` is the configuration's `regressions_thresholds`.
    """
    revision_to_hash = {str(k): v for k, v in index_json.get("revision_to_hash", {}).items()}
    benchmarks = index_json.get("benchmarks", {})
    graphs = index_json.get("graph_param_list", [])
    out: list[Regression] = []
    for item in regressions_json.get("regressions", []):
        try:
            entry, graph_path, varying, param_index, latest, best, jumps = item
        except (TypeError, ValueError):
            raise RegressionsError(
                f"regressions.json entry {item!r} is not asv 0.6's 7-item list"
            ) from None
        name = entry.split("(", 1)[0]
        info = benchmarks.get(name, {})
        params = _benchmark_params(info, param_index)
        graph_params = _graph_params(graphs, name, graph_path, varying)
        threshold = asv_threshold(thresholds or {}, entry, graph_params.get("branch"))
        for rev_before, rev_after, value_before, value_after in jumps:
            out.append(
                Regression(
                    benchmark=name,
                    entry=entry,
                    params=params,
                    graph_params=graph_params,
                    varying=tuple(varying),
                    graph_path=graph_path,
                    before_commit=None
                    if rev_before is None
                    else _hash(revision_to_hash, rev_before),
                    after_commit=_hash(revision_to_hash, rev_after),
                    before=float(value_before),
                    after=float(value_after),
                    latest=float(latest),
                    best=float(best),
                    unit=info.get("unit"),
                    threshold=threshold,
                )
            )
    return out


def _hash(revision_to_hash: Mapping[str, str], revision: Any) -> str:
    try:
        return revision_to_hash[str(revision)]
    except KeyError:
        raise RegressionsError(
            f"revision {revision} of regressions.json is not in index.json's revision_to_hash "
            "(the site is half written: run `asv publish` again)"
        ) from None


def _benchmark_params(info: Mapping[str, Any], param_index: int | None) -> dict[str, str]:
    values = info.get("params") or []
    if param_index is None or not values:
        return {}
    names = info.get("param_names") or [f"param{i + 1}" for i in range(len(values))]
    combo = next(itertools.islice(itertools.product(*values), param_index, None), None)
    if combo is None:
        return {}
    return {str(k): param_label(v) for k, v in zip(names, combo, strict=False)}


def _graph_params(
    graphs: Sequence[Mapping[str, Any]], name: str, graph_path: str, varying: Mapping[str, Any]
) -> dict[str, str]:
    """All parameters of the graph (machine, python, branch, ...), not only the varying ones."""
    target = graph_path.removesuffix(".json").replace("\\", "/")
    for params in graphs:
        if graph_file_path(params, name) == target:
            return {str(k): "" if v is None else str(v) for k, v in params.items()}
    # An index.json without a matching entry (hand-edited site): the path's key-value parts.
    found: dict[str, str] = {}
    for part in target.split("/")[1:-1]:
        key, _, value = part.partition("-")
        found[key] = value
    found.update({str(k): str(v) for k, v in varying.items()})
    return found


def select(
    regressions: Iterable[Regression],
    bench: Sequence[str] = (),
    threshold_pct: float | None = None,
) -> list[Regression]:
    """Filter by --bench regexes (searched in the name or `name(params)`, as `asv run -b`)
    and replace asv's per-series threshold by `threshold_pct` when given."""
    try:
        patterns = [re.compile(p) for p in bench]
    except re.error as error:
        raise RegressionsError(f"--bench: bad regular expression: {error}") from None
    out = []
    for regression in regressions:
        if patterns and not any(
            p.search(regression.benchmark) or p.search(regression.entry) for p in patterns
        ):
            continue
        if threshold_pct is not None:
            regression = dataclasses.replace(regression, threshold=threshold_pct / 100)
        out.append(regression)
    return out


def exit_status(regressions: Iterable[Regression]) -> int:
    """1 when any regression is above its threshold (for CI), else 0."""
    return 1 if any(r.above_threshold for r in regressions) else 0


# --- formatting -----------------------------------------------------------------------

HEADERS = ("", "benchmark", "params", "machine", "commits", "before", "after", "change")


def _row(regression: Regression, markdown: bool) -> list[str]:
    extra = [
        f"{k}={regression.graph_params.get(k, '')}"
        for k in regression.varying
        if k not in ("machine",)
    ]
    if regression.commits:
        commits = "; ".join(c.label() for c in regression.commits)
        if regression.before_commit is not None and len(regression.commits) > 1:
            commits = f"{regression.range_label} ({len(regression.commits)}): {commits}"
    else:
        commits = regression.range_label
    if markdown:
        mark = ":x:" if regression.above_threshold else ":warning:"
    else:
        mark = "FAIL" if regression.above_threshold else "warn"
    return [
        mark,
        regression.benchmark,
        ", ".join(filter(None, [regression.params_label, *extra])),
        regression.machine or "",
        commits,
        human_value(regression.before, regression.unit),
        human_value(regression.after, regression.unit),
        percent(regression.percent),
    ]


def format_table(regressions: Sequence[Regression]) -> str:
    if not regressions:
        return "No regressions in the published results."
    above = sum(r.above_threshold for r in regressions)
    lines = [text_table(HEADERS, [_row(r, markdown=False) for r in regressions]), ""]
    lines.append(
        f"{len(regressions)} regression{'s' if len(regressions) != 1 else ''}, "
        f"{above} above threshold (FAIL: change > threshold; warn: below it)"
    )
    return "\n".join(lines)


def format_markdown(regressions: Sequence[Regression]) -> str:
    if not regressions:
        return "### Performance regressions\n\nNo regressions in the published results.\n"
    above = sum(r.above_threshold for r in regressions)
    title = f"### Performance regressions: {len(regressions)} found, {above} above threshold\n\n"
    rows = [_row(r, markdown=True) for r in regressions]
    for row, regression in zip(rows, regressions, strict=True):
        row[1] = f"`{regression.benchmark}`"
        row[7] = f"**{row[7]}**" if regression.above_threshold else row[7]
    footer = (
        "\n\n:x: above the regression threshold, :warning: below it. "
        "Values are asv's published medians (before: the old level; after: the best "
        "value after the step).\n"
    )
    return title + markdown_table(HEADERS, rows) + footer


def format_json(regressions: Sequence[Regression]) -> str:
    document = {
        "regressions": [r.to_json() for r in regressions],
        "count": len(regressions),
        "above_threshold": sum(r.above_threshold for r in regressions),
    }
    return json.dumps(document, indent=2, allow_nan=False, default=str)


def format_regressions(regressions: Sequence[Regression], fmt: str) -> str:
    if fmt == "json":
        return format_json(regressions)
    if fmt == "markdown":
        return format_markdown(regressions)
    if fmt == "table":
        return format_table(regressions)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


# --- I/O edges ------------------------------------------------------------------------


def read_site(html_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """html/regressions.json and html/index.json, or one error saying to publish first."""
    if not html_dir.is_dir():
        raise RegressionsError(
            f"{html_dir}: no published site: run `asv publish` first "
            "(fwdasv reads the regressions asv found from html/regressions.json)"
        )
    documents = []
    for name in ("regressions.json", "index.json"):
        path = html_dir / name
        try:
            documents.append(json.loads(path.read_text()))
        except FileNotFoundError:
            raise RegressionsError(
                f"{path} does not exist: run `asv publish` first "
                "(fwdasv reads the regressions asv found from the published site)"
            ) from None
        except (OSError, ValueError) as error:
            raise RegressionsError(
                f"{path} is not readable JSON ({error}): run `asv publish` again"
            ) from None
    return documents[0], documents[1]


def attach_commits(regressions: Sequence[Regression], project: AsvProject) -> list[Regression]:
    """Add the range's commits with their subjects when the repository is on disk."""
    if project.local_repo is None:
        return list(regressions)
    cache: dict[tuple[str | None, str], tuple[Commit, ...]] = {}
    out = []
    for regression in regressions:
        key = (regression.before_commit, regression.after_commit)
        if key not in cache:
            cache[key] = _range_commits(project, *key)
        out.append(dataclasses.replace(regression, commits=cache[key]))
    return out


def _range_commits(project: AsvProject, before: str | None, after: str) -> tuple[Commit, ...]:
    spec = [f"{before}..{after}"] if before else ["-1", after]
    try:
        listed = project.git("log", "--first-parent", "--reverse", "--format=%H%x00%s", *spec)
    except AsvError:
        return (Commit(after),)  # the commits are gone from the clone: hashes only
    commits = []
    for line in listed.splitlines():
        commit_hash, _, subject = line.partition("\x00")
        commits.append(Commit(commit_hash, subject))
    return tuple(commits) or (Commit(after),)


def load_regressions(
    project: AsvProject,
    *,
    bench: Sequence[str] = (),
    threshold_pct: float | None = None,
    subjects: bool = True,
) -> list[Regression]:
    """The regressions of `project`'s published site, filtered and with commit subjects."""
    regressions_json, index_json = read_site(project.html_dir)
    found = parse_regressions(
        regressions_json, index_json, project.raw.get("regressions_thresholds") or {}
    )
    found = select(found, bench, threshold_pct)
    return attach_commits(found, project) if subjects else found
