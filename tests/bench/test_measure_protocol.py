"""bench/h200/measure_protocol.py's dry mode on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_the_protocol_script_runs_on_cpu(tmp_path, env):
    """bench/h200/measure_protocol.py's dry mode: every protocol, the summary written."""
    out = tmp_path / "protocol"
    script = ROOT / "bench" / "h200" / "measure_protocol.py"
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(out), "--device", "cpu", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["summary"]["protocols"]) == ["steady", "duty-cycled", "long-blocks"]
    for protocol, data in summary["summary"]["protocols"].items():
        assert data["errors"] == [], protocol
        assert set(data["cases"]) == {"decode_bs4", "prefill_32"}
        assert all(c["processes"] == 1 for c in data["cases"].values())
        assert (out / f"r0-{protocol}.json").is_file()
    assert "| steady | decode_bs4 | 1 |" in (out / "summary.md").read_text()
    assert "# Timing protocols side by side (cpu)" in done.stdout
