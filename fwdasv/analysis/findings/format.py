"""The findings as the commands show them: a table, JSON or markdown, and their lines.

`format_findings` renders a list of `Finding`s in one of FORMATS, with the result
files that could not be read named under it; `status_label` is the status as tables
and the site show it (how many commits show an edge's step, or why a settled step is
only suspected); `summary_line` is the table's last line (the tally). Formatting
reads the findings and decides nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from fwdasv.analysis.findings.dark import DarkSuite, dark_line
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.rules.status import Status
from fwdasv.asv.history import Problem
from fwdasv.core.tables import human_value, markdown_table, text_table

FORMATS = ("table", "json", "markdown")

HEADERS = (
    "status",
    "benchmark",
    "case",
    "machine",
    "commits",
    "before",
    "after",
    "change",
    "noise",
)


UNDECIDED_LABEL = "too noisy to decide"


def status_label(finding: Finding) -> str:
    """The status as tables show it: with how many commits show an edge's step, or why a
    settled step is only suspected."""
    status = str(finding.status)
    if finding.note is not None and finding.status == Status.SUSPECTED:
        return f"{status} ({finding.note})"
    if finding.step.edge is not None and finding.status in (Status.SUSPECTED, Status.REGRESSION):
        shown = finding.showing_commits
        return f"{status} ({shown} commit{'s' if shown > 1 else ''})"
    if finding.step.edge is None and finding.status == Status.SUSPECTED:
        return f"{status} ({UNDECIDED_LABEL})"
    return status


def _row(finding: Finding) -> list[str]:
    if len(finding.commits) == 1:
        commits = finding.commits[0].hash[:8] + (
            f" {finding.commits[0].subject}" if finding.commits[0].subject else ""
        )
    elif finding.commits:
        commits = f"{finding.range_label} ({len(finding.commits)}): " + "; ".join(
            c.hash[:8] + (f" {c.subject}" if c.subject else "") for c in finding.commits
        )
    else:
        commits = finding.range_label
    return [
        status_label(finding),
        finding.key.benchmark,
        finding.key.case,
        finding.key.machine,
        commits,
        human_value(finding.step.before, finding.unit),
        human_value(finding.step.after, finding.unit),
        f"{finding.percent:+.2f}%",
        f"{finding.noise.noise_pct:.2f}%",
    ]


RE_MEASURED_HEADER = "re-measured"
CULPRIT_HEADER = "culprit"
TRIAGE_HEADER = "triage"


def triage_label(finding: Finding) -> str:
    """What a person said (`acknowledged: note <issue>`, `fixed-by abcd1234`), or ""."""
    record = finding.triage_record
    if record is None:
        return ""
    cell = record.state + (f" {record.fixed_by[:8]}" if record.fixed_by else "")
    said = " ".join(p for p in (record.note, f"<{record.issue}>" if record.issue else "") if p)
    return f"{cell}: {said}" if said else cell


def _re_measured_cell(finding: Finding) -> str:
    """The confirmation's pair and outcome (`A..B: undecided at this noise`), or ""."""
    shown = finding.re_measured()
    if shown is None:
        return ""
    same = shown["pair"] == shown["finding_pair"]
    return f"{shown['pair']}{'' if same else ' (widened)'}: {shown['outcome']}"


def _culprit_cell(finding: Finding) -> str:
    """Bisect's first bad commit (`abcd1234 subject`), why it named none, or ""."""
    shown = finding.culprit()
    if shown is None:
        return ""
    if shown["commit"] is None:
        return str(shown["answer"])
    return shown["commit"][:8] + (f" {shown['subject']}" if shown["subject"] else "")


def unreadable_line(unreadable: Sequence[Problem]) -> str:
    """The note under a listing that missed some results."""
    count = len(unreadable)
    files = "file" if count == 1 else "files"
    return (
        f"{count} result {files} could not be read (named on stderr): a regression at "
        f"{'its commit' if count == 1 else 'their commits'} would not show here"
    )


def format_findings(
    findings: Sequence[Finding],
    fmt: str,
    unreadable: Sequence[Problem] = (),
    dark: Sequence[DarkSuite] = (),
) -> str:
    gating = sum(f.gating for f in findings)
    if fmt == "json":
        return json.dumps(
            {
                "regressions": [f.to_json() for f in findings],
                "count": len(findings),
                "gating": gating,
                # Its name before the verdicts: findings that fail the check.
                "above_threshold": gating,
                "unreadable": [{"path": p.path, "error": p.message} for p in unreadable],
                "unreadable_count": len(unreadable),
                # Suites with nothing measured at their newest commit (`rules/dark.py`).
                "unmeasured": [d.to_json() for d in dark],
            },
            indent=2,
            allow_nan=False,
            default=str,
        )
    rows = [_row(f) for f in findings]
    headers: tuple[str, ...] = HEADERS
    if any(f.re_measured() for f in findings):
        # Which pair the confirmation measured: A and B reach a commit past the finding's.
        headers = (*HEADERS, RE_MEASURED_HEADER)
        rows = [[*row, _re_measured_cell(f)] for row, f in zip(rows, findings, strict=True)]
    if any(f.culprit() for f in findings):
        # The commit bisect named inside a range of several commits.
        headers = (*headers, CULPRIT_HEADER)
        rows = [[*row, _culprit_cell(f)] for row, f in zip(rows, findings, strict=True)]
    if any(f.triage for f in findings):
        # What a person said: a triaged finding is listed, and nightly does not gate on it.
        headers = (*headers, TRIAGE_HEADER)
        rows = [[*row, triage_label(f)] for row, f in zip(rows, findings, strict=True)]
    counts: defaultdict[Status, int] = defaultdict(int)
    for f in findings:
        counts[f.status] += 1
    tally = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"
    note = ". ".join(
        [
            *([unreadable_line(unreadable)] if unreadable else []),
            *([dark_line(dark)] if dark else []),
        ]
    )
    if fmt == "markdown":
        tail = f"\n**{note}.**\n" if note else ""
        if not findings:
            return "### Performance regressions\n\nNo regressions in the stored results.\n" + tail
        return (
            f"### Performance regressions: {tally}\n\n"
            + markdown_table(headers, rows)
            + "\n\nEach series judged by its own run-to-run noise (`noise`); `regression`: "
            "detected, `suspected`: at the history's edge, shown by too few commits to rule "
            "out outliers, or a large step too noisy for the history to decide, `confirmed`: reproduced by an A/B re-measure, `drift`: the machine "
            "changed, not the code, `improvement`: faster.\n" + tail
        )
    if fmt == "table":
        tail = f"\n{note}" if note else ""
        if not findings:
            where = "readable" if unreadable else "stored"
            return f"No regressions in the {where} results." + tail
        out = text_table(headers, rows)
        if RE_MEASURED_HEADER in headers:
            out += (
                "\n\nre-measured: the pair the A/B confirmation measured; '(widened)': a "
                "commit past the finding's own pair each side, as its place is uncertain "
                "by about a commit"
            )
        # Where a commit's loaded processes were outvoted by its quiet ones, and why.
        quiet = sorted({f"{f.key.name}: {f.processes}" for f in findings if f.processes})
        if quiet:
            out += "\n\n" + "\n".join(quiet)
        return out + f"\n\n{len(findings)} finding(s): {tally}" + tail
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def summary_line(findings: Sequence[Finding]) -> str:
    return format_findings(findings, "table").splitlines()[-1]
