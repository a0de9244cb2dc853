"""`fwdasv publish`: asv's site, with fwdasv's findings where asv lists regressions.

After `asv publish` (and the site made to work offline), the findings of the stored
results (`fwdasv.analysis.findings.findings`) replace asv's fixed-threshold list:
`html/regressions.json` in asv's format, the status after the entry's name
(`forward.TinyLM.track_latency('prefill_512') [confirmed]`; `bench.Plain.track_latency()
[regression]` without parameters), what gates first (confirmed, regression, suspected,
not-reproduced, drift last: ROW_ORDER), so asv's Regressions page shows them and its
links still work (they use the name before `(`); `html/regressions.xml`, the Atom
feed, by asv's own feed code; asv's Benchmark list with each series' newest value and
finding (`publish_list`); fwdasv's findings, commits and kernel-diff pages
(`publish_pages`), linked from the navigation bar; and asv's commit links pointed at a
page (`fwdasv.asv.site_patches`). Inputs a user can get wrong (results a file, no
benchmarks.json yet, html_dir a file) are refused before asv runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from asv.config import Config
from asv.plugins.regressions import Regressions

from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.findings import Found, scan
from fwdasv.analysis.findings.graph_paths import graph_file_path
from fwdasv.analysis.publish.listing import entry_name, rewrite_summaries
from fwdasv.analysis.publish.pages import (
    PAGES,
    SiteCommit,
    SiteFinding,
    write_explain_page,
    write_findings_page,
)
from fwdasv.analysis.rules.status import Status, TriageState
from fwdasv.asv.project import AsvError, AsvProject, publish_site
from fwdasv.asv.site_patches import keep_entry_order, link_commits
from fwdasv.core.errors import UserError
from fwdasv.core.files import write_atomic

NAV_ID = "nav-li-fwdasv"
# asv's Regressions page lists the entries in the file's order: what gates first.
ROW_ORDER = (
    Status.CONFIRMED,
    Status.REGRESSION,
    Status.SUSPECTED,
    Status.NOT_REPRODUCED,
    Status.DRIFT,
)
# Then grouped by what a person said (`fwdasv triage`): untriaged first, closed last.
TRIAGE_ORDER = (
    None,
    TriageState.OPEN,
    TriageState.ACKNOWLEDGED,
    TriageState.ACCEPTED,
    TriageState.FIXED_BY,
    TriageState.INVALID,
)
SUBJECTS_PER_GIT = 500  # commits per `git log --no-walk` (an argv stays far below its limit)


class PublishError(UserError):
    """The project cannot be published as it is (what to run or fix is in the message)."""


@contextlib.contextmanager
def _in_directory(path: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def check_publishable(project: AsvProject) -> None:
    """Refuse, before `asv publish` runs, what asv would answer with a traceback or a hint
    about its own commands."""
    results, html_dir = project.results_dir, project.html_dir
    if results.exists() and not results.is_dir():
        raise PublishError(f"results_dir {results} is a file, not asv's results directory")
    if not (results / "benchmarks.json").is_file():
        raise PublishError(
            f"nothing to publish: {results} has no benchmarks.json yet; measure first "
            f"(`fwdasv hw machine`, then `asv run --record-samples --machine NAME ALL` in "
            f"{project.config_path.parent})"
        )
    if html_dir.exists() and not html_dir.is_dir():
        raise PublishError(
            f'html_dir {html_dir} is a file: move it away, or set another "html_dir" in '
            f"{project.config_path}"
        )


def publish(project: AsvProject, echo: Callable[[str], None] | None = print) -> Found:
    """asv publish, then the findings written into the site; returns them, and the result
    files that could not be read (asv publish skips them too)."""
    project.verdict_settings()  # a malformed settings block is refused before any work
    check_publishable(project)
    publish_site(project, echo=echo)
    found = scan(project, improvements=True)
    write_site_findings(project, found.findings, found.warnings)
    return found


def write_site_findings(
    project: AsvProject, found: Sequence[Finding], warnings: Sequence[str] = ()
) -> None:
    html_dir = project.html_dir
    url = link_commits(html_dir)
    keep_entry_order(html_dir)
    index = json.loads((html_dir / "index.json").read_text())
    # asv's list is of regressions; improvements are on the findings page only.
    slower = [f for f in found if f.status != Status.IMPROVEMENT]
    entries = asv_entries(slower, index, project.branches[0] if project.branches else None)
    write_atomic(
        html_dir / "regressions.json", json.dumps({"regressions": entries}, separators=(",", ":"))
    )
    _write_feed(project, index, entries, url)
    rewrite_summaries(html_dir, found, index)
    _write_pages(project, found, index, warnings)
    _add_nav_link(html_dir / "index.html")


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
    for finding in ordered(found):
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
                status_name(
                    name, finding.status + (f", {finding.triage}" if finding.triage else "")
                ),
                graph_path,
                varying,
                param_index,
                latest,
                finding.best,
                [jump],
            ]
        )
    return out


def ordered(found: Sequence[Finding]) -> list[Finding]:
    """Grouped by triage state (TRIAGE_ORDER: untriaged first), then what gates first
    (ROW_ORDER; any other status after), the largest change first."""
    rank = {status: at for at, status in enumerate(ROW_ORDER)}
    state: dict[str | None, int] = {word: at for at, word in enumerate(TRIAGE_ORDER)}
    return sorted(
        found,
        key=lambda f: (
            state.get(f.triage, len(TRIAGE_ORDER)),
            rank.get(f.status, len(ROW_ORDER)),
            -f.percent,
        ),
    )


def status_name(name: str, status: str) -> str:
    """The entry's name with its status after it.

    asv's page and feed take the benchmark's name as what comes before the
    first "(" (`benchmark_name.replace(/\\(.*/, '')`, `name[: name.index('(')]`):
    a benchmark without parameters gets an empty "()", else its status would be
    read as part of its name (a KeyError in the feed, a broken page).
    """
    return f"{name if '(' in name else name + '()'} [{status}]"


def _write_feed(
    project: AsvProject, index: Mapping[str, Any], entries: list[list[Any]], url: str
) -> None:
    """asv's own Atom feed code over fwdasv's entries (stable ids: name and commits), its
    commit links to `url` as the site's."""
    revision_to_hash = {int(rev): commit for rev, commit in index["revision_to_hash"].items()}
    revisions = {commit: rev for rev, commit in revision_to_hash.items()}
    with _in_directory(project.config_path.parent):
        conf = Config.load(str(project.config_path))
        conf.show_commit_url = url
        Regressions._save_feed(conf, index["benchmarks"], entries, revisions, revision_to_hash)


