"""fwdasv regressions: the findings of the stored results, with a CI exit status.

fwdasv's findings (`fwdasv.analysis.findings`), read from results_dir with no
site: 12-commit histories of seeded draws stored by real asv runs (a +2% step,
no step, a step the environment canary makes too), the verdicts file, `fwdasv
publish` putting the findings into asv's Regressions page and Atom feed, and
the demo model's history measured by asv.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwdasv.analysis import findings
from fwdasv.analysis.confirm import judge_ab
from fwdasv.analysis.findings import graph_file_path
from fwdasv.analysis.noise import Noise
from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import ConfirmationRecord
from fwdasv.asv.project import AsvProject
from fwdasv.cli import main


def test_graph_paths_match_asv() -> None:
    """Where `asv publish` writes a graph: the findings name it (`graph_path`)."""
    from asv.graph import Graph

    graph = {"machine": "box|1", "os": "Linux", "python": "3.11", "branch": "main"}
    for params in (graph, {**graph, "machine": "other"}, {"a": None, "b": "", "c": "x/y<z"}):
        assert graph_file_path(params, "m.S.t") == Graph.get_file_path(params, "m.S.t")


def test_missing_results_is_one_clear_error(tmp_path: Path) -> None:
    # fwdasv regressions reads results_dir (no site needed): without one, one line, status 2.
    (tmp_path / "asv.conf.json").write_text(json.dumps({"version": 1, "repo": "."}))
    result = CliRunner().invoke(main, ["regressions", "--config", str(tmp_path / "asv.conf.json")])
    assert result.exit_code == 2
    assert "no such results directory" in result.stderr
    assert str(tmp_path / "results") in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- judge_series: the decision on numbers, no files and no git -----------------------------

ORDER = [f"{i:02d}" * 20 for i in range(12)]  # twelve fake 40-character hashes


def _series(
    benchmark: str, levels: list[float], case: str = "decode", unit: str = "seconds", seed: int = 0
) -> findings.Series:
    """Five samples a commit around each level, 0.2% apart (seeded)."""
    import random

    rng = random.Random(seed)
    key = findings.SeriesKey("box", "virtualenv-py3.11", benchmark, case)
    history = [[level * (1 + 0.002 * rng.gauss(0, 1)) for _ in range(5)] for level in levels]
    return findings.Series(key, unit, {"case": case} if case else {}, history)


STEPPED = [1.0] * 6 + [1.05] * 6  # +5% at commit 6


def test_judge_series_finds_the_step_of_each_latency_series() -> None:
    latency = _series("bench.S.track_latency", STEPPED)
    flat = _series("bench.S.track_latency", [1.0] * 12, case="prefill", seed=1)
    spread = _series("bench.S.track_spread_pct", STEPPED, unit="unit", seed=2)
    canary = _series("bench.CanaryS.track_latency", STEPPED, case="", seed=3)
    everything = {s.key: s for s in (latency, flat, spread, canary)}

    found = findings.judge_series(ORDER, {latency.key: latency, flat.key: flat, spread.key: spread})
    (finding,) = found  # not the flat case, not a series in another unit
    assert finding.key == latency.key and finding.status == Status.REGRESSION
    assert (finding.before_commit, finding.after_commit) == (ORDER[5], ORDER[6])
    assert 4.5 < finding.percent < 5.5 and finding.latest == pytest.approx(1.05, rel=0.01)
    assert finding.gating and finding.commits == () and finding.verdict is None
    assert finding.graph_params == {}  # the I/O edge (`find`) adds what asv publishes under

    # The machine's canary stepped at the same commit: drift, which does not gate; the
    # canary itself is never a finding.
    (drift,) = findings.judge_series(ORDER, everything)
    assert drift.key == latency.key and drift.status == Status.DRIFT and not drift.gating
    # A minimum effect above the step, or a filter that leaves the series out: nothing.
    assert findings.judge_series(ORDER, everything, min_effect_pct=6) == []
    assert findings.judge_series(ORDER, everything, include=lambda k: k.case == "prefill") == []


def test_judge_series_takes_a_fallen_gpu_clock_for_drift() -> None:
    latency = _series("bench.S.track_latency", STEPPED)
    clock = _series(
        "bench.S.track_sm_clock_mhz", [1980.0] * 6 + [1980 / 1.05] * 6, unit="MHz", seed=4
    )
    (finding,) = findings.judge_series(ORDER, {latency.key: latency, clock.key: clock})
    assert finding.status == Status.DRIFT
    other_case = _series(
        "bench.S.track_sm_clock_mhz", clock.medians(), case="prefill", unit="MHz", seed=5
    )
    (finding,) = findings.judge_series(ORDER, {latency.key: latency, other_case.key: other_case})
    assert finding.status == Status.REGRESSION  # another case's clock says nothing


# --- fwdasv's findings, from results_dir --------------------------------------------------

# 12 commits, +2% from commit 6 on: 1% noise on each of 25 samples (a commit's median
# varies by about 0.3%), the step about 7 times that. Drawn (a case), Plain (no
# parameters) and an environment canary that does not move.
STEP_INDEX = 6
SCALES = (1.0,) * STEP_INDEX + (1.02,) * 6
FLAT_CANARY = (1.0,) * len(SCALES)


@pytest.fixture(scope="module")
def stepped(drawn_history):
    return drawn_history("stepped", SCALES, plain=True, canary=FLAT_CANARY)


@pytest.fixture(scope="module")
def step_free(drawn_history):
    return drawn_history("step-free", (1.0,) * len(SCALES))


@pytest.fixture(scope="module")
def drifted(drawn_history):
    """The series and the machine's canary step up together at commit 6: the machine changed."""
    return drawn_history("drifted", SCALES, canary=SCALES)


