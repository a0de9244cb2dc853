"""scripts/setup_hardware.py runs for real without a driver."""

from __future__ import annotations

import subprocess
import sys

from fake_nvml import needs_no_driver
from helpers import ROOT


@needs_no_driver
def test_operator_script_runs_for_real_without_a_driver():
    script = [sys.executable, str(ROOT / "scripts" / "setup_hardware.py")]
    helped = subprocess.run([*script, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    for command in ("check", "setup", "reset", "machine"):
        assert command in helped.stdout
    checked = subprocess.run([*script, "check"], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 4
    assert checked.stdout == ""
    assert checked.stderr.startswith("Error: no NVIDIA driver")
    assert len(checked.stderr.splitlines()) == 1
