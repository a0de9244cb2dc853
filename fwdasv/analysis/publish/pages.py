"""fwdasv's own pages in the published site: the findings, the commits, each kernel diff.

`html/fwdasv/findings.html` lists every finding (status, series linked to its asv
graph at the step's commits, commits, change, noise, confirmation, culprit, a link to
its kernel diff), each row an anchor (`#finding-<id>`); under it, every published
commit and every one in a finding's range, newest first, each an anchor named as asv
shows the hash (`#<hash_length characters>`: with no commit URL, asv's links land here,
`fwdasv.asv.site_patches`) and as the whole hash (the Atom feed's links) with its date, subject and the findings whose range holds it.
Where git cannot give the subjects (the repository moved away) the page says so.
`html/fwdasv/explain/<id>.html` is a kernel diff: the headline, the rows that stand
out (op, source line, "changed here"), the table wrapped to the page, and where the
profiles are, relative to the project's directory.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.format import status_label, triage_label
from fwdasv.analysis.findings.verdict_file import ExplainRecord
from fwdasv.core.files import write_atomic

PAGES = "fwdasv"
STYLE = """body{font-family:sans-serif;margin:2em;max-width:100em}
td,th{padding:4px 8px;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
.confirmed,.regression{color:#b00;font-weight:bold} .suspected{color:#b60}
.improvement{color:#070;font-weight:bold} .drift,.not-reproduced{color:#777}
tr:target{background:#ffd} .warning{color:#b60}
pre{font-size:13px;white-space:pre-wrap;overflow-wrap:anywhere}"""


@dataclass(frozen=True)
class SiteFinding:
    """A finding as the pages show it: its anchor id, and links the site gives it."""

    finding: Finding
    ident: str  # `finding-<ident>` anchors its row, `explain/<ident>.html` its diff
    graph: str | None  # asv's graph of its series at the step, relative to fwdasv/


@dataclass(frozen=True)
class SiteCommit:
    """A commit on the page: asv's revision (None: in a finding's range, not measured),
    full hash, date (ms since the epoch), subject."""

    revision: int | None
    hash: str
    date_ms: int | None
    subject: str | None


def _page(title: str, back: str, body: str, up: str = "../") -> str:
    """A page of the site, `up` from its root (asv's icon is there: no request that fails)."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<link rel="icon" href="{up}swallow.ico"><style>{STYLE}</style></head>
<body><p>{back}</p>
{body}
</body></html>
"""


def write_findings_page(
    pages: Path,
    project_name: str,
    shown: Sequence[SiteFinding],
    commits: Sequence[SiteCommit],
    hash_length: int,
    warnings: Sequence[str] = (),
) -> None:
    """`pages/findings.html`, as the module says."""
    short = {c.hash: c.hash[:hash_length] for c in commits}
    rows = [_finding_row(item, short, hash_length) for item in shown]
    body = "\n".join(rows) or "<tr><td colspan='8'>No findings in the stored results.</td></tr>"
    name = html.escape(project_name)
    notes = "".join(f"<p class='warning'>Warning: {html.escape(w)}</p>\n" for w in warnings)
    write_atomic(
        pages / "findings.html",
        _page(
            f"fwdasv findings: {project_name}",
            '<a href="../index.html">&larr; the asv site</a>',
            f"""<h1>Findings: {name}</h1>
{notes}<p>Each series is judged by its own run-to-run noise (estimated from its history).
<b>regression</b>: detected; <b>suspected</b>: at the history's edge (its newest commits, or
a series' first), shown by too few commits to rule out outliers; <b>confirmed</b>: reproduced
by an interleaved A/B re-measure on one machine; <b>not-reproduced</b>: ruled out by it;
<b>drift</b>: the machine changed (the environment canary or the GPU clock stepped at the same
commit), not the code; <b>improvement</b>: faster (never fails a check).</p>
<table><tr><th>status</th><th>series</th><th>machine</th><th>commits</th><th>change</th>
<th>noise</th><th>confirmation</th><th>why</th></tr>
{body}
</table>
<h2 id="commits">Commits</h2>
<p>Every published commit and every commit in a finding's range, newest first; a commit link
of the asv pages lands on its row.</p>
<table><tr><th>commit</th><th>date</th><th>subject</th><th>findings in its range</th></tr>
{_commit_rows(commits, shown, hash_length)}
</table>""",
        ),
    )


def _commit_cell(hash_: str, subject: str | None, short: Mapping[str, str], length: int) -> str:
    label = html.escape(hash_[:8])
    anchor = short.get(hash_)
    code = f'<a href="#{anchor}"><code>{label}</code></a>' if anchor else f"<code>{label}</code>"
    return code + (f" {html.escape(subject)}" if subject else "")


def _finding_row(item: SiteFinding, short: Mapping[str, str], length: int) -> str:
    finding = item.finding
    name = html.escape(f"{finding.key.benchmark}({finding.key.case})")
    series = f'<a href="{html.escape(item.graph)}">{name}</a>' if item.graph else name
    commits = "<br>".join(_commit_cell(c.hash, c.subject, short, length) for c in finding.commits)
    culprit = finding.culprit()
    if culprit is not None:
        named = culprit["commit"]
        told = _commit_cell(named, culprit["subject"], short, length) if named else ""
        commits += f"<br>bisect: {told or html.escape(str(culprit['answer']))}"
    explain = ""
    if finding.explain_record is not None:
        explain = f'<a href="explain/{item.ident}.html">kernel diff</a>'
    confirmation = finding.confirmation_record
    summary = confirmation.summary if confirmation is not None else ""
    return (
        f"<tr id='finding-{item.ident}'>"
        f"<td class='{finding.status}'>{html.escape(status_label(finding))}"
        f"{'<br>' + html.escape(triage_label(finding)) if finding.triage else ''}</td>"
        f"<td>{series}</td><td>{html.escape(finding.key.machine)}</td>"
        f"<td>{commits or html.escape(finding.range_label)}</td><td>{finding.percent:+.2f}%</td>"
        f"<td>{finding.noise.noise_pct:.3f}%</td>"
        f"<td>{html.escape(summary)}</td><td>{explain}</td>"
        "</tr>"
    )


def _commit_rows(commits: Sequence[SiteCommit], shown: Sequence[SiteFinding], length: int) -> str:
    at: dict[str, list[SiteFinding]] = {}
    for item in shown:
        for in_range in item.finding.commits:
            at.setdefault(in_range.hash, []).append(item)
    rows = []
    for commit in sorted(commits, key=lambda c: (-(c.date_ms or 0), -(c.revision or 0))):
        date = ""
        if commit.date_ms is not None:
            when = datetime.fromtimestamp(commit.date_ms / 1000, tz=timezone.utc)
            date = when.strftime("%Y-%m-%d %H:%M UTC")
        links = ", ".join(
            f'<a href="#finding-{item.ident}" class="{item.finding.status}">'
            f"{html.escape(item.finding.key.case)} {item.finding.percent:+.1f}% "
            f"({item.finding.status})</a>"
            for item in at.get(commit.hash, [])
        )
        measured = "" if commit.revision is not None else " <i>(not measured)</i>"
        # Two anchors: asv's links name the hash as asv shows it, the Atom feed's (asv's
        # feed code) the whole hash.
        whole = f" id='{html.escape(commit.hash)}'" if len(commit.hash) > length else ""
        rows.append(
            f"<tr id='{html.escape(commit.hash[:length])}'><td><code{whole}>{commit.hash}</code>"
            f"{measured}</td><td>{date}</td><td>{html.escape(commit.subject or '')}</td>"
            f"<td>{links}</td></tr>"
        )
    return "\n".join(rows)


def relative_to(path: str, root: Path) -> str:
    """`path` relative to the project's directory `root` when inside it, else as given."""
    try:
        return os.path.relpath(path, root) if Path(path).is_relative_to(root) else path
    except ValueError:
        return path


def write_explain_page(page: Path, finding: Finding, explain: ExplainRecord, root: Path) -> None:
    """One kernel diff (see the module); profile paths relative to the project's `root`."""
    title = f"{finding.key.benchmark}({finding.key.case}) {finding.range_label}"
    table = explain.table.replace(str(root) + os.sep, "")
    table = table.removeprefix(explain.headline).lstrip("\n")  # the headline is above it
    rows = "".join(_explain_row(row, explain.change_link) for row in explain.rows)
    standing = (
        "<table><tr><th>row</th><th>op</th><th>source</th><th></th></tr>\n" + rows + "</table>"
        if rows
        else ""
    )
    write_atomic(
        page,
        _page(
            title,
            '<a href="../findings.html">&larr; findings</a>',
            f"""<h1>What got slower: {html.escape(title)}</h1>
<p>{html.escape(explain.headline)}</p>
{standing}<pre>{html.escape(table)}</pre>
<p>Profiles: <code>{html.escape(relative_to(explain.profile_dir, root))}</code> (in the project's
directory)</p>""",
            up="../../",
        ),
    )


def _explain_row(row: Mapping[str, object], change_link: str | None) -> str:
    changed = ""
    if row.get("changed_here"):
        changed = "changed here"
        if change_link:
            changed = f'<a href="{html.escape(change_link)}">changed here</a>'
    return (
        f"<tr><td>{html.escape(str(row.get('label', '')))}</td>"
        f"<td>{html.escape(str(row.get('op') or ''))}</td>"
        f"<td><code>{html.escape(str(row.get('source') or ''))}</code></td>"
        f"<td>{changed}</td></tr>\n"
    )
