"""`fwdasv.analysis.findings.verdicts`: verdicts appended to the verdicts file, the last one
setting a finding's status, on a drawn history (conftest's `stepped`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import STEP_INDEX, confirmation_record, copy_project, finding_of, invoke_cli

from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.finding import Commit
from fwdasv.analysis.findings.verdict_file import VERDICTS_FILE
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import ReMeasureStatus, Status


@pytest.mark.slow
def test_verdicts_are_appended_and_the_last_one_sets_the_status(stepped, tmp_path: Path) -> None:
    project = copy_project(stepped, tmp_path)
    path = project.results_dir / VERDICTS_FILE
    drawn = finding_of(project, stepped.benchmark)
    confirmation = confirmation_record([1.021, 1.0205, 1.0215], drawn)
    assert confirmation.figures.status == Status.CONFIRMED, confirmation.summary
    record_verdict(project, drawn, status=Status.CONFIRMED, confirmation=confirmation)
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
    record_verdict(project, plain, status=Status.NOT_REPRODUCED)
    result = invoke_cli(project, "--format", "json")
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.plain]["status"] == "not-reproduced"
    assert entries[stepped.benchmark]["status"] == "confirmed"
    assert result.exit_code == 1
    # The last line about a finding wins; an undecided re-measure is no verdict: the
    # finding is a (gating) regression again, with that re-measure attached.
    undecided = confirmation_record([1.01, 1.03, 0.99], drawn)
    assert undecided.figures.status == ReMeasureStatus.UNDECIDED, undecided.summary
    record_verdict(project, drawn, status=ReMeasureStatus.UNDECIDED, confirmation=undecided)
    second = path.read_bytes()
    assert second.startswith(first) and len(second.splitlines()) == 3
    result = invoke_cli(project, "--format", "json")
    entries = {e["benchmark"]: e for e in json.loads(result.stdout)["regressions"]}
    assert entries[stepped.benchmark]["status"] == "regression"
    assert entries[stepped.benchmark]["verdict"]["confirmation"] == undecided.to_json()
    assert result.exit_code == 1
    record_verdict(project, drawn, status=Status.NOT_REPRODUCED)
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
        commits=(Commit(step), Commit(later)),
    )
    record_verdict(project, wider, status=Status.CONFIRMED)
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
        commits=(Commit(stepped.hashes[STEP_INDEX + 2]),),
    )
    record_verdict(project, elsewhere, status=Status.NOT_REPRODUCED)
    entries = {
        e["benchmark"]: e
        for e in json.loads(invoke_cli(project, "--format", "json").stdout)["regressions"]
    }
    assert entries[stepped.plain]["status"] == "regression"


@pytest.mark.slow
def test_an_unreadable_verdict_line_is_one_clear_error(stepped, tmp_path: Path) -> None:
    project = copy_project(stepped, tmp_path)
    path = project.results_dir / VERDICTS_FILE
    record_verdict(project, finding_of(project, stepped.benchmark), status=Status.CONFIRMED)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write('{"finding": {"machine": "testbox"}, "status": "confirmed"\n')
    before = path.read_bytes()
    for command in ("regressions", "publish"):
        result = invoke_cli(project, command=command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: {path}:2: not a fwdasv verdict line"), line
        assert path.read_bytes() == before  # the file is never rewritten, not even to fix it