def _invoke(project, *args: str, command: str = "regressions"):
    return CliRunner().invoke(main, [command, "--config", str(project.config_path), *args])


def _copy(history, tmp_path: Path) -> AsvProject:
    """The history's asv project (configuration, benchmarks, results) in a directory of its own."""
    import shutil

    root = Path(history.project.config_path).parent
    shutil.copytree(root, tmp_path / "asv", ignore=shutil.ignore_patterns("html", ".fwdasv-*"))
    return AsvProject.load(tmp_path / "asv" / "asv.conf.json")


# The fields `fwdasv regressions --format json` had before the verdicts: kept for automation.
TODAYS_FIELDS = {
    "benchmark",
    "entry",
    "params",
    "case",
    "machine",
    "env_name",
    "before_commit",
    "after_commit",
    "single_commit",
    "commits",
    "before",
    "after",
    "percent",
    "latest",
    "best",
    "unit",
    "threshold_pct",
    "above_threshold",
    "graph_params",
    "graph_path",
}


@pytest.mark.slow
def test_json_from_results_only_finds_the_step(stepped) -> None:
    project = stepped.project
    assert not project.html_dir.exists()  # nothing published: results_dir is enough
    step = stepped.hashes[STEP_INDEX]
    result = _invoke(project, "--format", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert (document["count"], document["gating"], document["above_threshold"]) == (2, 2, 2)
    entries = {entry["benchmark"]: entry for entry in document["regressions"]}
    # Two latency series stepped; the canary is never a finding itself.
    assert set(entries) == {stepped.benchmark, stepped.plain}, entries
    for benchmark, entry in entries.items():
        assert set(entry) >= TODAYS_FIELDS, TODAYS_FIELDS - set(entry)
        assert entry["status"] == "regression"
        # after_commit: the first commit at the new level; before_commit the last at the old.
        assert entry["after_commit"] == step, (benchmark, entry["after_commit"])
        assert entry["before_commit"] == stepped.hashes[STEP_INDEX - 1]
        assert entry["single_commit"] is True
        assert [c["hash"] for c in entry["commits"]] == [step]
        assert entry["commits"][0]["subject"] == stepped.subjects[STEP_INDEX]
        assert 1.5 < entry["percent"] < 2.5, entry["percent"]
        assert entry["machine"] == stepped.machine and entry["unit"] == "seconds"
        assert entry["env_name"].startswith("existing-")
        # Each series' own noise: a commit's median varies by about 0.3% here.
        assert 0.1 < entry["noise_pct"] < 0.6, entry["noise"]
        assert entry["noise"]["noise_pct"] == entry["noise_pct"]
        assert entry["percent"] > 3 * entry["noise_pct"]
        assert entry["z"] >= entry["z_threshold"]
        assert entry["above_threshold"] is True and entry["threshold_pct"] == 0.3
        assert entry["verdict"] is None
        assert entry["best"] == entry["before"] <= entry["latest"]
        # Where `asv publish` puts the series' graph (checked against the site in the
        # publish test): this machine, its python, the branch.
        assert entry["graph_params"]["machine"] == stepped.machine
        assert entry["graph_params"]["branch"] == "main"
        assert entry["graph_path"].startswith("graphs/") and "/branch-main/" in entry["graph_path"]
        assert entry["graph_path"].endswith(f"/{benchmark}.json")
    drawn = entries[stepped.benchmark]
    assert drawn["params"] == {"case": "decode_bs8"} and drawn["case"] == "decode_bs8"
    assert drawn["entry"] == "bench.Drawn.track_latency(decode_bs8)"
    assert entries[stepped.plain]["params"] == {} and entries[stepped.plain]["case"] == ""
    assert not project.html_dir.exists()


@pytest.mark.slow
def test_table_markdown_and_filters(stepped) -> None:
    step = stepped.hashes[STEP_INDEX]
    result = _invoke(stepped.project)
    assert result.exit_code == 1, result.output
    assert "regression" in result.stdout and step[:8] in result.stdout
    assert stepped.subjects[STEP_INDEX] in result.stdout
    assert result.stdout.rstrip().endswith("2 finding(s): 2 regression")

    result = _invoke(stepped.project, "--format", "markdown")
    assert result.exit_code == 1
    assert result.stdout.startswith("### Performance regressions: 2 regression")
    assert "| regression | bench.Drawn.track_latency | decode_bs8 | testbox |" in result.stdout
    assert f"{step[:8]} {stepped.subjects[STEP_INDEX]}" in result.stdout

    result = _invoke(stepped.project, "--bench", "Drawn", "--format", "json")
    assert [e["benchmark"] for e in json.loads(result.stdout)["regressions"]] == [stepped.benchmark]
    # A minimum effect above the step: nothing to report, exit 0 (--threshold: its old name).
    for option in ("--min-effect", "--threshold"):
        result = _invoke(stepped.project, option, "5")
        assert result.exit_code == 0, result.output
        assert "No regressions" in result.stdout
    result = _invoke(stepped.project, "--min-effect", "1")
    assert result.exit_code == 1
    result = _invoke(stepped.project, "--bench", "no-such-benchmark")
    assert result.exit_code == 0 and "No regressions" in result.stdout
    result = _invoke(stepped.project, "--machine", "no-such-machine")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_step_free_history_exits_0_with_no_findings(step_free) -> None:
    result = _invoke(step_free.project, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["regressions"] == [] and document["count"] == 0


@pytest.mark.slow
def test_a_step_the_canary_makes_too_is_drift_and_exits_0(drifted) -> None:
    result = _invoke(drifted.project, "--format", "json")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["regressions"]
    assert entry["benchmark"] == drifted.benchmark
    assert entry["status"] == "drift"
    assert entry["after_commit"] == drifted.hashes[STEP_INDEX]
    assert entry["above_threshold"] is False
    assert "drift" in _invoke(drifted.project).stdout


# --- the verdicts file --------------------------------------------------------------------


def _finding(project, benchmark: str) -> findings.Finding:
    (found,) = [f for f in findings.find(project) if f.key.benchmark == benchmark]
    return found


def _confirmation(b: list[float], finding: findings.Finding) -> ConfirmationRecord:
    """An A/B re-measure of 3 processes a side (A at 1.0), as `fwdasv confirm` stores it."""
    figures = judge_ab([1.0, 1.0005, 0.9995], b, Noise(0.2, 0.2, 0.05, 60, "history", 35.0))
    return ConfirmationRecord.of(figures, finding.before_commit, finding.after_commit)


@pytest.mark.slow
def test_verdicts_are_appended_and_the_last_one_sets_the_status(stepped, tmp_path: Path) -> None:
    project = _copy(stepped, tmp_path)
    path = project.results_dir / findings.VERDICTS_FILE
    drawn = _finding(project, stepped.benchmark)
    confirmation = _confirmation([1.021, 1.0205, 1.0215], drawn)
    assert confirmation.figures.status == Status.CONFIRMED, confirmation.summary
    findings.record_verdict(project, drawn, status=Status.CONFIRMED, confirmation=confirmation)
    first = path.read_bytes()
    assert len(first.splitlines()) == 1
    (line,) = [json.loads(text) for text in first.splitlines()]
    assert line["finding"] == drawn.ident.to_json() and line["status"] == "confirmed"
    assert line["confirmation"] == confirmation.to_json()
    assert line["confirmation"]["summary"].startswith("confirmed: B +2.")
    assert list(line) == sorted(line)  # one JSON object a line, keys sorted

    result = _invoke(project, "--format", "json")
    assert result.exit_code == 1, result.output
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert entries[stepped.benchmark]["verdict"]["confirmation"] == confirmation.to_json()
    assert entries[stepped.plain]["status"] == "regression"  # another finding: untouched
    assert path.read_bytes() == first  # reading never writes

    # Plain ruled out: it no longer gates; the confirmed one still does.
    plain = _finding(project, stepped.plain)
    findings.record_verdict(project, plain, status=Status.NOT_REPRODUCED)
    result = _invoke(project, "--format", "json")
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.plain]["status"] == "not-reproduced"
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert result.exit_code == 1
    # The last line about a finding wins; an undecided re-measure is no verdict: the
    # finding is a (gating) regression again, with that re-measure attached.
    undecided = _confirmation([1.01, 1.03, 0.99], drawn)
    assert undecided.figures.status == Status.UNDECIDED, undecided.summary
    findings.record_verdict(project, drawn, status=Status.UNDECIDED, confirmation=undecided)
    second = path.read_bytes()
    assert second.startswith(first) and len(second.splitlines()) == 3
    result = _invoke(project, "--format", "json")
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.benchmark]["status"] == "regression"
    assert entries[stepped.benchmark]["verdict"]["confirmation"] == undecided.to_json()
    assert result.exit_code == 1
    findings.record_verdict(project, drawn, status=Status.NOT_REPRODUCED)
    # A line without a re-measure keeps the one before it: the lines merge, the last wins.
    (merged,) = [f for f in findings.find(project) if f.key == drawn.key]
    assert merged.verdict is not None and merged.verdict.confirmation == undecided
    result = _invoke(project, "--format", "json")
    assert result.exit_code == 0, result.output
    assert {e["status"] for e in json.loads(result.stdout)["regressions"]} == {"not-reproduced"}
    assert path.read_bytes().startswith(second)