def finding_id(finding: Finding) -> str:
    text = json.dumps(finding.ident.to_json(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def graph_link(finding: Finding, index: Mapping[str, Any], branch: str | None) -> str | None:
    """asv's graph page of the finding's series with the step's commits marked, as asv's
    Regressions page links it (relative to fwdasv's pages)."""
    info = index.get("benchmarks", {}).get(finding.key.benchmark)
    if not isinstance(info, dict):
        return None
    _, varying = _graph(finding, index, branch)
    query: dict[str, object] = dict(varying)
    _, position = entry_name(finding, index)
    if position is not None:
        import itertools

        combo = list(itertools.product(*info["params"]))[position]
        query.update({f"p-{n}": v for n, v in zip(info["param_names"], combo, strict=True)})
    length = int(index.get("hash_length") or 8)
    after = finding.after_commit[:length]
    single = len(finding.commits) <= 1
    query["commits"] = after if single else f"{finding.before_commit[:length]}-{after}"
    text = "&".join(
        f"{k}={urllib.parse.quote('[none]' if v is None else str(v), safe='')}"
        for k, v in query.items()
    )
    return f"../index.html#{finding.key.benchmark}?{text}"


def _git_commits(
    project: AsvProject, hashes: Sequence[str]
) -> tuple[dict[str, tuple[int, str]], str | None]:
    """Each commit's date (ms since the epoch) and subject from git, and a warning when git
    cannot give them."""
    known: dict[str, tuple[int, str]] = {}
    for start in range(0, len(hashes), SUBJECTS_PER_GIT):
        chunk = hashes[start : start + SUBJECTS_PER_GIT]
        try:
            listed = project.git("log", "--no-walk=unsorted", "--format=%H%x00%ct%x00%s", *chunk)
        except AsvError as error:
            return known, f"commit subjects not shown: {error}"
        for line in listed.splitlines():
            full, seconds, subject = line.split("\x00", 2)
            known[full] = (int(seconds) * 1000, subject)
    return known, None


def _write_pages(
    project: AsvProject,
    found: Sequence[Finding],
    index: Mapping[str, Any],
    warnings: Sequence[str],
) -> None:
    pages = project.html_dir / PAGES
    root = project.config_path.parent.resolve()
    branch = project.branches[0] if project.branches else None
    shown = []
    for finding in ordered(found):
        item = SiteFinding(finding, finding_id(finding), graph_link(finding, index, branch))
        shown.append(item)
        explain = finding.explain_record
        if explain is not None:
            write_explain_page(pages / "explain" / f"{item.ident}.html", finding, explain, root)
    # Every published commit, and those in a finding's range that were not measured.
    revisions = {commit: int(rev) for rev, commit in index.get("revision_to_hash", {}).items()}
    dates = index.get("revision_to_date", {})
    hashes = list(dict.fromkeys([*revisions, *(c.hash for f in found for c in f.commits)]))
    known, missing = _git_commits(project, hashes)
    if missing is not None and not any(w.startswith("commit subjects") for w in warnings):
        warnings = [*warnings, missing]
    commits = []
    for commit in hashes:
        rev = revisions.get(commit)
        date, subject = known.get(commit, (dates.get(str(rev)), None))
        commits.append(SiteCommit(rev, commit, date, subject))
    write_findings_page(
        pages,
        str(index.get("project", "")),
        shown,
        commits,
        int(index.get("hash_length") or 8),
        warnings,
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
