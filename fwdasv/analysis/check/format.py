"""A check's outcome as text: `table` for a terminal, `markdown` for a pull-request comment,
`json` for scripts.

The markdown opens with one line a reviewer reads first (the slowdowns, or none), then a
table of every case (its word, HEAD's change against BASE and the interval, the processes
behind it), then, per slowdown, explain's op (kernel) table with the source lines that
call each op, marked where the pull request changed that file.
"""

from __future__ import annotations

import json

from fwdasv.analysis.check.check import CaseCheck, CheckOutcome
from fwdasv.analysis.explain.kernel_diff_format import format_diff
from fwdasv.analysis.rules.confirm import ALPHA
from fwdasv.core.tables import markdown_cell, markdown_table, text_table

FORMATS = ("table", "markdown", "json")
HEADERS = ("suite", "case", "series", "verdict", "HEAD vs BASE", "interval", "processes")
EXPLAIN_ROWS = 10  # rows of each op table in the comment


def _interval(case: CaseCheck) -> str:
    return f"[{case.verdict.lower_pct:+.2f}%, {case.verdict.upper_pct:+.2f}%]"


def _row(case: CaseCheck) -> list[str]:
    return [
        case.suite,
        case.case,
        case.series,
        str(case.status),
        f"{case.verdict.percent:+.2f}%",
        _interval(case),
        f"{case.verdict.processes_a}+{case.verdict.processes_b}",
    ]


def summary(outcome: CheckOutcome) -> str:
    """The one line a reviewer reads first."""
    pair = f"{outcome.head[:8]} against {outcome.base[:8]}"
    if not outcome.slower:
        return (
            f"No slowdown beyond +{outcome.min_effect_pct:g}%: {pair}, "
            f"{len(outcome.cases)} case(s)."
        )
    named = ", ".join(f"{c.case} {c.verdict.percent:+.1f}%" for c in outcome.slower)
    return (
        f"{len(outcome.slower)} slowdown(s) beyond +{outcome.min_effect_pct:g}%: {pair}: {named}."
    )


def _cost(outcome: CheckOutcome) -> str:
    resumed = (
        f" (and {outcome.resumed} kept from an earlier check of the pair)"
        if outcome.resumed
        else ""
    )
    stored = sum(1 for case in outcome.cases if case.prior is not None)
    priors = (
        f"; noise priors from the stored history for {stored} of {len(outcome.cases)} case(s)"
        if stored
        else "; no stored history: the processes decided"
    )
    return (
        f"{outcome.bench_processes} bench processes{resumed}, {outcome.installs} install(s), "
        f"{outcome.wall_s:.0f} s; intervals one-sided at {100 * (1 - ALPHA):g}% each bound" + priors
    )


def format_check(outcome: CheckOutcome, fmt: str = "table") -> str:
    """The outcome in `fmt` (one of FORMATS)."""
    if fmt == "json":
        return json.dumps(to_json(outcome), indent=2, allow_nan=False)
    if fmt == "markdown":
        return _markdown(outcome)
    if fmt != "table":
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    lines = [summary(outcome), text_table(HEADERS, [_row(c) for c in outcome.cases])]
    for case, diff in outcome.explained:
        lines += ["", f"{case.suite}({case.case}):"]
        lines.append(
            format_diff(
                diff, "table", top=EXPLAIN_ROWS, good=outcome.base[:8], bad=outcome.head[:8]
            )
        )
    lines += list(outcome.explain_errors)
    lines.append(_cost(outcome))
    return "\n".join(lines)


def _markdown(outcome: CheckOutcome) -> str:
    mark = ":x:" if outcome.slower else ":white_check_mark:"
    rows = [_row(c) for c in outcome.cases]
    lines = [
        f"## fwdasv check: {outcome.head[:8]} against {outcome.base[:8]}",
        "",
        f"{mark} {summary(outcome)}",
        "",
        markdown_table(HEADERS, rows),
    ]
    for case, diff in outcome.explained:
        lines += [
            "",
            f"#### {markdown_cell(case.suite)}({markdown_cell(case.case)}): "
            f"{case.verdict.percent:+.1f}% {_interval(case)}",
            "",
            format_diff(
                diff, "markdown", top=EXPLAIN_ROWS, good=outcome.base[:8], bad=outcome.head[:8]
            ),
        ]
    lines += [f"_{markdown_cell(error)}_" for error in outcome.explain_errors]
    lines += ["", f"<sub>{_cost(outcome)}</sub>"]
    return "\n".join(lines)


def to_json(outcome: CheckOutcome) -> dict[str, object]:
    """The stable contract: the pair, the exit status, every case, each slowdown's diff."""
    return {
        "base": outcome.base,
        "head": outcome.head,
        "min_effect_pct": outcome.min_effect_pct,
        "status": outcome.status,
        "summary": summary(outcome),
        "cases": [c.to_json() for c in outcome.cases],
        "explained": [
            {"suite": c.suite, "case": c.case, "diff": diff.to_json()}
            for c, diff in outcome.explained
        ],
        "explain_errors": list(outcome.explain_errors),
        "cost": {
            "bench_processes": outcome.bench_processes,
            "resumed_processes": outcome.resumed,
            "installs": outcome.installs,
            "wall_s": outcome.wall_s,
        },
    }
