"""Two steps close together in a sparse history, through real asv and `fwdasv nightly`.

A 24-commit repository whose forward halves at commit 7 (FAST_SUBJECT) and doubles again at
commit 15 (SLOW_SUBJECT), measured by `asv run --steps 6` (six commits, two at each level, as
a month of main measured sparsely leaves it), then `fwdasv nightly` with nothing new: both
steps are listed at their ranges, both re-measured by the A/B (the speed-up kept as an
improvement), the slowdown bisected the same night and its culprit recorded. Paced suite
(the CPU default), so a neighbour's load cannot make or hide a 2x step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from toy_model import FAST_SUBJECT, SLOW_SUBJECT, paced_project

from fwdasv.asv.project import run_spec
from fwdasv.cli import main

MACHINE = "testbox"
CASE = "prefill_64=64"
COMMITS, FAST_INDEX, SLOW_INDEX = 24, 7, 15


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
@pytest.mark.long  # about 4-6 minutes: six commits by asv, confirm's and bisect's processes
@pytest.mark.timeout(2400)
def test_steps_6_then_nightly_lists_both_steps_and_bisects_the_slowdown(
    tmp_path: Path, shared_asv_env: Path, asv_machine_home: Path
) -> None:
    project, hashes = paced_project(
        tmp_path,
        shared_asv_env,
        CASE,
        commits=COMMITS,
        slow_index=SLOW_INDEX,
        fast_index=FAST_INDEX,
    )
    run_spec(project, "main", MACHINE, extra=("--steps", "6"), echo=None)
    stored = [p.name for p in (project.results_dir / MACHINE).glob("*.json")]
    measured = [i for i, h in enumerate(hashes) if any(n.startswith(h[:8]) for n in stored)]
    assert len(measured) == 6, measured
    config = ("--config", str(project.config_path))

    listed = json.loads(_run("regressions", *config, "--improvements", "--format", "json").stdout)
    print("measured", measured)
    for f in listed["regressions"]:
        before, after = hashes.index(f["before_commit"]), hashes.index(f["after_commit"])
        print("finding", before, after, f["status"], round(f["percent"], 1), f["z"])
    by_status = {f["status"]: f for f in listed["regressions"]}
    speed_up = by_status.get("improvement")
    assert speed_up is not None, listed
    assert hashes[FAST_INDEX] in [c["hash"] for c in speed_up["commits"]], speed_up
    assert speed_up["percent"] < -25, speed_up
    slow = [f for f in listed["regressions"] if f["percent"] > 40]
    assert len(slow) == 1, listed
    assert hashes[SLOW_INDEX] in [c["hash"] for c in slow[0]["commits"]], slow

    night = _run("nightly", *config, "--machine", MACHINE, "--no-explain")
    assert night.exit_code == 1, night.output  # the confirmed slowdown is new: it gates
    assert f"first bad commit: {hashes[SLOW_INDEX][:8]} {SLOW_SUBJECT}" in night.output

    after = json.loads(_run("regressions", *config, "--improvements", "--format", "json").stdout)
    (slowdown,) = [f for f in after["regressions"] if f["percent"] > 40]
    assert slowdown["status"] == "confirmed", slowdown
    assert slowdown["culprit"]["commit"] == hashes[SLOW_INDEX], slowdown["culprit"]
    improvements = [f for f in after["regressions"] if f["percent"] < -25]
    assert improvements, after
    assert hashes[FAST_INDEX] in [c["hash"] for c in improvements[0]["commits"]], improvements
    assert FAST_SUBJECT in {c["subject"] for c in improvements[0]["commits"]}
    # The night re-measured the speed-up too (a level that comes back is two changes until
    # a re-measure says otherwise): confirmed, it stays an improvement, never bisected.
    assert improvements[0]["status"] == "improvement", improvements[0]
    assert improvements[0]["re_measured"]["outcome"] == "confirmed", improvements[0]
    assert improvements[0]["culprit"] is None, improvements[0]
