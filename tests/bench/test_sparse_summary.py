"""bench/h200/sparse_summary.py on H200-shaped outputs of bench/h200/sparse_bisect.sh: every
check holds on a run that went as the issue asks, and a wrong culprit fails its check."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import bench_script

SLOW, CSRC = "8" * 40, "9" * 40
HASHES = [f"{i:x}" * 40 for i in range(16)]


def _summary():
    with bench_script("h200/sparse_summary.py") as module:
        return module


def _finding(case: str, status: str, culprit: str | None) -> dict:
    return {
        "case": case,
        "status": status,
        "before_commit": HASHES[7],
        "after_commit": HASHES[11],
        "percent": 1.1,
        "commits": [{"hash": h} for h in HASHES[8:12]],
        "culprit": None if culprit is None else {"commit": culprit, "answer": "found"},
    }


def _outputs(out: Path, culprit: str) -> None:
    cases = ("decode_bs1_1k", "decode_bs8_1k")
    (out / "measured.txt").write_text("".join(f"{HASHES[i][:8]}\n" for i in (3, 7, 11, 15)))
    (out / "seconds.tsv").write_text("asv run --steps 4\t231.0\t0\nconfirm\t268.2\t1\n")
    before = {"regressions": [_finding(c, "regression", None) for c in cases]}
    (out / "regressions_before.json").write_text(json.dumps(before))
    (out / "confirm.txt").write_text(
        f"pair {HASHES[7][:8]}..{HASHES[11][:8]}: 2 finding(s) judged from 6 bench processes\n"
    )
    probes = [
        {"commit": CSRC, "verdict": "failed", "processes": 0, "decided_by": "untestable"},
        {"commit": SLOW, "verdict": "bad", "processes": 3, "decided_by": "processes"},
    ]
    results = [
        {"case": c, "answer": "found", "first_bad": culprit, "probes": probes, "bench_runs": 3}
        for c in cases
    ]
    (out / "bisect.json").write_text(json.dumps(results))
    after = {"regressions": [_finding(c, "confirmed", culprit) for c in cases]}
    (out / "regressions_after.json").write_text(json.dumps(after))


def test_a_run_that_went_as_asked_passes_every_check(tmp_path: Path) -> None:
    summary = _summary()
    _outputs(tmp_path, SLOW)
    got = summary.summarize(tmp_path, SLOW, CSRC, None)
    assert got["ok"], got["checks"]
    assert got["confirm"]["pairs"] == [
        {"a": HASHES[7][:8], "b": HASHES[11][:8], "findings": 2, "bench_processes": 6}
    ]
    assert got["seconds"] == {"asv run --steps 4": 231.0, "confirm": 268.2}


def test_a_wrong_culprit_or_missing_outputs_fail_their_checks(tmp_path: Path) -> None:
    summary = _summary()
    _outputs(tmp_path, HASHES[10])
    got = summary.summarize(tmp_path, SLOW, CSRC, None)
    failed = {name for name, ok in got["checks"].items() if not ok}
    assert failed == {
        "bisect named the slow commit",
        "culprit.commit is the slow commit on every finding of the range",
    }
    empty = summary.summarize(tmp_path / "none", SLOW, CSRC, None)
    assert not empty["ok"] and not any(empty["checks"].values())


def test_a_cold_only_run_is_judged_by_its_bisect_alone(tmp_path: Path) -> None:
    """ONLY=cold: no asv run, confirm or bisect of the main project; the by-hand bisect's
    culprit is the one check, and a missing or wrong one fails it."""
    summary = _summary()
    cold = "by hand from no stored samples (COLD=1): the slow commit"
    assert summary.summarize(tmp_path, SLOW, CSRC, None, cold_only=True)["checks"] == {cold: False}
    (tmp_path / "bisect_cold.json").write_text(json.dumps({"first_bad": HASHES[10]}))
    assert not summary.summarize(tmp_path, SLOW, CSRC, None, cold_only=True)["ok"]
    (tmp_path / "bisect_cold.json").write_text(
        json.dumps({"answer": "found", "first_bad": SLOW, "bench_processes": 15})
    )
    got = summary.summarize(tmp_path, SLOW, CSRC, None, cold_only=True)
    assert got["ok"] and got["checks"] == {cold: True}, got["checks"]
    assert got["cold"]["bench_processes"] == 15
    # Without --cold-only the main project's checks stand beside it, and fail here.
    assert not summary.summarize(tmp_path, SLOW, CSRC, None)["ok"]
