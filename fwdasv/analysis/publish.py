"""`fwdasv publish`: asv's site, with fwdasv's findings where asv lists regressions.

After `asv publish` (and the site made to work offline), the findings of the stored
results (`fwdasv.analysis.findings`) replace asv's fixed-threshold list:
`html/regressions.json` in asv's format, the status after the entry's name
(`forward.TinyLM.track_latency('prefill_512') [confirmed]`; `bench.Plain.track_latency()
[regression]` without parameters), so asv's Regressions page shows them and its links
still work (they use the name before `(`); `html/regressions.xml`, the Atom feed, by
asv's own feed code; and `html/fwdasv/findings.html`, linked from the site's
navigation bar, every finding with its status, noise, commits and a link to its
kernel diff (`html/fwdasv/explain/<id>.html`) when `fwdasv confirm` explained it.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fwdasv.analysis.finding import Finding
from fwdasv.analysis.findings import Found, scan
from fwdasv.analysis.findings_format import status_label
from fwdasv.analysis.graph_paths import graph_file_path
from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import ExplainRecord
from fwdasv.asv.project import AsvProject, publish_site
from fwdasv.core.files import write_atomic

PAGES = "fwdasv"
NAV_ID = "nav-li-fwdasv"


@contextlib.contextmanager
def _in_directory(path: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def publish(project: AsvProject, echo: Callable[[str], None] | None = print) -> Found:
    """asv publish, then the findings written into the site; returns them, and the result
    files that could not be read (asv publish skips them too)."""
    project.verdict_settings()  # a malformed settings block is refused before any work
    publish_site(project, echo=echo)
    found = scan(project, improvements=True)
    write_site_findings(project, found.findings)
    return found


def write_site_findings(project: AsvProject, found: Sequence[Finding]) -> None:
    html_dir = project.html_dir
    index = json.loads((html_dir / "index.json").read_text())
    # asv's list is of regressions; improvements are on the findings page only.
    slower = [f for f in found if f.status != Status.IMPROVEMENT]
    entries = asv_entries(slower, index, project.branches[0] if project.branches else None)
    write_atomic(
        html_dir / "regressions.json", json.dumps({"regressions": entries}, separators=(",", ":"))
    )
    _write_feed(project, index, entries)
    _write_pages(project, found, index)
    _add_nav_link(html_dir / "index.html")


def entry_name(finding: Finding, index: Mapping[str, Any]) -> tuple[str, int | None]:
    """asv's `name(param reprs)` of the finding's series and its parameter index."""
    info = index.get("benchmarks", {}).get(finding.key.benchmark, {})
    params = info.get("params") or []
    if not params:
        return finding.key.benchmark, None
    from fwdasv.asv.result_files import param_label

    for position, combo in enumerate(itertools.product(*params)):
        if ", ".join(param_label(v) for v in combo) == finding.key.case:
            return f"{finding.key.benchmark}({', '.join(combo)})", position
    return finding.key.name, None


def _graph(
    finding: Finding, index: Mapping[str, Any], branch: str | None
) -> tuple[str, dict[str, object]]:
    """The published graph of the finding's series: its path and its varying parameters."""
    graphs = [
        g for g in index.get("graph_param_list", []) if g.get("machine") == finding.key.machine
    ]
    if branch is not None and any(g.get("branch") == branch for g in graphs):
        graphs = [g for g in graphs if g.get("branch") == branch]
    python = (finding.key.env_name or "").rpartition("-py")[2]
    matching = [g for g in graphs if str(g.get("python", "")) == python] or graphs
    params = dict(matching[0]) if matching else {"machine": finding.key.machine}
    every = index.get("params", {})
    varying = {k: v for k, v in params.items() if len(every.get(k, [])) > 1}
    return graph_file_path(params, finding.key.benchmark) + ".json", varying


def asv_entries(
    found: Sequence[Finding], index: Mapping[str, Any], branch: str | None
) -> list[list[Any]]:
    """The findings in asv's regressions.json format, the status after each name."""
    revision = {commit: int(rev) for rev, commit in index.get("revision_to_hash", {}).items()}
    out = []
    for finding in found:
        if finding.after_commit not in revision or finding.before_commit not in revision:
            continue  # not in the published commits (another branch)
        name, param_index = entry_name(finding, index)
        graph_path, varying = _graph(finding, index, branch)
        single = len(finding.commits) <= 1
        jump = [
            None if single else revision[finding.before_commit],
            revision[finding.after_commit],
            finding.step.before,
            finding.step.after,
        ]
        latest = finding.latest if finding.latest is not None else finding.step.after
        out.append(
            [
                status_name(name, finding.status),
                graph_path,
                varying,
                param_index,
                latest,
                finding.best,
                [jump],
            ]
        )
    return out


