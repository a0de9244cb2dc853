"""`fwdasv.analysis.publish.publish`: asv's site with fwdasv's findings on its Regressions page and
feed, and a site still written when a result file cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import STEP_INDEX, copy_project, finding_of, invoke_cli, result_file, truncate_half

from fwdasv.analysis.findings.verdict_file import VERDICTS_FILE
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import Status


@pytest.mark.slow
def test_publish_puts_the_findings_into_asvs_regressions_page_and_feed(
    stepped, tmp_path: Path
) -> None:
    import xml.etree.ElementTree as ET

    project = copy_project(stepped, tmp_path)
    record_verdict(project, finding_of(project, stepped.benchmark), status=Status.CONFIRMED)
    verdicts = (project.results_dir / VERDICTS_FILE).read_bytes()
    listed = invoke_cli(project, "--format", "json")
    result = invoke_cli(project, command="publish")
    assert result.exit_code == 0, result.output
    assert "2 finding(s): 1 confirmed, 1 regression" in result.stdout

    html = project.html_dir
    index = json.loads((html / "index.json").read_text())
    revision = {commit: int(rev) for rev, commit in index["revision_to_hash"].items()}
    step = stepped.hashes[STEP_INDEX]
    entries = json.loads((html / "regressions.json").read_text())["regressions"]
    # asv's 7-item entries: name [status], graph, graph params, param index, latest, best, jumps.
    assert all(len(entry) == 7 for entry in entries), entries
    by_name = {entry[0]: entry for entry in entries}
    assert set(by_name) == {
        "bench.Drawn.track_latency('decode_bs8') [confirmed]",
        # Without parameters, "()" keeps the status out of the name asv reads before "(".
        "bench.Plain.track_latency() [regression]",
    }, by_name
    drawn = by_name["bench.Drawn.track_latency('decode_bs8') [confirmed]"]
    plain = by_name["bench.Plain.track_latency() [regression]"]
    assert (drawn[3], plain[3]) == (0, None)  # the case's index in asv's params
    listed_graphs = {e["graph_path"] for e in json.loads(listed.stdout)["regressions"]}
    assert {drawn[1], plain[1]} == listed_graphs  # the listing names the published graphs
    for name, graph, _graph_params, _idx, latest, best, jumps in (drawn, plain):
        assert (html / graph).is_file(), (name, graph)
        ((before_rev, after_rev, before, after),) = jumps
        # One commit in the range: asv's null first revision.
        assert before_rev is None and after_rev == revision[step], jumps
        assert 1.015 < after / before < 1.025 and best <= latest

    feed = ET.parse(html / "regressions.xml").getroot()
    atom = "{http://www.w3.org/2005/Atom}"
    titles = [e.find(f"{atom}title").text for e in feed.iter(f"{atom}entry")]
    assert len(titles) == 2, titles
    assert any(t.endswith("bench.Drawn.track_latency('decode_bs8') [confirmed]") for t in titles)
    assert any(t.endswith("bench.Plain.track_latency() [regression]") for t in titles)
    for entry in feed.iter(f"{atom}entry"):
        link = entry.find(f"{atom}link").attrib["href"]
        assert f"commits={step}" in link and "index.html#bench." in link, link
        # The commit's link (asv's feed code: the whole hash) lands on the commit's row.
        content = entry.find(f"{atom}content").text
        assert f'href="fwdasv/findings.html#{step}"' in content, content

    page = (html / "fwdasv" / "findings.html").read_text()
    assert f"<code id='{step}'>{step}</code>" in page
    assert "bench.Drawn.track_latency(decode_bs8)" in page
    assert "<td class='confirmed'>confirmed</td>" in page
    assert "<td class='regression'>regression</td>" in page
    assert step[:8] in page and stepped.subjects[STEP_INDEX] in page
    nav = (html / "index.html").read_text()
    assert '<li id="nav-li-fwdasv"><a href="fwdasv/findings.html">' in nav

    # The listing still reads results_dir: the same without the site, the verdicts untouched.
    import shutil

    shutil.rmtree(html)
    again = invoke_cli(project, "--format", "json")
    assert again.exit_code == listed.exit_code == 1
    assert json.loads(again.stdout) == json.loads(listed.stdout)
    assert (project.results_dir / VERDICTS_FILE).read_bytes() == verdicts


@pytest.mark.slow
def test_publish_fails_on_an_unreadable_result_and_still_writes_the_site(
    step_free, tmp_path: Path
) -> None:
    project = copy_project(step_free, tmp_path)
    path = result_file(project, step_free.hashes[3])
    truncate_half(path)
    result = invoke_cli(project, command="publish")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr
    assert "1 result file could not be read" in result.stdout
    # asv reads the results at three of its stages and named the file at each: once now.
    said = [line for line in result.stdout.splitlines() if "Error parsing JSON" in line]
    assert len(said) == 1 and str(path) in said[0], said
    assert "Generating output for Regressions" in result.stdout  # its other lines stay
    assert (project.html_dir / "index.json").is_file()
    again = invoke_cli(project, "--skip-unreadable", command="publish")
    assert again.exit_code == 0, again.output
    assert str(path) in again.stderr


@pytest.mark.slow
def test_the_sites_lists_links_and_pages_hold(stepped, tmp_path: Path) -> None:
    """The Benchmark list shows the newest value and the finding's change at its commit;
    asv's Regressions page lists what gates first; a commit link lands on a row of fwdasv's
    commits page (the project names no commit URL); the kernel-diff page names its profiles
    relative to the project and wraps its lines."""
    from fwdasv.analysis.findings.verdict_file import ExplainRecord
    from fwdasv.analysis.publish.listing import newest_point

    project = copy_project(stepped, tmp_path)
    drawn = finding_of(project, stepped.benchmark)
    root = project.config_path.parent.resolve()
    long_row = "aten::scaled_dot_product_attention " + "x" * 300
    explain = ExplainRecord(
        headline="+12.0 us per forward: aten::mm slower",
        table=f"{long_row}\n{root}/tinylm/model.py:39 attention",
        top5=("aten::mm",),
        explained_top5_pct=100.0,
        total_delta_us=12.0,
        profile_dir=str(root / ".fwdasv-explain" / "a-b-forward-case"),
    )
    record_verdict(project, drawn, status=Status.CONFIRMED, explain=explain)
    result = invoke_cli(project, command="publish")
    assert result.exit_code == 0, result.output
    html = project.html_dir
    index = json.loads((html / "index.json").read_text())
    revision = {commit: int(rev) for rev, commit in index["revision_to_hash"].items()}
    step = stepped.hashes[STEP_INDEX]

    # asv's Regressions page: the confirmed finding before the regression.
    entries = json.loads((html / "regressions.json").read_text())["regressions"]
    assert [e[0].rsplit(" ", 1)[1] for e in entries] == ["[confirmed]", "[regression]"]

    # The Benchmark list: newest value, the finding's change, its commit.
    confirmed = finding_of(project, stepped.benchmark)
    summary = html / confirmed.to_json()["graph_path"].replace(stepped.benchmark, "summary")
    (row,) = [r for r in json.loads(summary.read_text()) if r["name"] == stepped.benchmark]
    graph = html / confirmed.to_json()["graph_path"]
    assert (row["last_rev"], row["last_value"]) == newest_point(graph, row["idx"])
    shown_pct = 100 * (row["last_value"] / row["prev_value"] - 1)
    assert shown_pct == pytest.approx(confirmed.percent), row
    assert row["change_rev"] == [None, revision[step]]  # one commit: asv's null first

    # Commit links: fwdasv's commits page, a row per published commit, as asv shows hashes.
    assert index["show_commit_url"] == "fwdasv/findings.html#"
    page = (html / "fwdasv" / "findings.html").read_text()
    for commit in revision:
        assert f"<tr id='{commit[:8]}'>" in page, commit
    assert stepped.subjects[STEP_INDEX] in page
    assert "index.html#" + stepped.benchmark in page  # the series links to its asv graph

    # The kernel-diff page.
    (diff_page,) = (html / "fwdasv" / "explain").glob("*.html")
    diff = diff_page.read_text()
    assert str(root) not in diff, "an absolute path of the project on the page"
    assert "<code>.fwdasv-explain/a-b-forward-case</code>" in diff
    assert "tinylm/model.py:39 attention" in diff
    assert "white-space:pre-wrap" in diff and long_row in diff
    assert f'href="explain/{diff_page.name}"' in page
