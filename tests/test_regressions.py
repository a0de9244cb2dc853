"""fwdasv regressions: asv publish's regressions.json as a list with a CI exit status.

Pure parsing against a hand-made site in asv 0.6's format, cross-checked with
asv's own graph paths; then real `asv publish` output: a 12-commit history of
seeded draws with a +30% step at commit 7 (real asv runs and publish, known
data), and the demo model's history measured by asv.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwdasv.analysis.regressions import (
    RegressionsError,
    asv_threshold,
    exit_status,
    format_markdown,
    graph_file_path,
    load_regressions,
    parse_regressions,
    select,
)
from fwdasv.asv.project import AsvProject
from fwdasv.cli import main

H = [f"{i:x}" * 40 for i in range(1, 6)]  # five fake full hashes

GRAPH = {
    "machine": "box|1",
    "os": "Linux",
    "python": "3.11",
    "branch": "main",
}
INDEX = {
    "revision_to_hash": {str(i): h for i, h in enumerate(H)},
    "graph_param_list": [GRAPH, {**GRAPH, "machine": "other"}],
    "benchmarks": {
        "forward.S.track_latency": {
            "params": [["'decode'", "'prefill'"]],
            "param_names": ["case"],
            "unit": "seconds",
        },
        "plain.track_x": {"params": [], "unit": "unit"},
    },
}


def _site() -> dict:
    path = graph_file_path(GRAPH, "forward.S.track_latency") + ".json"
    return {
        "regressions": [
            # Two jumps of prefill: a range (rev 1 -> 3) and a single commit (null before).
            [
                "forward.S.track_latency('prefill')",
                path,
                {"machine": "box|1"},
                1,
                0.030,
                0.010,
                [[1, 3, 0.010, 0.020], [None, 4, 0.020, 0.030]],
            ],
            [
                "plain.track_x",
                "graphs/machine-other/plain.track_x.json",
                {},
                None,
                2.0,
                1.0,
                [[0, 1, 1.0, 1.02]],
            ],
        ]
    }


def test_graph_paths_match_asv() -> None:
    from asv.graph import Graph

    for params in INDEX["graph_param_list"] + [{"a": None, "b": "", "c": "x/y<z"}]:
        assert graph_file_path(params, "m.S.t") == Graph.get_file_path(params, "m.S.t")


def test_parse_maps_revisions_params_and_graph_params() -> None:
    found = parse_regressions(_site(), INDEX, {".*track_latency.*": 0.10})
    assert len(found) == 3
    ranged, single, plain = found
    assert (ranged.before_commit, ranged.after_commit) == (H[1], H[3])
    assert (single.before_commit, single.after_commit) == (None, H[4])
    assert ranged.params == {"case": "prefill"} and ranged.case == "prefill"
    assert ranged.graph_params == GRAPH and ranged.machine == "box|1"
    assert ranged.percent == pytest.approx(100.0)
    assert single.percent == pytest.approx(50.0)
    assert ranged.threshold == 0.10 and ranged.above_threshold
    assert ranged.commit_range() == (H[1], H[3])
    assert single.commit_range() == (f"{H[4]}^", H[4])
    # No threshold matches plain.track_x: asv's 5%; +2% is below it.
    assert plain.threshold == 0.05 and not plain.above_threshold
    assert plain.params == {} and plain.machine == "other"
    assert exit_status(found) == 1
    assert exit_status([plain]) == 0


def test_thresholds_follow_asv() -> None:
    thresholds = {".*latency.*": 0.02, r"forward\..*": 0.07, ".*@main": 0.01}
    assert asv_threshold(thresholds, "forward.S.track_latency('a')", "main") == 0.07
    assert asv_threshold(thresholds, "x.track_latency", None) == 0.02
    assert asv_threshold({}, "x", "main") == 0.05
    # re.match: anchored at the start, as asv does.
    assert asv_threshold({"latency": 0.5}, "x.latency", None) == 0.05


def test_select_filters_and_overrides_the_threshold() -> None:
    found = parse_regressions(_site(), INDEX, {})
    assert [r.benchmark for r in select(found, ["prefill"])] == ["forward.S.track_latency"] * 2
    assert exit_status(select(found, threshold_pct=200)) == 0
    assert exit_status(select(found, threshold_pct=49)) == 1
    with pytest.raises(RegressionsError, match="bad regular expression"):
        select(found, ["("])


def test_markdown_escapes_pipes() -> None:
    (ranged, *_) = parse_regressions(_site(), INDEX, {})
    text = format_markdown([ranged])
    assert "case=prefill" in text and "box\\|1" in text
    header, _, row = text.splitlines()[2:5]
    # The machine's pipe is escaped: the row still has the header's columns.
    assert len(re.findall(r"(?<!\\)\|", row)) == header.count("|")


def test_unknown_revision_is_one_clear_error() -> None:
    broken = {"regressions": [["a", "graphs/a.json", {}, None, 1.0, 1.0, [[0, 99, 1.0, 2.0]]]]}
    with pytest.raises(RegressionsError, match="revision 99"):
        parse_regressions(broken, INDEX)


def test_missing_site_says_publish_first(tmp_path: Path) -> None:
    (tmp_path / "asv.conf.json").write_text(json.dumps({"version": 1, "repo": "."}))
    result = CliRunner().invoke(main, ["regressions", "--config", str(tmp_path / "asv.conf.json")])
    assert result.exit_code == 2
    assert "run `asv publish` first" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(RegressionsError):
        load_regressions(AsvProject.load(tmp_path / "asv.conf.json"))


# --- real asv publish output --------------------------------------------------------------

# Seeded draws (1% noise, 20 samples), +30% from commit 7 on, as in the demo history.
STEP_INDEX = 7
SCALES = (1.0,) * STEP_INDEX + (1.3,) * 5


@pytest.fixture(scope="module")
def stepped(drawn_history):
    from fwdasv.asv import project as asv_project

    history = drawn_history("stepped", SCALES, samples=20)
    asv_project.publish(history.project, echo=None)
    return history


def _invoke(project, *args: str):
    return CliRunner().invoke(main, ["regressions", "--config", str(project.config_path), *args])


@pytest.mark.slow
def test_listing_finds_the_step_asv_published(stepped) -> None:
    (regression,) = load_regressions(stepped.project)
    step = stepped.hashes[STEP_INDEX]
    assert regression.after_commit == step
    assert step in {c.hash for c in regression.commits}
    assert stepped.subjects[STEP_INDEX] in {c.subject for c in regression.commits}
    assert regression.benchmark == stepped.benchmark
    assert regression.params == {"case": "decode_bs8"}
    assert regression.machine == stepped.machine
    # asv's default threshold (the configuration sets none) and a step far above it.
    assert regression.threshold == 0.05
    assert 25 < regression.percent < 35
    assert regression.above_threshold

    result = _invoke(stepped.project)
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.stdout and step[:8] in result.stdout
    assert "case=decode_bs8" in result.stdout and "+3" in result.stdout


@pytest.mark.slow
def test_json_and_markdown_formats(stepped) -> None:
    step = stepped.hashes[STEP_INDEX]
    result = _invoke(stepped.project, "--format", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert (document["count"], document["above_threshold"]) == (1, 1)
    (entry,) = document["regressions"]
    assert entry["after_commit"] == step
    assert entry["params"] == {"case": "decode_bs8"}
    assert entry["machine"] == stepped.machine
    assert entry["threshold_pct"] == 5.0 and entry["above_threshold"] is True
    assert step in [c["hash"] for c in entry["commits"]]

    result = _invoke(stepped.project, "--format", "markdown")
    assert result.exit_code == 1
    assert result.stdout.startswith("### Performance regressions: 1 found, 1 above threshold")
    assert "| :x: | `bench.Drawn.track_latency` | case=decode_bs8 |" in result.stdout
    assert f"{step[:8]} {stepped.subjects[STEP_INDEX]}" in result.stdout


@pytest.mark.slow
def test_threshold_above_the_effect_exits_0(stepped) -> None:
    result = _invoke(stepped.project, "--threshold", "50")
    assert result.exit_code == 0, result.output
    assert "1 regression, 0 above threshold" in result.stdout
    assert "warn" in result.stdout
    result = _invoke(stepped.project, "--threshold", "20")
    assert result.exit_code == 1
    result = _invoke(stepped.project, "--bench", "no-such-benchmark")
    assert result.exit_code == 0
    assert "No regressions" in result.stdout


@pytest.mark.slow
def test_listing_of_the_demo_history(demo_history) -> None:
    """The listing is asv's regressions.json, resolved; asv's detector decides what is there.

    The injected commit slows the demo's attention-heavy cases by 45-80%, far
    above host-timing noise, so asv's step detection must flag it.
    """
    assert demo_history.status == 0, demo_history.output[-3000:]
    project = demo_history.project
    raw = json.loads((project.html_dir / "regressions.json").read_text())
    found = load_regressions(project)
    assert len(found) == sum(len(item[6]) for item in raw["regressions"])
    assert {r.after_commit for r in found} <= set(demo_history.hashes)
    result = _invoke(project)
    assert result.exit_code == exit_status(found), result.output

    latency = [r for r in found if r.benchmark == demo_history.benchmark]
    hits = [r for r in latency if demo_history.slow_commit in {c.hash for c in r.commits}]
    assert hits, (
        "asv's step detection did not flag the injected commit "
        f"(flagged: {[(r.entry, r.range_label, round(r.percent, 1)) for r in latency]})"
    )
    best = max(hits, key=lambda r: r.percent)
    assert best.threshold == 0.05 and best.percent > 10, best
    assert "Support attention logit soft-capping" in {c.subject for c in best.commits}
    assert best.machine == demo_history.machine
    assert result.exit_code == 1
    assert demo_history.slow_commit[:8] in result.stdout