def status_name(name: str, status: str) -> str:
    """The entry's name with its status after it.

    asv's page and feed take the benchmark's name as what comes before the
    first "(" (`benchmark_name.replace(/\\(.*/, '')`, `name[: name.index('(')]`):
    a benchmark without parameters gets an empty "()", else its status would be
    read as part of its name (a KeyError in the feed, a broken page).
    """
    return f"{name if '(' in name else name + '()'} [{status}]"


def _write_feed(project: AsvProject, index: Mapping[str, Any], entries: list[list[Any]]) -> None:
    """asv's own Atom feed code over fwdasv's entries (stable ids: name and commits)."""
    from asv.config import Config
    from asv.plugins.regressions import Regressions

    revision_to_hash = {int(rev): commit for rev, commit in index["revision_to_hash"].items()}
    revisions = {commit: rev for rev, commit in revision_to_hash.items()}
    with _in_directory(project.config_path.parent):
        conf = Config.load(str(project.config_path))
        Regressions._save_feed(conf, index["benchmarks"], entries, revisions, revision_to_hash)


def finding_id(finding: Finding) -> str:
    import hashlib

    text = json.dumps(finding.ident.to_json(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _write_pages(project: AsvProject, found: Sequence[Finding], index: Mapping[str, Any]) -> None:
    pages = project.html_dir / PAGES
    rows = []
    for finding in found:
        name = f"{finding.key.benchmark}({finding.key.case})"
        commits = (
            "<br>".join(
                f"<code>{c.hash[:8]}</code> {html.escape(c.subject or '')}" for c in finding.commits
            )
            or f"<code>{finding.range_label}</code>"
        )
        explain = ""
        diff = finding.verdict.explain if finding.verdict is not None else None
        if diff is not None:
            page = f"explain/{finding_id(finding)}.html"
            _write_explain_page(pages / page, finding, diff)
            explain = f'<a href="{page}">kernel diff</a>'
        confirmation = finding.verdict.confirmation if finding.verdict is not None else None
        summary = confirmation.summary if confirmation is not None else ""
        rows.append(
            "<tr>"
            f"<td class='{finding.status}'>{status_label(finding)}</td>"
            f"<td>{html.escape(name)}</td><td>{html.escape(finding.key.machine)}</td>"
            f"<td>{commits}</td><td>{finding.percent:+.2f}%</td>"
            f"<td>{finding.noise.noise_pct:.3f}%</td>"
            f"<td>{html.escape(summary)}</td><td>{explain}</td>"
            "</tr>"
        )
    body = "\n".join(rows) or "<tr><td colspan='8'>No findings in the stored results.</td></tr>"
    project_name = html.escape(str(index.get("project", "")))
    write_atomic(
        pages / "findings.html",
        f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>fwdasv findings: {project_name}</title>
<style>body{{font-family:sans-serif;margin:2em}} td,th{{padding:4px 8px;border-bottom:1px solid #ddd;vertical-align:top}}
.confirmed,.regression{{color:#b00;font-weight:bold}} .suspected{{color:#b60}}
.improvement{{color:#070;font-weight:bold}} .drift,.not-reproduced{{color:#777}}</style></head>
<body><p><a href="../index.html">&larr; the asv site</a></p>
<h1>Findings: {project_name}</h1>
<p>Each series is judged by its own run-to-run noise (estimated from its history).
<b>regression</b>: detected; <b>suspected</b>: at the history's edge (its newest commits, or
a series' first), shown by too few commits to rule out outliers; <b>confirmed</b>: reproduced
by an interleaved A/B re-measure on one machine; <b>not-reproduced</b>: ruled out by it;
<b>drift</b>: the machine changed (the environment canary or the GPU clock stepped at the same
commit), not the code; <b>improvement</b>: faster (never fails a check).</p>
<table><tr><th>status</th><th>series</th><th>machine</th><th>commits</th><th>change</th>
<th>noise</th><th>confirmation</th><th>why</th></tr>
{body}
</table></body></html>
""",
    )


def _write_explain_page(path: Path, finding: Finding, explain: ExplainRecord) -> None:
    table = html.escape(explain.table)
    title = html.escape(f"{finding.key.benchmark}({finding.key.case}) {finding.range_label}")
    write_atomic(
        path,
        f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}} pre{{font-size:13px}}</style></head>
<body><p><a href="../findings.html">&larr; findings</a></p>
<h1>What got slower: {title}</h1>
<p>{html.escape(explain.headline)}</p>
<pre>{table}</pre>
<p>Profiles: <code>{html.escape(explain.profile_dir)}</code></p>
</body></html>
""",
    )


def _add_nav_link(index_html: Path) -> None:
    text = index_html.read_text("utf-8")
    if NAV_ID in text:
        return
    anchor = '<li id="nav-li-regressions">'
    at = text.find(anchor)
    if at < 0:
        return
    end = text.index("</li>", at) + len("</li>")
    link = f'\n\t<li id="{NAV_ID}"><a href="{PAGES}/findings.html">Findings (fwdasv)</a></li>'
    write_atomic(index_html, text[:end] + link + text[end:])