@pytest.mark.slow
def test_a_verdict_on_a_range_holds_for_the_narrower_range_found_later(
    stepped, tmp_path: Path
) -> None:
    """As after a bisect: the confirmation was recorded while the finding's range still
    reached one commit further; the finding now ends inside that range."""
    from dataclasses import replace

    project = _copy(stepped, tmp_path)
    drawn = _finding(project, stepped.benchmark)
    step = stepped.hashes[STEP_INDEX]
    assert drawn.after_commit == step
    later = stepped.hashes[STEP_INDEX + 1]
    wider = replace(
        drawn,
        after_commit=later,
        commits=(findings.Commit(step), findings.Commit(later)),
    )
    findings.record_verdict(project, wider, status=Status.CONFIRMED)
    entries = {
        e["benchmark"]: e
        for e in json.loads(_invoke(project, "--format", "json").stdout)["regressions"]
    }
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert entries[stepped.benchmark]["verdict"]["range_commits"] == [step, later]
    assert entries[stepped.plain]["status"] == "regression"  # another series: untouched

    # A verdict about a range that does not hold the finding's first new commit is not its.
    elsewhere = replace(
        _finding(project, stepped.plain),
        before_commit=stepped.hashes[STEP_INDEX + 1],
        after_commit=stepped.hashes[STEP_INDEX + 2],
        commits=(findings.Commit(stepped.hashes[STEP_INDEX + 2]),),
    )
    findings.record_verdict(project, elsewhere, status=Status.NOT_REPRODUCED)
    entries = {
        e["benchmark"]: e
        for e in json.loads(_invoke(project, "--format", "json").stdout)["regressions"]
    }
    assert entries[stepped.plain]["status"] == "regression"


