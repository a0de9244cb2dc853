"""fwdasv.analysis.findings and `fwdasv regressions`: the findings of the stored results.

fwdasv's findings (`fwdasv.analysis.findings`), read from results_dir with no
site: 12-commit histories of seeded draws stored by real asv runs (a +2% step,
no step, a step the environment canary makes too), the verdicts file, and
the demo model's history measured by asv (`fwdasv publish`: tests/test_publish.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import STEP_INDEX, copy_project, finding_of, invoke_cli

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


def test_a_paced_case_is_judged_by_its_relative_series_in_place_of_its_latency() -> None:
    # A paced suite (`reference = True`): its latency steps +30% at commit 6 with the
    # machine, its forward over the workload does not; an unpaced suite's latency is
    # judged as before, and a ratio of another name is telemetry.
    machine_step = [1.0] * 6 + [1.3] * 6
    latency = _series("bench.Paced.track_latency", machine_step)
    relative = _series("bench.Paced.track_relative", [2.0] * 12, unit="ratio", seed=1)
    other = _series("bench.Plain.track_latency", machine_step, seed=2)
    odd = _series("bench.Paced.track_odd", machine_step, unit="ratio", seed=3)
    everything = {s.key: s for s in (latency, relative, other, odd)}
    assert findings.judged_series(everything) == [relative.key, other.key]
    (found,) = findings.judge_series(ORDER, everything)
    assert found.key == other.key
    # The code slows the forward: the ratio steps, and that is the paced case's finding.
    slower = _series("bench.Paced.track_relative", [2.0] * 6 + [2.1] * 6, unit="ratio", seed=1)
    (paced,) = findings.judge_series(ORDER, {latency.key: latency, slower.key: slower})
    assert paced.key == slower.key and paced.status == Status.REGRESSION
    assert paced.after_commit == ORDER[6] and 4.5 < paced.percent < 5.5
    # Without its relative series (an older result) the case's latency is judged again.
    (plain,) = findings.judge_series(ORDER, {latency.key: latency})
    assert plain.key == latency.key and plain.percent > 25

    # The load rose at the same commit: the canary's latency stepped +30% with the
    # paced case's. The ratio has the machine's speed divided out, so that is no drift
    # of it; the canary's own ratio stepping with it is (the load slowed the forward
    # more than the workload).
    canary = _series("bench.CanaryS.track_latency", machine_step, case="", seed=4)
    both = {latency.key: latency, slower.key: slower, canary.key: canary}
    (still,) = findings.judge_series(ORDER, both)
    assert still.key == slower.key and still.status == Status.REGRESSION
    canary_ratio = _series(
        "bench.CanaryS.track_relative", [1.0] * 6 + [1.05] * 6, case="", unit="ratio", seed=5
    )
    (drift,) = findings.judge_series(ORDER, {**both, canary_ratio.key: canary_ratio})
    assert drift.key == slower.key and drift.status == Status.DRIFT
    # An unpaced case's latency is still told by the canary's latency.
    (told,) = findings.judge_series(ORDER, {other.key: other, canary.key: canary})
    assert told.status == Status.DRIFT


@pytest.mark.slow
def test_a_paced_suites_gate_follows_its_relative_series_through_asv(drawn_history) -> None:
    """Real asv results of a paced suite: the machine slows every latency by 30% at
    commit 3 (the unpaced suite's step is found, the paced suite's is not: its ratio holds),
    and the code slows the paced forward by 5% at commit 8 (a `track_relative` finding,
    exit 1). compare counts the ratio as it counts latency."""
    scales = (1.0,) * 3 + (1.3,) * 9
    paced = (1.0,) * 8 + (1.05,) * 4
    history = drawn_history("paced", scales, samples=10, paced=paced)
    result = invoke_cli(history.project, "--format", "json")
    assert result.exit_code == 1, result.output
    found = {(f["benchmark"], f["after_commit"]) for f in json.loads(result.output)["regressions"]}
    assert found == {
        (history.benchmark, history.hashes[3]),
        (history.paced, history.hashes[8]),
    }, found
    table = invoke_cli(history.project)
    assert "bench.Paced.track_relative" in table.output
    assert "bench.Paced.track_latency" not in table.output
    compared = CliRunner().invoke(
        main,
        ["compare", history.hashes[7], history.hashes[8], "--config",
         str(history.project.config_path), "--format", "json"],
    )  # fmt: skip
    assert compared.exit_code == 1, compared.output
    rows = {c["benchmark"]: c for c in json.loads(compared.stdout)["comparisons"]}
    assert rows[history.paced]["counted"] is True and rows[history.paced]["verdict"] == "worse"


def test_a_step_at_the_head_is_found_now_and_keeps_its_identity_and_confirmation(
    tmp_path: Path,
) -> None:
    from fwdasv.analysis.verdict_file import FindingVerdict, append_verdict, read_verdicts

    order = [f"{i:02d}" * 20 for i in range(16)]
    levels = [1.0] * 12 + [1.03] * 4  # +3% at commit 12
    full = _series("bench.S.track_latency", levels)

    def judged(commits: int) -> findings.Finding:
        part = findings.Series(full.key, full.unit, full.params, full.history[:commits])
        (only,) = findings.judge_series(order[:commits], {part.key: part})
        return only

    night = judged(13)  # the night the step lands: one commit shows it
    assert (night.status, night.showing_commits, night.step.edge) == (Status.SUSPECTED, 1, "head")
    assert night.after_commit == order[12] and not night.gating
    assert "suspected (1 commit)" in findings.format_findings([night], "table")
    two = judged(14)
    assert (two.status, two.showing_commits, two.ident) == (Status.REGRESSION, 2, night.ident)
    assert two.gating
    # Confirmed the night it landed (as nightly does), then the level holds: the same
    # finding (series and first new commit), its confirmation kept.
    path = tmp_path / findings.VERDICTS_FILE
    record = _confirmation([1.031, 1.0305, 1.0315], night)
    append_verdict(
        path,
        FindingVerdict(
            ident=night.ident,
            recorded_at="2026-12-02T00:00:00Z",
            before_commit=night.before_commit,
            range_commits=(night.after_commit,),
            status=Status.CONFIRMED,
            confirmation=record,
        ),
    )
    held = findings.apply_verdict(judged(16), read_verdicts(path))
    assert held.step.edge is None and held.ident == night.ident
    assert held.status == Status.CONFIRMED and held.verdict.confirmation == record
    shown = held.to_json()["re_measured"]
    assert shown["pair"] == f"{night.before_commit[:8]}..{night.after_commit[:8]}"
    assert "re-measured" in findings.format_findings([held], "table")


def test_improvements_are_findings_of_their_own_that_never_gate() -> None:
    faster = _series("bench.S.track_latency", [1.0] * 6 + [0.9] * 6)
    assert findings.judge_series(ORDER, {faster.key: faster}) == []  # not a regression
    (found,) = findings.judge_series(ORDER, {faster.key: faster}, improvements=True)
    assert found.status == Status.IMPROVEMENT and found.after_commit == ORDER[6]
    assert found.percent == pytest.approx(-10, abs=0.5) and not found.gating
    # A stored verdict never turns an improvement into something else.
    assert findings.apply_verdict(found, findings.StoredVerdicts({})) == found


def test_a_step_where_the_recorded_torch_or_driver_changed_is_drift() -> None:
    old, new = ("2.14.1", "570.1", "12.8"), ("2.14.0", "570.1", "12.8")
    for environments, status in [
        # torch changed (another environment installed it) at the step's commit: drift.
        ([old] * 6 + [new] * 6, Status.DRIFT),
        # A driver update at the step's commit: drift too.
        ([old] * 6 + [("2.14.1", "575.0", "12.8")] * 6, Status.DRIFT),
        # Changed elsewhere in the history, not across the step: the step stays a regression.
        ([old] * 3 + [new] * 9, Status.REGRESSION),
        # Not recorded (results of an older fwdasv): nothing to tell.
        ([None] * 12, Status.REGRESSION),
    ]:
        latency = _series("bench.S.track_latency", STEPPED)
        latency = findings.Series(
            latency.key, latency.unit, latency.params, latency.history, environments
        )
        (finding,) = findings.judge_series(ORDER, {latency.key: latency})
        assert finding.status == status, environments
        assert finding.gating == (status == Status.REGRESSION)


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
    result = invoke_cli(project, "--format", "json")
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
    result = invoke_cli(stepped.project)
    assert result.exit_code == 1, result.output
    assert "regression" in result.stdout and step[:8] in result.stdout
    assert stepped.subjects[STEP_INDEX] in result.stdout
    assert result.stdout.rstrip().endswith("2 finding(s): 2 regression")

    result = invoke_cli(stepped.project, "--format", "markdown")
    assert result.exit_code == 1
    assert result.stdout.startswith("### Performance regressions: 2 regression")
    assert "| regression | bench.Drawn.track_latency | decode_bs8 | testbox |" in result.stdout
    assert f"{step[:8]} {stepped.subjects[STEP_INDEX]}" in result.stdout

    result = invoke_cli(stepped.project, "--bench", "Drawn", "--format", "json")
    assert [e["benchmark"] for e in json.loads(result.stdout)["regressions"]] == [stepped.benchmark]
    # A minimum effect above the step: nothing to report, exit 0 (--threshold: its old name).
    for option in ("--min-effect", "--threshold"):
        result = invoke_cli(stepped.project, option, "5")
        assert result.exit_code == 0, result.output
        assert "No regressions" in result.stdout
    result = invoke_cli(stepped.project, "--min-effect", "1")
    assert result.exit_code == 1
    result = invoke_cli(stepped.project, "--bench", "no-such-benchmark")
    assert result.exit_code == 0 and "No regressions" in result.stdout
    result = invoke_cli(stepped.project, "--machine", "no-such-machine")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_step_free_history_exits_0_with_no_findings(step_free) -> None:
    result = invoke_cli(step_free.project, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["regressions"] == [] and document["count"] == 0


@pytest.mark.slow
def test_a_step_the_canary_makes_too_is_drift_and_exits_0(drifted) -> None:
    result = invoke_cli(drifted.project, "--format", "json")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["regressions"]
    assert entry["benchmark"] == drifted.benchmark
    assert entry["status"] == "drift"
    assert entry["after_commit"] == drifted.hashes[STEP_INDEX]
    assert entry["above_threshold"] is False
    assert "drift" in invoke_cli(drifted.project).stdout


# --- the verdicts file --------------------------------------------------------------------


def _confirmation(b: list[float], finding: findings.Finding) -> ConfirmationRecord:
    """An A/B re-measure of 3 processes a side (A at 1.0), as `fwdasv confirm` stores it."""
    figures = judge_ab([1.0, 1.0005, 0.9995], b, Noise(0.2, 0.2, 0.05, 60, "history", 35.0))
    return ConfirmationRecord.of(figures, finding.before_commit, finding.after_commit)


@pytest.mark.slow
def test_verdicts_are_appended_and_the_last_one_sets_the_status(stepped, tmp_path: Path) -> None:
    project = copy_project(stepped, tmp_path)
    path = project.results_dir / findings.VERDICTS_FILE
    drawn = finding_of(project, stepped.benchmark)
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

    result = invoke_cli(project, "--format", "json")
    assert result.exit_code == 1, result.output
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert entries[stepped.benchmark]["verdict"]["confirmation"] == confirmation.to_json()
    assert entries[stepped.plain]["status"] == "regression"  # another finding: untouched
    assert path.read_bytes() == first  # reading never writes

    # Plain ruled out: it no longer gates; the confirmed one still does.
    plain = finding_of(project, stepped.plain)
    findings.record_verdict(project, plain, status=Status.NOT_REPRODUCED)
    result = invoke_cli(project, "--format", "json")
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
    result = invoke_cli(project, "--format", "json")
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.benchmark]["status"] == "regression"
    assert entries[stepped.benchmark]["verdict"]["confirmation"] == undecided.to_json()
    assert result.exit_code == 1
    findings.record_verdict(project, drawn, status=Status.NOT_REPRODUCED)
    # A line without a re-measure keeps the one before it: the lines merge, the last wins.
    (merged,) = [f for f in findings.find(project) if f.key == drawn.key]
    assert merged.verdict is not None and merged.verdict.confirmation == undecided
    result = invoke_cli(project, "--format", "json")
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

    project = copy_project(stepped, tmp_path)
    drawn = finding_of(project, stepped.benchmark)
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
        for e in json.loads(invoke_cli(project, "--format", "json").stdout)["regressions"]
    }
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert entries[stepped.benchmark]["verdict"]["range_commits"] == [step, later]
    assert entries[stepped.plain]["status"] == "regression"  # another series: untouched

    # A verdict about a range that does not hold the finding's first new commit is not its.
    elsewhere = replace(
        finding_of(project, stepped.plain),
        before_commit=stepped.hashes[STEP_INDEX + 1],
        after_commit=stepped.hashes[STEP_INDEX + 2],
        commits=(findings.Commit(stepped.hashes[STEP_INDEX + 2]),),
    )
    findings.record_verdict(project, elsewhere, status=Status.NOT_REPRODUCED)
    entries = {
        e["benchmark"]: e
        for e in json.loads(invoke_cli(project, "--format", "json").stdout)["regressions"]
    }
    assert entries[stepped.plain]["status"] == "regression"


@pytest.mark.slow
def test_an_unreadable_verdict_line_is_one_clear_error(stepped, tmp_path: Path) -> None:
    project = copy_project(stepped, tmp_path)
    path = project.results_dir / findings.VERDICTS_FILE
    findings.record_verdict(
        project, finding_of(project, stepped.benchmark), status=Status.CONFIRMED
    )
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('{"finding": {"machine": "testbox"}, "status": "confirmed"\n')
    before = path.read_bytes()
    for command in ("regressions", "publish"):
        result = invoke_cli(project, command=command)
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
    project = _with_settings(
        copy_project(stepped, tmp_path), {"min_effect_pct": 5, "confirm": False}
    )
    quiet = invoke_cli(project, "--format", "json")
    assert quiet.exit_code == 0, quiet.output
    assert json.loads(quiet.stdout)["count"] == 0
    loud = invoke_cli(project, "--format", "json", "--min-effect", "1")
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
    project = _with_settings(copy_project(stepped, tmp_path), block)
    for command in ("regressions", "publish"):
        result = invoke_cli(project, command=command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: {project.config_path}: ") and named in line, line
    assert not project.html_dir.exists()  # publish refused before writing a site


# --- the demo model's history --------------------------------------------------------------


@pytest.mark.slow
def test_listing_of_the_demo_history(demo_history) -> None:
    """fwdasv's findings on real engine timings: the injected commit is found.

    The injected commit slows the demo's prefill by about 45% (more on a loaded
    box), far above host-timing noise once a round or two of samples are in.
    """
    assert demo_history.status == 0, demo_history.output[-3000:]
    project = demo_history.project
    result = invoke_cli(project, "--format", "json")
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
    best = max(hits, key=lambda f: (f["status"] == "regression", f["percent"]))
    assert best["after_commit"] == demo_history.slow_commit
    assert best["before_commit"] == demo_history.hashes[demo_history.slow_index - 1]
    assert "Support attention logit soft-capping" in {c["subject"] for c in best["commits"]}
    assert best["machine"] == demo_history.machine
    assert best["percent"] > 10, best
    if best["status"] == "suspected":
        # A busy box, after the fixture's extra rounds: a step too noisy for the history to
        # decide (the CI run's noise was 13-28% of a commit's median). It is reported, does
        # not gate, and the A/B re-measure decides it (test_reproduce confirms it).
        assert best["edge"] is None and best["percent"] > 2 * best["noise_pct"], best
        assert "too noisy to decide" in invoke_cli(project).stdout
    else:
        assert best["status"] == "regression", best
        assert best["percent"] > 3 * best["noise_pct"], best
        assert result.exit_code == 1
    # The published site (fwdasv publish) lists the same findings on asv's page.
    raw = json.loads((project.html_dir / "regressions.json").read_text())["regressions"]
    assert len(raw) == len(found)
    assert any(item[0].endswith(f" [{best['status']}]") for item in raw)
    table = invoke_cli(project)
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


# --- a step among the newest commits of a real repository ---------------------------------


@pytest.mark.long  # 8 commits of real asv, 1.5-2 minutes (scripts/test.sh --long)
def test_a_doubled_mlp_at_the_sixth_of_eight_commits_fails_the_gate_with_no_confirm(
    tmp_path: Path, asv_machine_home: Path, measuring
) -> None:
    """issue 19: an 8-commit repository whose 6th commit doubles the MLP's depth. After
    `asv run ALL`, `fwdasv regressions` names that commit and exits 1: its new level has
    3 commits, too few for a level of the fit, but far beyond the history's outliers.
    No confirm: the gate fails on the stored results alone."""
    from toy_model import SLOW_SUBJECT, TARGET, build_repo

    from fwdasv.asv import project as asv_project
    from fwdasv.asv.scaffold import SuiteSpec, init_project

    hashes = build_repo(tmp_path / "mymodel", commits=8, slow_index=5)
    suite = SuiteSpec(
        TARGET,
        ("prefill_512=512",),
        class_name="MyModel",
        iters=3,
        samples=10,
        warmup_s=0.05,
        env={"OMP_NUM_THREADS": "1"},
        launches=1,
    )
    # No canary: this test is about the head's edge rule on the model's own series (the
    # canary's drift rule has tests of its own), and a canary would double the measuring.
    project = init_project(
        tmp_path / "asv",
        tmp_path / "mymodel",
        suite,
        project="mymodel",
        env_dir=tmp_path / "env",
        canary=False,
    ).project
    lines: list[str] = []
    with measuring():
        asv_project.run_spec(project, "ALL", "testbox", echo=lines.append)
        # As the README says for a busy machine (this 2-vCPU VM's neighbours move whole
        # processes by 10-30%: measured 15% between commits at load 0.3), another round
        # of samples in new processes; at most two.
        for _ in range(2):
            if invoke_cli(project).exit_code == 1:
                break
            lines.append("[test] nothing found: one more round, --append-samples")
            asv_project.run_spec(project, "ALL", "testbox", append_samples=True, echo=lines.append)
    result = invoke_cli(project, "--format", "json")
    assert result.exit_code == 1, result.output + "\n".join(lines[-30:])
    data = json.loads(result.output)
    (found,) = [f for f in data["regressions"] if f["benchmark"].endswith(".track_latency")]
    assert found["after_commit"] == hashes[5]
    assert found["status"] == "regression" and found["edge"] == "head"
    assert found["showing_commits"] == 3
    assert [c["subject"] for c in found["commits"]] == [SLOW_SUBJECT]
    assert found["percent"] > 50
    table = invoke_cli(project)
    assert "regression (3 commits)" in table.output and hashes[5][:8] in table.output


@pytest.mark.slow
def test_a_busy_short_historys_doubled_head_fails_the_gate(drawn_history) -> None:
    """issue 19: the doubled MLP's medians as the busy box measured them in the long
    tier's run (its old level moving 9%, 8 commits): the noise estimate has so few degrees
    of freedom that only the noise taken as known decides the 3-commit head, and the
    history's outliers make it a regression. The gate fails with no confirm."""
    scales = (2.00, 2.01, 2.01, 1.85, 1.83, 2.96, 3.52, 3.01)
    history = drawn_history("busy-head", scales, samples=20, noise=0.03)
    result = invoke_cli(history.project, "--format", "json")
    assert result.exit_code == 1, result.output
    (found,) = json.loads(result.output)["regressions"]
    assert (found["status"], found["edge"], found["showing_commits"]) == ("regression", "head", 3)
    assert found["after_commit"] == history.hashes[5] and found["percent"] > 50
    assert found["noise_pct"] > 5, found  # a busy box's noise, not a quiet one's
    # Two commits at the head are only suspected at this noise: the gate passes.
    short = drawn_history("busy-head-2", scales[:-1], samples=20, noise=0.03)
    result = invoke_cli(short.project, "--format", "json")
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.output)["regressions"]
    assert (found["status"], found["showing_commits"]) == ("suspected", 2), found


