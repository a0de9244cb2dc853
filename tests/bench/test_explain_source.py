"""bench/h200/explain_source.sh and explain_source.py: valid bash, and the op and line named on
the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, measuring_priority


def test_explain_source_script_is_valid_bash() -> None:
    script = ROOT / "bench" / "h200" / "explain_source.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.long  # the H200 script's CPU run: a repository, two installs, profiles
def test_explain_source_script_names_the_added_op_and_line_on_cpu(
    tmp_path: Path, asv_machine_home: Path
) -> None:
    """The H200 script's dry run: the same repository, project and checks, on the CPU
    (no kernel under the op there: the check is the GPU's only)."""
    script = ROOT / "bench" / "h200" / "explain_source.py"
    out = tmp_path / "out"
    argv = [sys.executable, str(script), "--out", str(out), "--device", "cpu"]
    argv += ["--case", "prefill_128=128", "--timeout-s", "800"]
    with measuring_priority():
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "cpu" and "kernel_under_op" not in summary["checks"]
    assert summary["checks"] == {
        "added_on_top": True,
        "names_the_line": True,
        "changed_here": True,
        "exit_1": True,
    }, proc.stdout + proc.stderr[-2000:]
    assert proc.returncode == 0
    assert "torch.tanh" in summary["added_code"]
    table = (out / "explain.txt").read_text()
    assert f"tinylm/model.py:{summary['added_line']} TinyLM.forward [changed here]" in table
