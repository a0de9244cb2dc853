"""From a finding to its culprit (issue 28), with real asv and real bench processes on the CPU.

A 16-commit repository whose forward doubles at commit 9, measured by asv (a paced suite,
as `fwdasv init` writes on a CPU) only at commits 0 3 6 11 13 15 (as `asv run --steps` leaves most of a long history): the finding spans
6..11. `fwdasv bisect` with no arguments bisects it (GOOD and BAD interleaved, then one
bench process a probe: a doubling is beyond what an odd process fakes) and records the
culprit; `fwdasv regressions --format json` shows `culprit.commit` = commit 9, the table
a culprit column, and a second `fwdasv bisect` has nothing left to do.

Then a 5x step over 26 commits, bisected by hand from no stored samples: at most
log2(26) + 3 bench runs (a 5x step is far outside any busy box's noise: load cannot
flip the count).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from toy_model import SLOW_SUBJECT, paced_project

from fwdasv.analysis.confirm.processes import CONFIRM_DIR, JUDGED, PROCESSES_FILE
from fwdasv.asv.project import run_commits
from fwdasv.cli import main

MACHINE = "testbox"
CASE = "prefill_64=64"
MEASURED = (0, 3, 6, 11, 13, 15)
SLOW_INDEX = 9


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
@pytest.mark.long  # about 2-3 minutes of real asv and bench processes
@pytest.mark.timeout(1800)
def test_bisect_with_no_arguments_names_the_culprit_of_a_sparse_finding(
    tmp_path: Path, shared_asv_env: Path, asv_machine_home: Path
) -> None:
    project, hashes = paced_project(
        tmp_path, shared_asv_env, CASE, commits=16, slow_index=SLOW_INDEX
    )
    run_commits(project, [hashes[i] for i in MEASURED], MACHINE, echo=None)
    config = ("--config", str(project.config_path))

    before = json.loads(_run("regressions", *config, "--format", "json").stdout)
    (finding,) = [f for f in before["regressions"] if f["status"] in ("regression", "confirmed")]
    assert (finding["before_commit"], finding["after_commit"]) == (hashes[6], hashes[11])
    assert [c["hash"] for c in finding["commits"]] == hashes[7:12]
    assert finding["culprit"] is None

    bisected = _run("bisect", *config)
    assert bisected.exit_code == 0, bisected.output
    assert f"first bad commit: {hashes[SLOW_INDEX][:8]} {SLOW_SUBJECT}" in bisected.stdout
    # GOOD and BAD first, interleaved, then each probe: the pair 6..11 holds 5 commits.
    assert "GOOD " in bisected.stderr and "interleaved" in bisected.stderr

    after = json.loads(_run("regressions", *config, "--format", "json").stdout)
    (listed,) = [f for f in after["regressions"] if f["after_commit"] == hashes[11]]
    culprit = listed["culprit"]
    assert culprit["commit"] == hashes[SLOW_INDEX], culprit
    assert culprit["subject"] == SLOW_SUBJECT and culprit["answer"] == "found"
    assert f"last good {hashes[SLOW_INDEX - 1][:8]}" in culprit["evidence"], culprit
    table = _run("regressions", *config).stdout
    assert "culprit" in table and f"{hashes[SLOW_INDEX][:8]} {SLOW_SUBJECT}" in table, table

    again = _run("bisect", *config)
    assert again.exit_code == 0 and "nothing to bisect" in again.output, again.output


@pytest.mark.slow
@pytest.mark.long  # about 2 minutes: 7 commits installed and measured
@pytest.mark.timeout(1800)
def test_a_5x_step_over_26_commits_takes_at_most_log2_plus_3_bench_runs(
    tmp_path: Path, shared_asv_env: Path, asv_machine_home: Path
) -> None:
    slow = 17
    project, hashes = paced_project(
        tmp_path, shared_asv_env, CASE, commits=26, slow_index=slow, slow_passes=5
    )
    report = tmp_path / "bisect.json"
    result = _run(
        "bisect",
        f"{hashes[0]}..{hashes[-1]}",
        "forward.Mymodel.track_relative",
        "--config",
        str(project.config_path),
        "--machine",
        MACHINE,
        "--json",
        str(report),
    )
    assert result.exit_code == 0, result.output
    document = json.loads(report.read_text())
    print(result.stderr)
    assert document["first_bad"] == hashes[slow], document
    assert document["range_size"] == 25
    # GOOD and BAD once (2 processes each: no stored history, the run's spread decides),
    # then one process a probe: log2(25) probes.
    assert document["bench_runs"] <= math.log2(26) + 3, document
    assert 3.0 < document["percent"] / 100 + 1 < 7.0, document


@pytest.mark.slow
@pytest.mark.long  # about 3-4 minutes: 6 commits by asv, confirm's and bisect's processes
@pytest.mark.timeout(1800)
def test_nightly_confirms_then_bisects_the_sparse_range_from_confirms_processes(
    tmp_path: Path, shared_asv_env: Path, asv_machine_home: Path
) -> None:
    """The same sparse history through `fwdasv nightly` (nothing new to measure): confirm
    re-measures the pair 6..11, then bisect searches it the same night, its ends taken from
    confirm's processes (not measured again), and records commit 9 as the culprit."""
    project, hashes = paced_project(
        tmp_path, shared_asv_env, CASE, commits=16, slow_index=SLOW_INDEX
    )
    run_commits(project, [hashes[i] for i in MEASURED], MACHINE, echo=None)
    config = ("--config", str(project.config_path))

    night = _run("nightly", *config, "--machine", MACHINE, "--no-explain")
    assert night.exit_code == 1, night.output  # a confirmed regression gates
    assert "[nightly] 6/7 bisect 1 range(s) of several commits" in night.output, night.output
    assert "taken from an earlier run of this range or confirm's of its ends" in night.output
    assert f"first bad commit: {hashes[SLOW_INDEX][:8]} {SLOW_SUBJECT}" in night.output
    # Confirm's verdicts recorded, its processes are marked judged: a later confirm of the
    # pair measures anew (one cut short before the mark would go on from them).
    (kept,) = (project.config_path.parent / CONFIRM_DIR).glob(f"*/{PROCESSES_FILE}")
    assert JUDGED in json.loads(kept.read_text().splitlines()[-1]), kept.read_text()

    after = json.loads(_run("regressions", *config, "--format", "json").stdout)
    (listed,) = [f for f in after["regressions"] if f["after_commit"] == hashes[11]]
    assert listed["status"] == "confirmed", listed
    assert listed["culprit"]["commit"] == hashes[SLOW_INDEX], listed["culprit"]