@pytest.mark.slow
def test_a_suspected_head_passes_the_gate_unless_asked_to_fail(drawn_history) -> None:
    history = drawn_history("head-suspected", (1.0,) * 10 + (1.1,))
    result = invoke_cli(history.project, "--format", "json")
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.output)["regressions"]
    assert (found["status"], found["edge"], found["showing_commits"]) == ("suspected", "head", 1)
    assert found["after_commit"] == history.hashes[-1]
    strict = invoke_cli(history.project, "--fail-on-suspected")
    assert strict.exit_code == 1 and "suspected (1 commit)" in strict.output, strict.output


@pytest.mark.slow
def test_an_improvement_is_listed_on_request_and_on_the_site_and_never_gates(
    drawn_history,
) -> None:
    from fwdasv.analysis.publish import publish

    history = drawn_history("improved", (1.0,) * 6 + (0.9,) * 6)
    plain = invoke_cli(history.project)
    assert plain.exit_code == 0 and "No regressions" in plain.output, plain.output
    listed = invoke_cli(history.project, "--improvements", "--format", "json")
    assert listed.exit_code == 0, listed.output
    (found,) = json.loads(listed.output)["regressions"]
    assert found["status"] == "improvement" and found["after_commit"] == history.hashes[6]
    assert found["percent"] < -5
    published = publish(history.project, echo=None)
    assert [f.status for f in published.findings] == [Status.IMPROVEMENT]
    page = (history.project.html_dir / "fwdasv" / "findings.html").read_text()
    assert "<td class='improvement'>improvement</td>" in page
    # asv's own Regressions list holds regressions only.
    assert (history.project.html_dir / "regressions.json").read_text() == '{"regressions":[]}'


