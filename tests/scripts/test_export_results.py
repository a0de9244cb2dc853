"""scripts/export_results.py runs the same command as `fwdasv export`."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asv_results import PER_COMMIT
from helpers import ROOT

pytestmark = pytest.mark.slow


def test_operator_script_runs_the_same_command(
    results_tree: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "history.csv"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "export_results.py"),
            str(results_tree["results"]),
            "-o",
            str(out),
            "-m",
            "otherbox",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == PER_COMMIT
    assert {r["machine"] for r in rows} == {"otherbox"}
    assert f"{PER_COMMIT} records from 1 result file" in done.stderr

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_results.py"), str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1
