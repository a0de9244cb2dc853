"""`fwdasv triage` and nightly's gate on what is new or untriaged, over the demo's real history.

The demo history (12 commits measured by real asv) holds a step at the injected slow
commit in both cases. One is confirmed (recorded as `fwdasv confirm` records it, so
nightly has nothing to re-measure): nightly exits 1; once it is `acknowledged` the next
night exits 0 and lists it (1 with --fail-on-open); the table, the JSON and the site
show the state; a second confirmed regression that night gates again. `fixed-by` with
the commit after the slow one as the fix is re-measured (old level against it,
interleaved) and refused: nothing recorded, exit 1. A "fix" that is no commit, or not
after the finding's first new commit, is refused before anything is measured (the drawn
`stepped` history: no install needed to show it).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import STEP_INDEX, copy_project, invoke_cli, measuring_priority

from fwdasv.analysis.commands.triage import named
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.verdict_file import VERDICTS_FILE
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import TO_CONFIRM, Status
from fwdasv.cli import main
from fwdasv.core.errors import UserError

pytestmark = pytest.mark.slow


def test_an_acknowledged_regression_is_listed_not_gating_and_a_new_one_gates(
    demo_history, tmp_path: Path
) -> None:
    project = demo_history.new_project(tmp_path / "asv")
    config = str(project.config_path)
    found = findings.find(project)
    slow = [
        f
        for f in found
        if f.key.benchmark == demo_history.benchmark and f.after_commit == demo_history.slow_commit
    ]
    assert len(slow) == 2, f"both cases step at the injected commit: {[f.key.name for f in found]}"
    ours, other = slow
    record_verdict(project, ours, status=Status.CONFIRMED)
    for finding in found:  # the rest ruled out: nothing left for nightly to re-measure
        if finding.status in TO_CONFIRM and finding.ident != ours.ident:
            record_verdict(project, finding, status=Status.NOT_REPRODUCED)

    def run(*args: str):
        return CliRunner().invoke(main, [*args, "--config", config])

    def nightly(*args: str):
        machine_file = str(tmp_path / "machine.json")
        return run("nightly", "--machine", "testbox", "--machine-file", machine_file, *args)

    first = nightly()
    assert first.exit_code == 1, first.output  # confirmed tonight, nobody triaged it
    case = ours.key.case
    said = run(
        "triage",
        "acknowledged",
        ours.after_commit[:8],
        "--bench",
        case,
        "--note",
        "being fixed",
        "--issue",
        "https://example.org/issues/7",
    )
    assert said.exit_code == 0, said.output
    assert "acknowledged: being fixed <https://example.org/issues/7>" in said.output

    second = nightly()
    assert second.exit_code == 0, second.output
    assert f"[nightly] triaged, listed, not gating: {ours.key.name}" in second.output
    assert "acknowledged" in second.output
    strict = nightly("--fail-on-open")
    assert strict.exit_code == 1, strict.output

    listed = run("regressions", "--format", "json")
    # By series and commit: a paced series may list another finding too (the demo's decode
    # series its speed-up, or an odd commit on a loaded box), whose entry is the same.
    shown = {(r["entry"], r["after_commit"]): r for r in json.loads(listed.stdout)["regressions"]}
    assert shown[ours.key.name, ours.after_commit]["triage"] == {
        "state": "acknowledged",
        "note": "being fixed",
        "issue": "https://example.org/issues/7",
        "fixed_by": None,
        "fix_check": None,
    }

    # The site: asv's Regressions page names the state, untriaged rows first.
    def site_row(finding: Finding) -> tuple[int, str]:
        """Where the finding stands on the site's Regressions page, and its name there: the
        row of its case whose jump ends at its commit (a loaded box can add another finding
        of the same case, ruled out above, which is a row of its own)."""
        site = json.loads((project.html_dir / "regressions.json").read_text())["regressions"]
        index = json.loads((project.html_dir / "index.json").read_text())
        revision = {commit: int(rev) for rev, commit in index["revision_to_hash"].items()}
        return next(
            (i, row[0])
            for i, row in enumerate(site)
            if f"'{finding.key.case}'" in row[0] and row[-1][0][1] == revision[finding.after_commit]
        )

    assert site_row(ours)[1].endswith(" [confirmed, acknowledged]"), site_row(ours)

    # A regression confirmed tonight that nobody triaged gates again.
    record_verdict(project, other, status=Status.CONFIRMED)
    third = nightly()
    assert third.exit_code == 1, third.output
    assert site_row(other)[1].endswith(" [confirmed]"), site_row(other)
    assert site_row(other)[0] < site_row(ours)[0]  # untriaged rows first


def test_fixed_by_is_refused_unless_a_re_measure_shows_the_level_back(
    demo_history, tmp_path: Path
) -> None:
    project = demo_history.new_project(tmp_path / "asv")
    config = str(project.config_path)
    ours = next(
        f
        for f in findings.find(project)
        if f.key.benchmark == demo_history.benchmark and f.after_commit == demo_history.slow_commit
    )
    record_verdict(project, ours, status=Status.CONFIRMED)
    before = (project.results_dir / VERDICTS_FILE).read_text()
    args = ["triage", "fixed-by", ours.after_commit[:8], "--bench", ours.key.case]
    missing = CliRunner().invoke(main, [*args, "--config", config])
    assert missing.exit_code == 2, missing.output
    assert "--fix COMMIT goes with fixed-by" in missing.output
    # The commit after the slow one as the "fix": the re-measure finds the slow level still
    # there.
    after = demo_history.hashes[demo_history.slow_index + 1]
    with measuring_priority():
        refused = CliRunner().invoke(
            main, [*args, "--fix", after, "--max-processes", "3", "--config", config]
        )
    assert refused.exit_code == 1, refused.output
    assert f"fixed-by {after[:8]} refused" in refused.output
    assert (project.results_dir / VERDICTS_FILE).read_text() == before


def test_a_commit_that_names_no_one_finding_records_nothing(demo_history, tmp_path: Path) -> None:
    """An empty COMMIT once matched every finding (every hash starts with ""), and "9" any
    finding whose hash starts 9: each wrote a state for findings nobody named."""
    project = demo_history.new_project(tmp_path / "asv")
    config = str(project.config_path)
    found = findings.find(project)
    ours = next(
        f
        for f in found
        if f.key.benchmark == demo_history.benchmark and f.after_commit == demo_history.slow_commit
    )
    record_verdict(project, ours, status=Status.CONFIRMED)
    verdicts = project.results_dir / VERDICTS_FILE
    before = verdicts.read_text()
    for commit in ("", " ", ours.after_commit[:1], ours.after_commit[:3], "zzzz"):
        said = CliRunner().invoke(main, ["triage", "acknowledged", commit, "--config", config])
        assert said.exit_code == 2, (commit, said.output)
        assert f"COMMIT {commit!r} is no commit of the repository" in said.output
        assert verdicts.read_text() == before, commit
    # Four hex digits naming two findings' commits: refused, the commits listed.
    other = "1" if ours.after_commit[4] == "0" else "0"
    twin = replace(ours, after_commit=ours.after_commit[:4] + other * 36)
    with pytest.raises(UserError, match=f"COMMIT {ours.after_commit[:4]} is ambiguous"):
        named((ours, twin), ours.after_commit[:4])
    assert named((ours, twin), ours.after_commit[:5]) == [ours]
    # The full hash names the finding.
    said = CliRunner().invoke(
        main,
        ["triage", "acknowledged", ours.after_commit, "--bench", ours.key.case, "--config", config],
    )
    assert said.exit_code == 0, said.output
    assert verdicts.read_text() != before


def test_a_fix_that_is_no_commit_or_not_after_the_step_is_refused_before_measuring(
    stepped, tmp_path: Path
) -> None:
    """A "fix" older than the regression (or the first new commit itself) was re-measured
    and recorded fixed-by, which never gates: a real regression left the gate. One that is
    no commit installed A first, then ended in a traceback from the install."""
    project = copy_project(stepped, tmp_path)
    verdicts = project.results_dir / VERDICTS_FILE
    step = stepped.hashes[STEP_INDEX]
    args = ("fixed-by", step, "--bench", "Drawn")
    for fix, said in (
        (stepped.hashes[2], "is not after the finding's first new commit"),
        (step, "is the finding's first new commit itself"),
        ("deadbeef", "--fix 'deadbeef' is not a commit of"),
        ("no-such-branch", "--fix 'no-such-branch' is not a commit of"),
    ):
        result = invoke_cli(project, *args, "--fix", fix, command="triage")
        assert result.exit_code == 2, (fix, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), fix
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (fix, lines)
        assert "process" not in result.output and "install" not in result.output.lower()
        assert not verdicts.exists(), fix  # nothing recorded


def test_an_empty_note_or_issue_and_one_given_to_open_are_refused(stepped, tmp_path: Path) -> None:
    """`--issue ""` was recorded, and `open --note x --issue URL` accepted, where open
    withdraws the earlier state and records none: each is one line now, nothing recorded.
    A note and an issue id on acknowledged are recorded as given."""
    project = copy_project(stepped, tmp_path)
    verdicts = project.results_dir / VERDICTS_FILE
    step = stepped.hashes[STEP_INDEX]
    for args, said in (
        (("acknowledged", step, "--issue", ""), "--issue is empty"),
        (("acknowledged", step, "--note", " "), "--note is empty"),
        (("open", step, "--note", "x"), "--note goes with a state it describes"),
        (("open", step, "--issue", "http://x"), "--issue goes with a state it describes"),
    ):
        result = invoke_cli(project, *args, "--bench", "Drawn", command="triage")
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (args, lines)
        assert not verdicts.exists(), args
    result = invoke_cli(
        project, "acknowledged", step, "--bench", "Drawn", "--note", "n", "--issue", "#123",
        command="triage",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"issue": "#123"' in verdicts.read_text()