# --- unreadable results -------------------------------------------------------------------


def _result_file(project: AsvProject, commit: str) -> Path:
    (path,) = project.results_dir.glob(f"*/{commit[:8]}-*.json")
    return path


def _truncate(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


@pytest.mark.slow
def test_a_truncated_result_at_the_step_fails_regressions_and_names_the_file(
    stepped, tmp_path: Path
) -> None:
    project = copy_project(stepped, tmp_path)
    # The step's commit and every later one unreadable: the step itself is out of sight.
    paths = [_result_file(project, c) for c in stepped.hashes[STEP_INDEX:]]
    for path in paths:
        _truncate(path)
    result = invoke_cli(project, "--format", "json")
    assert result.exit_code == 2, result.output
    for path in paths:
        assert str(path) in result.stderr
    document = json.loads(result.stdout)
    assert document["regressions"] == []
    assert document["unreadable_count"] == len(paths)
    assert sorted(u["path"] for u in document["unreadable"]) == sorted(map(str, paths))
    table = invoke_cli(project)
    assert table.exit_code == 2
    assert "No regressions in the readable results." in table.stdout
    assert f"{len(paths)} result files could not be read" in table.stdout
    # Asked to ignore them: still named, no longer failing.
    skipped = invoke_cli(project, "--skip-unreadable")
    assert skipped.exit_code == 0, skipped.output
    assert str(paths[0]) in skipped.stderr and "Warning:" in skipped.stderr


@pytest.mark.slow
def test_only_the_steps_result_truncated_still_fails_and_names_it(stepped, tmp_path: Path) -> None:
    project = copy_project(stepped, tmp_path)
    path = _result_file(project, stepped.hashes[STEP_INDEX])
    _truncate(path)
    result = invoke_cli(project, "--format", "json")
    assert result.exit_code != 0, result.output
    assert str(path) in result.stderr
    assert json.loads(result.stdout)["unreadable_count"] == 1


@pytest.mark.slow
def test_a_missing_result_is_no_problem(step_free, tmp_path: Path) -> None:
    project = copy_project(step_free, tmp_path)
    _result_file(project, step_free.hashes[STEP_INDEX]).unlink()  # never built
    result = invoke_cli(project, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["unreadable_count"] == 0
    assert result.stderr == ""


@pytest.mark.slow
def test_publish_fails_on_an_unreadable_result_and_still_writes_the_site(
    step_free, tmp_path: Path
) -> None:
    project = copy_project(step_free, tmp_path)
    path = _result_file(project, step_free.hashes[3])
    _truncate(path)
    result = invoke_cli(project, command="publish")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr
    assert "1 result file could not be read" in result.stdout
    assert (project.html_dir / "index.json").is_file()
    again = invoke_cli(project, "--skip-unreadable", command="publish")
    assert again.exit_code == 0, again.output
    assert str(path) in again.stderr


@pytest.mark.slow
def test_confirm_with_nothing_to_re_measure_still_fails_on_an_unreadable_result(
    step_free, tmp_path: Path
) -> None:
    project = copy_project(step_free, tmp_path)
    path = _result_file(project, step_free.hashes[STEP_INDEX])
    _truncate(path)
    result = invoke_cli(project, "--format", "json", command="confirm")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr
    assert json.loads(result.stdout)["unreadable_count"] == 1
    skipped = invoke_cli(project, "--skip-unreadable", command="confirm")
    assert skipped.exit_code == 0, skipped.output
