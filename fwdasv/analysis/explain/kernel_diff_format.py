"""A kernel diff (`fwdasv.analysis.explain.kernel_diff.KernelDiff`) as text: table, JSON, Markdown.

`headline` is one line (what stands out and its share of GOOD's time, so its sign is the
verdict's; the largest structural change with its op and line; then the one total and its
split), `contributors` the rows that stand out with their shares and call sites, and
`format_diff` the whole: `table` for a terminal, `json` the stable contract
(`KernelDiff.to_json` with GOOD's and BAD's labels), `markdown` for a pull-request comment
(names in code spans: kernel names hold `<...>`). A kernel shows its launching op (`kernel
<- aten::op`); a row whose call the commit changed (by line: `kernel_diff.mark_changed`) is
marked `changed here` (a link to the commit's diff in Markdown, where there is one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from fwdasv.analysis.explain.kernel_delta import FASTER, NOISE, SAME, SLOWER, KernelDelta
from fwdasv.analysis.explain.kernel_diff import TOP_EXPLAINED, KernelDiff
from fwdasv.analysis.rules.status import CompareStatus
from fwdasv.core.tables import markdown_cell, markdown_table, text_table

FORMATS = ("table", "json", "markdown")

HEADERS = ("delta us", "noise ±", "share", "GOOD us", "BAD us", "calls", "change", "name", "source")


CHANGED_HERE = "changed here"


def _source_cell(row: KernelDelta) -> str:
    source = row.source
    if source is None:
        return ""
    return source.label + (f" [{CHANGED_HERE}]" if row.changed_here else "")


def name_label(row: KernelDelta) -> str:
    """A row's name, a kernel with its launching op: `kernel <- aten::_to_copy`; a kernel the
    eager pass did not launch says so."""
    if row.op:
        return f"{row.name} <- {row.op}"
    if row.unmatched:
        return f"{row.name} <- (unmatched)"
    return row.name


def where(row: KernelDelta) -> str:
    """`kernel <- op <- file:line function`, and `, changed here`: what the row is and where
    the code under test calls it."""
    label = name_label(row)
    if row.source is not None:
        label += f" <- {row.source.label}"
    return label + (f", {CHANGED_HERE}" if row.changed_here else "")


def _change_cell(row: KernelDelta) -> str:
    if row.change == SAME:
        return ""
    if row.change == NOISE:
        return "within noise"
    return row.change


def _row_cells(row: KernelDelta, indent: str = "") -> list[str]:
    return [
        f"{row.delta_us:+.2f}",
        "" if row.noise_us is None else f"{row.noise_us:.2f}",
        f"{row.share_pct:.1f}%" if row.stands_out and row.delta_us else "",
        f"{row.before_us:.2f}",
        f"{row.after_us:.2f}",
        f"{row.calls_before}->{row.calls_after}",
        _change_cell(row),
        indent + name_label(row),
        "" if indent else _source_cell(row),
    ]


def _rounds(diff: KernelDiff) -> str:
    if diff.rounds_before == diff.rounds_after:
        n = diff.rounds_before
        return f"{n} profile{'s' if n != 1 else ''} a side" + (", interleaved" if n > 1 else "")
    return f"{diff.rounds_before} profiles of GOOD, {diff.rounds_after} of BAD"


def headline(diff: KernelDiff, good: str = "GOOD", bad: str = "BAD") -> str:
    """One line: what stands out (or that nothing does), then the one total and its split."""
    structural = [row for row in diff.kernels if row.structural]
    # The figure first is what stands out, so its sign is the verdict's: the total below
    # also holds the rows within the noise, which a neighbour's load can move either way.
    net_pct = 100 * diff.net_us / diff.busy_before_us if diff.busy_before_us else 0.0
    if diff.verdict == CompareStatus.WORSE:
        what = (
            f"slower: {diff.net_us:+.2f} us per forward ({net_pct:+.1f}% of GOOD's time) stands out"
        )
    elif diff.verdict == CompareStatus.IMPROVED:
        what = (
            f"faster: {diff.net_us:+.2f} us per forward ({net_pct:+.1f}% of GOOD's time) stands out"
        )
    elif structural:
        what = (
            f"no change of time stands out of the noise ({diff.net_us:+.2f} us"
            + (f", noise ±{diff.net_noise_us:.2f}" if diff.net_noise_us is not None else "")
            + f"); {len(structural)} {diff.unit.split()[0]} row"
            + ("s" if len(structural) != 1 else "")
            + " changed in structure"
        )
    else:
        what = "no change stands out of the noise"
    largest = diff.largest_structural
    if largest is not None:
        calls = f"{largest.calls_before}->{largest.calls_after} calls"
        what += (
            f"; largest structural change: {where(largest)} ({largest.change}, {calls}, "
            f"{largest.delta_us:+.2f} us)"
        )
    against = ""
    if (
        diff.verdict in (CompareStatus.WORSE, CompareStatus.IMPROVED)
        and diff.total_delta_us * diff.net_us < 0
    ):
        against = " (the rows within the noise moved the total the other way)"
    return (
        f"{good} -> {bad} ({_rounds(diff)}): {what}; {diff.unit} time per forward "
        f"{diff.busy_before_us:.1f} -> {diff.busy_after_us:.1f} us "
        f"({diff.total_delta_us:+.2f} us, {diff.total_delta_pct:+.1f}% = "
        f"{diff.slower_us:+.2f} slower {diff.faster_us:+.2f} faster "
        f"{diff.noise_sum_us:+.2f} {'within the noise' if diff.net_noise_us is not None else 'unjudged'}), span "
        f"{diff.span_before_us:.1f} -> {diff.span_after_us:.1f} us{against}"
    )


def _part(row: KernelDelta, code: Callable[[str], str]) -> str:
    change = f"{row.change}, " if row.change not in (SLOWER, FASTER) else ""
    at = f", {row.source.label}" if row.source is not None else ""
    at += f", {CHANGED_HERE}" if row.changed_here else ""
    op = f" <- {code(row.op)}" if row.op else ""
    calls = f"{row.calls_before}->{row.calls_after} calls"
    return (
        f"{code(row.name)}{op} ({change}{row.delta_us:+.2f} us, {row.share_pct:.0f}%, {calls}{at})"
    )


def contributors(diff: KernelDiff, code: Callable[[str], str] = str) -> str:
    """The rows that stand out, slower ones then faster ones, largest first, with their share
    of the slowdown (speed-up) and where they are called; empty when none stands out."""
    lines = []
    for label, sign in (("slower", 1), ("faster", -1)):
        rows = [r for r in diff.kernels if r.stands_out and sign * r.delta_us > 0]
        if not rows:
            continue
        rows.sort(key=lambda r: (-abs(r.delta_us), r.name))
        total = diff.slower_us if sign > 0 else diff.faster_us
        shown = "; ".join(_part(row, code) for row in rows[:TOP_EXPLAINED])
        more = f"; {len(rows) - TOP_EXPLAINED} more" if len(rows) > TOP_EXPLAINED else ""
        lines.append(f"{label} ({total:+.2f} us): {shown}{more}")
    return "\n".join(lines)


def _code(name: str) -> str:
    """A Markdown code span: kernel names hold `<...>`, which would render as HTML tags."""
    fence = "``" if "`" in name else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{name}{pad}{fence}"


def _markdown_source(row: KernelDelta, link: str | None) -> str:
    if row.source is None:
        return ""
    if not row.changed_here:
        return _code(row.source.label)
    marker = f"[{CHANGED_HERE}]({link})" if link else CHANGED_HERE
    return f"{_code(row.source.label)} {marker}"


def _table_rows(
    shown: Sequence[KernelDelta], markdown: bool, link: str | None = None
) -> list[list[str]]:
    rows = []
    for row in shown:
        cells = _row_cells(row)
        if markdown:
            cells[7] = _code(row.name) + (f" <- {_code(row.op)}" if row.op else "")
            cells[8] = _markdown_source(row, link)
        rows.append(cells)
        for kernel in row.kernels[:3] if row.stands_out else ():
            sub = _row_cells(kernel, indent="  └ ")
            if markdown:
                sub[7] = "└ " + _code(kernel.name)
            rows.append(sub)
    return rows


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
    columns = (*HEADERS[:3], f"{good} us", f"{bad} us", *HEADERS[5:7], diff.unit, HEADERS[8])
    # No source column where no row has one (vLLM's profiles).
    width = len(columns) if any(row.source for row in diff.kernels) else len(columns) - 1
    headers: tuple[str, ...] = columns[:width]
    lead = contributors(diff, _code if fmt == "markdown" else str)
    if fmt == "markdown":
        rows = [r[:width] for r in _table_rows(shown, markdown=True, link=diff.change_link)]
        lines = [
            f"### Where the time went: {markdown_cell(good)} -> {markdown_cell(bad)}",
            "",
            headline(diff, good, bad) + ".",
            "",
        ]
        if lead:
            lines += [f"- {line}." for line in lead.splitlines()] + [""]
        lines += [f"_Note: {note}._" for note in diff.notes]
        lines += [""] if diff.notes else []
        lines += [markdown_table(headers, rows) if rows else "No rows."]
        if more:
            lines += ["", f"_{more}._"]
        return "\n".join(lines)
    lines = [headline(diff, good, bad)]
    if lead:
        lines += lead.splitlines()
    if diff.change_link and any(row.changed_here for row in diff.kernels):
        lines.append(f"{CHANGED_HERE}: {diff.change_link}")
    lines += [f"note: {note}" for note in diff.notes]
    lines.append(text_table(headers, [r[:width] for r in _table_rows(shown, markdown=False)]))
    if more:
        lines.append(f"({more})")
    return "\n".join(lines)
