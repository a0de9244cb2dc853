"""Comparisons (`fwdasv.analysis.compare.compare.Comparison`) as text: table, JSON, Markdown.

Each row shows the pair's one verdict (`Comparison.decision`): a gating finding of the
history between the two commits where there is one (the note then gives the pair's own
verdict), else the pair's. Rows are ordered: those a finding decides first, then by
verdict (worse first, as `COMPARISON_STATUSES` lists them), benchmark and machine;
`only_changed` hides unchanged, not-significant, unknown and telemetry rows that no
finding decides. Telemetry with a value at neither commit (a GPU's clocks on a CPU box) is
left out of the table and Markdown, counted in one line. Where the history holds findings
between the two commits, two columns say which rule decided each row (`pair` or
`finding`) and what the history found. `*` in n: a side read from the bench processes
bisect or confirm kept (`compare.kept`). The JSON is strict (no NaN or infinity) and holds
every row and count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fwdasv.analysis.compare.compare import DEFAULT_FACTOR, Comparison, counts
from fwdasv.analysis.rules.judgment import DEFAULT_ALPHA
from fwdasv.analysis.rules.status import COMPARISON_STATUSES, CompareStatus
from fwdasv.core.tables import human_value, markdown_table, text_table

FORMATS = ("table", "json", "markdown")

HEADERS = ("verdict", "before", "after", "ratio", "p-value", "n", "benchmark", "machine", "note")
FINDING_HEADERS = ("decided by", "history's finding")


def _finding_cells(c: Comparison) -> list[str]:
    return [c.decided_by, "; ".join(f.label() for f in c.findings)]


def _row(c: Comparison) -> list[str]:
    j = c.judgement
    n = "/".join(
        (str(len(m.samples)) + ("*" if m.remeasured else "")) if m else "-"
        for m in (c.before, c.after)
    )
    p = f"{j.p_value:.2g}" if j.p_value is not None else ("ci" if j.method == "ci-overlap" else "")
    if j.method == "noise" and c.noise is not None:
        p += f" (noise {c.noise.noise_pct:.2f}%)"
    note = j.reason
    if c.decision != j.verdict:
        # One verdict per pair, in its row: the history's finding, the pair's own beside it.
        alone = f"the pair alone: {j.verdict}" + (f" ({j.reason})" if j.reason else "")
        note = f"decided by the history's finding between the commits; {alone}"
    return [
        c.decision,
        human_value(c.before.median if c.before else None, c.unit),
        human_value(c.after.median if c.after else None, c.unit),
        f"{j.ratio:.3f}" if j.ratio is not None else "",
        p,
        n,
        c.name,
        c.machine,
        note,
    ]


def _ordered(comparisons: Sequence[Comparison], only_changed: bool) -> list[Comparison]:
    hidden = (
        CompareStatus.UNCHANGED,
        CompareStatus.NOT_SIGNIFICANT,
        CompareStatus.UNKNOWN,
        CompareStatus.TELEMETRY,
    )
    shown = [c for c in comparisons if not only_changed or c.decision not in hidden]
    # A row the history's finding decides fails the check: first, as worse is.
    return sorted(
        shown,
        key=lambda c: (
            c.decided_by != "finding",
            COMPARISON_STATUSES.index(c.verdict),
            c.name,
            c.machine,
        ),
    )


def unmeasured(c: Comparison) -> bool:
    """A telemetry series with no value at either commit (nothing this machine measures)."""
    return c.verdict == CompareStatus.TELEMETRY and all(
        m is None or m.median is None for m in (c.before, c.after)
    )


def _unmeasured_line(comparisons: Sequence[Comparison]) -> str:
    count = sum(1 for c in comparisons if unmeasured(c))
    if not count:
        return ""
    return (
        f"{count} telemetry series with no value at either commit (not measured on this "
        "machine, e.g. GPU clocks on a CPU) not shown; --format json lists them"
    )


KEPT_NOTE = (
    "* bench processes bisect or confirm kept (no asv result is stored for that commit): "
    "one process median a sample"
)


def _kept_line(comparisons: Sequence[Comparison]) -> str:
    kept = any(m is not None and m.remeasured for c in comparisons for m in (c.before, c.after))
    return KEPT_NOTE if kept else ""


def summary(comparisons: Sequence[Comparison]) -> str:
    tally = counts(comparisons)
    line = ", ".join(f"{n} {verdict}" for verdict, n in tally.items() if n) or "nothing compared"
    decided = sum(c.decided_by == "finding" for c in comparisons)
    if decided:
        line += (
            f"; {decided} decided by the history's finding between the two commits (as "
            "`fwdasv regressions` gates it)"
        )
    return line


def format_comparisons(
    comparisons: Sequence[Comparison],
    fmt: str,
    *,
    a: str = "A",
    b: str = "B",
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    only_changed: bool = False,
) -> str:
    shown = _ordered(comparisons, only_changed)
    rule = f"factor {factor}, alpha {alpha}"
    if fmt == "json":
        return json.dumps(
            {
                "a": a,
                "b": b,
                "factor": factor,
                "alpha": alpha,
                "counts": counts(comparisons),
                "comparisons": [c.to_json() for c in shown],
            },
            indent=2,
            default=str,
            allow_nan=False,
        )
    listed = [c for c in shown if not unmeasured(c)]
    rows = [_row(c) for c in listed]
    headers: tuple[str, ...] = HEADERS
    if any(c.findings for c in listed):
        headers = (*HEADERS, *FINDING_HEADERS)
        rows = [[*row, *_finding_cells(c)] for row, c in zip(rows, listed, strict=True)]
    left_out = "\n".join(filter(None, [_unmeasured_line(shown), _kept_line(listed)]))
    if fmt == "markdown":
        title = f"### Benchmarks: `{a[:8]}` -> `{b[:8]}` ({summary(comparisons)})\n\n"
        body = markdown_table(headers, rows) if rows else "Nothing to show."
        methods = sorted({c.judgement.method for c in shown} - {"none"})
        how = (
            "each series' run-to-run noise from its stored history"
            if methods == ["noise"]
            else "Mann-Whitney U on asv's stored samples"
            if methods == ["mann-whitney"]
            else ", ".join(methods) or "no test"
        )
        note = f"\n\n{left_out}." if left_out else ""
        return title + body + note + f"\n\nJudged by {how}, {rule}.\n"
    if fmt == "table":
        head = f"{a[:8]} -> {b[:8]} ({rule})"
        body = text_table(headers, rows) if rows else "(nothing to show)"
        note = f"\n{left_out}" if left_out else ""
        return f"{head}\n{body}\n\n{summary(comparisons)}{note}"
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