@pytest.mark.slow
def test_an_unreadable_verdict_line_is_one_clear_error(stepped, tmp_path: Path) -> None:
    project = _copy(stepped, tmp_path)
    path = project.results_dir / findings.VERDICTS_FILE
    findings.record_verdict(project, _finding(project, stepped.benchmark), status=Status.CONFIRMED)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('{"finding": {"machine": "testbox"}, "status": "confirmed"\n')
    before = path.read_bytes()
    for command in ("regressions", "publish"):
        result = _invoke(project, command=command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: {path}:2: not a fwdasv verdict line"), line
        assert path.read_bytes() == before  # the file is never rewritten, not even to fix it


def _with_settings(project: AsvProject, block: object) -> AsvProject:
    raw = json.loads(project.config_path.read_text())
    raw["fwdasv"] = block
    project.config_path.write_text(json.dumps(raw, indent=2))
    return AsvProject.load(project.config_path)


@pytest.mark.slow
def test_the_configurations_min_effect_is_the_default_and_the_flag_overrides_it(
    stepped, tmp_path: Path
) -> None:
    # The step is about 2%: a configured minimum effect of 5% leaves it out.
    project = _with_settings(_copy(stepped, tmp_path), {"min_effect_pct": 5, "confirm": False})
    quiet = _invoke(project, "--format", "json")
    assert quiet.exit_code == 0, quiet.output
    assert json.loads(quiet.stdout)["count"] == 0
    loud = _invoke(project, "--format", "json", "--min-effect", "1")
    assert loud.exit_code == 1, loud.output
    document = json.loads(loud.stdout)
    assert document["count"] == 2
    assert {entry["threshold_pct"] for entry in document["regressions"]} == {1.0}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("block", "named"),
    [
        ([1], "'fwdasv' must be an object"),
        ({"min_effect": 1}, "unknown key(s) min_effect"),
        ({"min_effect_pct": -1}, "min_effect_pct must be a number >= 0, not -1"),
        ({"min_effect_pct": "1"}, "min_effect_pct must be a number >= 0, not '1'"),
        ({"confirm": "yes"}, "confirm must be true or false, not 'yes'"),
    ],
)
def test_a_malformed_settings_block_is_one_line_naming_the_key(
    stepped, tmp_path: Path, block: object, named: str
) -> None:
    project = _with_settings(_copy(stepped, tmp_path), block)
    for command in ("regressions", "publish"):
        result = _invoke(project, command=command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: {project.config_path}: ") and named in line, line
    assert not project.html_dir.exists()  # publish refused before writing a site


# --- fwdasv publish ---------------------------------------------------------------------


@pytest.mark.slow
def test_publish_puts_the_findings_into_asvs_regressions_page_and_feed(
    stepped, tmp_path: Path
) -> None:
    import xml.etree.ElementTree as ET

    project = _copy(stepped, tmp_path)
    findings.record_verdict(project, _finding(project, stepped.benchmark), status=Status.CONFIRMED)
    verdicts = (project.results_dir / findings.VERDICTS_FILE).read_bytes()
    listed = _invoke(project, "--format", "json")
    result = _invoke(project, command="publish")
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

    page = (html / "fwdasv" / "findings.html").read_text()
    assert "bench.Drawn.track_latency(decode_bs8)" in page
    assert "<td class='confirmed'>confirmed</td>" in page
    assert "<td class='regression'>regression</td>" in page
    assert step[:8] in page and stepped.subjects[STEP_INDEX] in page
    nav = (html / "index.html").read_text()
    assert '<li id="nav-li-fwdasv"><a href="fwdasv/findings.html">' in nav

    # The listing still reads results_dir: the same without the site, the verdicts untouched.
    import shutil

    shutil.rmtree(html)
    again = _invoke(project, "--format", "json")
    assert again.exit_code == listed.exit_code == 1
    assert json.loads(again.stdout) == json.loads(listed.stdout)
    assert (project.results_dir / findings.VERDICTS_FILE).read_bytes() == verdicts


# --- the demo model's history --------------------------------------------------------------


@pytest.mark.slow
def test_listing_of_the_demo_history(demo_history) -> None:
    """fwdasv's findings on real engine timings: the injected commit is found.

    The injected commit slows the demo's prefill by about 45% (more on a loaded
    box), far above host-timing noise once a round or two of samples are in.
    """
    assert demo_history.status == 0, demo_history.output[-3000:]
    project = demo_history.project
    result = _invoke(project, "--format", "json")
    document = json.loads(result.stdout)
    found = document["regressions"]
    assert {f["after_commit"] for f in found} <= set(demo_history.hashes)
    assert result.exit_code == (1 if document["gating"] else 0), result.output

    latency = [f for f in found if f["benchmark"] == demo_history.benchmark]
    hits = [f for f in latency if demo_history.slow_commit in {c["hash"] for c in f["commits"]}]
    assert hits, (
        f"fwdasv's findings do not flag the injected commit after {demo_history.passes} "
        f"pass(es) (found: {[(f['entry'], f['after_commit'][:8], f['percent']) for f in latency]})"
    )
    best = max(hits, key=lambda f: f["percent"])
    assert best["status"] == "regression" and best["percent"] > 10, best
    assert best["after_commit"] == demo_history.slow_commit
    assert best["before_commit"] == demo_history.hashes[demo_history.slow_index - 1]
    assert "Support attention logit soft-capping" in {c["subject"] for c in best["commits"]}
    assert best["machine"] == demo_history.machine
    assert best["percent"] > 3 * best["noise_pct"], best
    assert result.exit_code == 1
    # The published site (fwdasv publish) lists the same findings on asv's page.
    raw = json.loads((project.html_dir / "regressions.json").read_text())["regressions"]
    assert len(raw) == len(found)
    assert any(item[0].endswith(" [regression]") for item in raw)
    table = _invoke(project)
    assert demo_history.slow_commit[:8] in table.stdout


@pytest.mark.slow
def test_the_demo_reads_its_cases_noise_from_the_stored_history(demo_history) -> None:
    """What `fwdasv demo` weighs before measuring the commits in between: the noisiest of its
    latency cases on this machine, from the stored results."""
    from fwdasv.analysis import findings
    from fwdasv.analysis.noise import estimate_noise
    from fwdasv.demo.run import BENCHMARK, CASES, _noisiest_case

    assert demo_history.benchmark == BENCHMARK
    case, noise_pct = _noisiest_case(demo_history.project, demo_history.machine)
    _, series = findings.load_series(demo_history.project, demo_history.machine)
    each = {
        key.case: estimate_noise(s.history).noise_pct
        for key, s in series.items()
        if key.benchmark == BENCHMARK
    }
    assert set(each) == {c.partition("=")[0] for c in CASES}
    assert (case, noise_pct) == max(each.items(), key=lambda item: item[1]) and noise_pct > 0
