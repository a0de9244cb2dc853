"""Which kernels (GPU) or ops (CPU) made a forward slower: the diff of two kernel summaries.

The inputs are two `kernels.json` files of one case (`fwdasv.core.kernels`),
GOOD (before) and BAD (after), from fwdasv's engine or from vLLM's
`--profile-dir`. Rows are matched by name; a name present on one side only
counts as 0 us and 0 calls on the other and is marked `new` or `vanished`.

Definitions (all per forward, in us):

- delta_k = after_k - before_k for each row k;
- total_delta_us = sum_k delta_k, i.e. the change of the summed kernel (op)
  time. On a GPU this is busy time; the span (`span_before_us`,
  `span_after_us`) is reported next to it. On a CPU it leaves out the Python
  between ops, which only the span shows. total_delta_pct = 100 *
  total_delta_us / sum_k before_k, the relative change;
- share_pct_k = 100 * delta_k / total_delta_us, signed: a row that moved
  against the total has a negative share, and the shares sum to 100;
- explained_top5_pct: with s the sign of the total, the top 5 are the (at
  most) five rows with the largest s * delta_k > 0, i.e. the biggest
  contributors in the direction of the change (the biggest slowdowns when BAD
  is slower), and explained_top5_pct = 100 * sum_top5 delta_k / total_delta_us.
  It exceeds 100 when other rows moved the other way (the top five add more
  than the whole change); it is not capped, since capping would hide that.
  With no change (total 0) every share and explained_top5_pct are 0. Read it
  with total_delta_pct: over a total near 0 (noise) the shares are large and
  mean little.

Rows are listed by |delta| descending, as vLLM's own diff lists them, so a big
offsetting change (the fused kernel that vanished) shows next to what replaced
it; `top5` names the contributors behind explained_top5_pct, and the table and
Markdown formats name them in a line of their own above the rows.

Pure functions first, then the loader edge, then formatting (table, JSON,
Markdown), as `compare.py` does.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import ExplainRecord
from fwdasv.asv.project import AsvProject
from fwdasv.core.kernels import (
    KernelRow,
    KernelSummary,
    ProfileError,
    load_summary,
    profile_paths,
    safe_case_name,
)
from fwdasv.core.tables import markdown_cell, markdown_table, text_table

__all__ = [
    "FORMATS",
    "TOP_EXPLAINED",
    "KernelDelta",
    "KernelDiff",
    "ProfileError",
    "diff_files",
    "diff_summaries",
    "format_diff",
    "load_summary",
]

FORMATS = ("table", "json", "markdown")
TOP_EXPLAINED = 5
NEW, VANISHED, BOTH = "new", "vanished", "both"


@dataclass(frozen=True)
class KernelDelta:
    """One kernel (op) at GOOD and at BAD."""

    name: str
    before_us: float
    after_us: float
    calls_before: int
    calls_after: int
    share_pct: float
    status: str  # "new", "vanished" or "both"
    example: str = ""

    @property
    def delta_us(self) -> float:
        return round(self.after_us - self.before_us, 2)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "before_us": self.before_us,
            "after_us": self.after_us,
            "delta_us": self.delta_us,
            "share_pct": self.share_pct,
            "calls_before": self.calls_before,
            "calls_after": self.calls_after,
            "status": self.status,
            "example": self.example,
        }


@dataclass(frozen=True)
class KernelDiff:
    """GOOD -> BAD for one case: the rows by |delta| and what the top contributors explain."""

    kernels: tuple[KernelDelta, ...]
    total_delta_us: float
    total_delta_pct: float
    explained_top5_pct: float
    top5: tuple[str, ...]
    unit: str  # "kernel" (GPU) or "op" (CPU)
    span_before_us: float
    span_after_us: float
    busy_before_us: float
    busy_after_us: float
    activities_before: int
    activities_after: int
    before_source: str = ""
    after_source: str = ""

    @property
    def slower(self) -> bool:
        """BAD spends more kernel (op) time per forward than GOOD."""
        return self.total_delta_us > 0

    @property
    def verdict(self) -> Status:
        """GOOD -> BAD as compare words it (the COMPARISON gate fails on worse)."""
        if self.slower:
            return Status.WORSE
        return Status.IMPROVED if self.total_delta_us < 0 else Status.UNCHANGED

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "kernels": [row.to_json() for row in self.kernels],
            "total_delta_us": self.total_delta_us,
            "total_delta_pct": self.total_delta_pct,
            "explained_top5_pct": self.explained_top5_pct,
            "top5": list(self.top5),
            "slower": self.slower,
            "span_before_us": self.span_before_us,
            "span_after_us": self.span_after_us,
            "busy_before_us": self.busy_before_us,
            "busy_after_us": self.busy_after_us,
            "activities_before": self.activities_before,
            "activities_after": self.activities_after,
            "before": self.before_source,
            "after": self.after_source,
        }


def _status(before: KernelRow | None, after: KernelRow | None) -> str:
    if before is None:
        return NEW
    return VANISHED if after is None else BOTH


def top_contributors(
    deltas: dict[str, float], total: float, count: int = TOP_EXPLAINED
) -> tuple[tuple[str, ...], float]:
    """The `count` largest contributors in the direction of `total`, and the % they explain."""
    if total == 0:
        return (), 0.0
    sign = math.copysign(1.0, total)
    ranked = sorted(
        (name for name, delta in deltas.items() if sign * delta > 0),
        key=lambda name: (-sign * deltas[name], name),
    )[:count]
    explained = 100 * sum(deltas[name] for name in ranked) / total
    return tuple(ranked), round(explained, 2)


def diff_summaries(good: KernelSummary, bad: KernelSummary) -> KernelDiff:
    """Match GOOD's and BAD's rows by name; see the module docstring for the definitions."""
    if good.is_cpu != bad.is_cpu:
        sides = {True: "a CPU op profile", False: "a GPU kernel profile"}
        raise ProfileError(
            f"Cannot compare {good.source or 'GOOD'} ({sides[good.is_cpu]}) with "
            f"{bad.source or 'BAD'} ({sides[bad.is_cpu]}); profile both on one device"
        )
    rows_good = {row.name: row for row in good.kernels}
    rows_bad = {row.name: row for row in bad.kernels}
    names = rows_good.keys() | rows_bad.keys()
    deltas = {
        name: (rows_bad[name].us if name in rows_bad else 0.0)
        - (rows_good[name].us if name in rows_good else 0.0)
        for name in names
    }
    total = round(sum(deltas.values()), 2)
    before_total = sum(row.us for row in good.kernels)
    top5, explained = top_contributors(deltas, total)
    kernels = []
    for name in names:
        before, after = rows_good.get(name), rows_bad.get(name)
        either = after or before
        assert either is not None, name
        kernels.append(
            KernelDelta(
                name=name,
                before_us=before.us if before else 0.0,
                after_us=after.us if after else 0.0,
                calls_before=before.calls if before else 0,
                calls_after=after.calls if after else 0,
                share_pct=round(100 * deltas[name] / total, 2) if total else 0.0,
                status=_status(before, after),
                example=either.example,
            )
        )
    kernels.sort(key=lambda row: (-abs(row.delta_us), row.name))
    return KernelDiff(
        kernels=tuple(kernels),
        total_delta_us=total,
        total_delta_pct=round(100 * total / before_total, 2) if before_total > 0 else 0.0,
        explained_top5_pct=explained,
        top5=top5,
        unit=good.unit,
        span_before_us=good.span_us,
        span_after_us=bad.span_us,
        busy_before_us=good.busy_us,
        busy_after_us=bad.busy_us,
        activities_before=good.activities,
        activities_after=bad.activities,
        before_source=good.source,
        after_source=bad.source,
    )


# --- I/O edge -------------------------------------------------------------------------


def diff_files(good: str | os.PathLike[str], bad: str | os.PathLike[str]) -> KernelDiff:
    """Load two kernels.json files (ProfileError naming a bad one) and diff them."""
    return diff_summaries(load_summary(good), load_summary(bad))


# --- formatting -----------------------------------------------------------------------

HEADERS = ("delta us", "share", "GOOD us", "BAD us", "calls", "status", "name")


def _row_cells(row: KernelDelta) -> list[str]:
    status = "" if row.status == BOTH else row.status
    return [
        f"{row.delta_us:+.2f}",
        f"{row.share_pct:+.1f}%",
        f"{row.before_us:.2f}",
        f"{row.after_us:.2f}",
        f"{row.calls_before}->{row.calls_after}",
        status,
        row.name,
    ]


def headline(diff: KernelDiff, good: str = "GOOD", bad: str = "BAD") -> str:
    """One line: the total change, busy and span, and what the top contributors explain."""
    explained = (
        f"top {len(diff.top5)} {'explains' if len(diff.top5) == 1 else 'explain'} "
        f"{diff.explained_top5_pct:.1f}%"
        if diff.top5
        else "nothing to explain"
    )
    return (
        f"{good} -> {bad}: {diff.total_delta_us:+.2f} us ({diff.total_delta_pct:+.1f}%) of "
        f"{diff.unit} time per forward "
        f"(busy {diff.busy_before_us:.1f} -> {diff.busy_after_us:.1f} us, span "
        f"{diff.span_before_us:.1f} -> {diff.span_after_us:.1f} us); {explained}"
    )


def contributors(diff: KernelDiff, code: Callable[[str], str] = str) -> str:
    """One line naming the top contributors behind explained_top5_pct, largest first.

    The rows are listed by |delta|, so a big change against the total (a GEMM
    that got faster while new kernels made the forward slower) can stand above
    what made it slower; this line says what did.
    """
    if not diff.top5:
        return ""
    rows = {row.name: row for row in diff.kernels}
    parts = []
    for name in diff.top5:
        row = rows[name]
        status = "" if row.status == BOTH else f"{row.status}, "
        calls = f"{row.calls_before}->{row.calls_after} calls"
        parts.append(f"{code(name)} ({status}{row.delta_us:+.2f} us, {calls})")
    direction = "slower" if diff.slower else "faster"
    return f"{direction} mostly in: " + "; ".join(parts)


def _code(name: str) -> str:
    """A Markdown code span: kernel names hold `<...>`, which would render as HTML tags."""
    fence = "``" if "`" in name else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{name}{pad}{fence}"


def format_diff(
    diff: KernelDiff, fmt: str = "table", *, top: int = 20, good: str = "GOOD", bad: str = "BAD"
) -> str:
    """`table` for a terminal, `json` (the stable contract), `markdown` for a PR comment."""
    if fmt == "json":
        return json.dumps({"good": good, "bad": bad, **diff.to_json()}, indent=2, allow_nan=False)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    shown: Sequence[KernelDelta] = diff.kernels[:top] if top > 0 else diff.kernels
    hidden = len(diff.kernels) - len(shown)
    more = f"{hidden} more rows with smaller changes" if hidden else ""
    headers = (*HEADERS[:2], f"{good} us", f"{bad} us", *HEADERS[4:-1], diff.unit)
    if fmt == "markdown":
        rows = [[*_row_cells(row)[:-1], _code(row.name)] for row in shown]
        lines = [
            f"### Where the time went: {markdown_cell(good)} -> {markdown_cell(bad)}",
            "",
            headline(diff, good, bad) + ".",
            "",
        ]
        if diff.top5:
            lines += [contributors(diff, _code) + ".", ""]
        lines += [markdown_table(headers, rows) if rows else "No rows."]
        if more:
            lines += ["", f"_{more}._"]
        return "\n".join(lines)
    lines = [headline(diff, good, bad)]
    if diff.top5:
        lines.append(contributors(diff))
    lines.append(text_table(headers, [_row_cells(row) for row in shown]))
    if more:
        lines.append(f"({more})")
    return "\n".join(lines)


def explain_record(
    diff: KernelDiff,
    good: str,
    bad: str,
    profile_dir: str | os.PathLike[str],
    *,
    with_commits: bool = False,
) -> ExplainRecord:
    """The diff as the verdicts file keeps it: headline and 15-row table (commits shown by
    8 characters), the top contributors, the profiles; `with_commits`: GOOD and BAD too."""
    return ExplainRecord(
        headline=headline(diff, good[:8], bad[:8]),
        table=format_diff(diff, "table", top=15, good=good[:8], bad=bad[:8]),
        top5=diff.top5,
        explained_top5_pct=diff.explained_top5_pct,
        total_delta_us=diff.total_delta_us,
        profile_dir=str(Path(profile_dir)),
        commits=(good, bad) if with_commits else None,
    )


# --- measuring both commits ---------------------------------------------------------------


@dataclass(frozen=True)
class Explained:
    """A diff measured by fwdasv: which suite case, at which commits, where the profiles are."""

    suite: str
    case: str
    good: str
    bad: str
    profile_dir: str
    diff: KernelDiff


def explain_commits(
    project: AsvProject,
    good: str,
    bad: str,
    bench: str,
    case: str | None,
    profile_dir: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] | None = None,
    bench_echo: Callable[[str], None] | None = None,
) -> Explained:
    """Profile one suite case at GOOD and at BAD, each in asv's environment for that commit.

    The profiled runs are runs of their own (the engine's or vLLM's
    `--profile-dir`, after the timed replays of that process); no tracked
    latency ever comes from them. Both run in one go on this machine.
    """
    from fwdasv.analysis.remeasure import Remeasurer, resolve, resolve_commits

    target = resolve(project, bench, case)
    good_hash, bad_hash = resolve_commits(project, good, bad)
    root = (
        Path(profile_dir)
        if profile_dir is not None
        else (
            project.results_dir.parent
            / ".fwdasv-explain"
            / f"{good_hash[:8]}-{bad_hash[:8]}-{target.suite}-{safe_case_name(target.case)}"
        )
    )
    measurer = Remeasurer(project, target, root, echo=echo, bench_echo=bench_echo)
    paths = {}
    for label, commit in (("good", good_hash), ("bad", bad_hash)):
        directory = root / f"{label}-{commit[:8]}"
        if echo is not None:
            echo(f"profiling {target.suite}({target.case}) at {label.upper()} {commit[:8]}")
        measurer.run(commit, f"{label}-{commit[:8]}", extra=("--profile-dir", str(directory)))
        paths[label] = profile_paths(directory, target.case)[0]
    return Explained(
        target.suite,
        target.case,
        good_hash,
        bad_hash,
        str(root),
        diff_files(paths["good"], paths["bad"]),
    )
