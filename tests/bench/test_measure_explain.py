"""bench/h200/measure_explain.py's dry mode on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, one_thread_env

from fwdasv.core.kernels import load_summary


def test_gpu_check_script_dry_mode_runs_on_cpu(tmp_path):
    out = tmp_path / "explain-dry"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "h200" / "measure_explain.py"),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--skip-engine-cli",  # one torch process at a time besides this one
        ],
        env=one_thread_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # CPU op times of the tiny decoder are too noisy for the 50% checks: 0 or 1.
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["num_layers"] == 4
    assert summary["checks"]["restore_excluded"] is True
    assert set(summary["checks"]) == {
        "bad_top_row_is_added",
        "bad_top_row_share_ge_50",
        "explained_top5_ge_50",
        "control_below_added",
        "restore_excluded",
    }
    assert summary["added_rows"]["aten::roll"] == 1
    explain = json.loads((out / "explain.json").read_text())
    roll = next(row for row in explain["kernels"] if row["name"] == "aten::roll")
    assert (roll["status"], roll["calls_before"], roll["calls_after"]) == ("new", 0, 4)
    for label in ("good", "bad", "control"):
        assert load_summary(out / label / "decode_bs1_1k.rank0.kernels.json").is_cpu
    assert (out / "explain.md").read_text().startswith("### Where the time went")
    assert "PASS  restore_excluded" in proc.stdout
