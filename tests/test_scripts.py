"""scripts/demo.sh and scripts/test.sh: apart environments, and what they say they do.

The scripts install for minutes (torch, vllm), so they are not run here; what is
checked is what keeps the demo's series whole: the demo measures in an
environment the test script's vllm extra (which moves torch) never touches.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {name: ROOT / "scripts" / name for name in ("demo.sh", "test.sh")}


def _venv(script: Path) -> str:
    text = script.read_text()
    # The environment the script creates and installs into.
    (created,) = set(re.findall(r'-m venv "?(\.venv[\w-]*|\$venv)"?', text))
    if created == "$venv":
        (created,) = re.findall(r"^venv=(\S+)$", text, re.M)
    return created


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_script_is_valid_bash(name: str) -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPTS[name])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_demo_and_the_tests_never_share_an_environment() -> None:
    demo, tests = _venv(SCRIPTS["demo.sh"]), _venv(SCRIPTS["test.sh"])
    assert (demo, tests) == (".venv-demo", ".venv")
    assert "vllm" not in SCRIPTS["demo.sh"].read_text().split("set -euo pipefail", 1)[1]
    # Both ignored by git.
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert f"/{demo}/" in ignored and f"/{tests}/" in ignored


def test_the_demo_takes_the_cpu_torch_wheel_without_a_gpu() -> None:
    text = SCRIPTS["demo.sh"].read_text()
    assert "nvidia-smi" in text and "https://download.pytorch.org/whl/cpu" in text
    assert "FWDASV_TORCH_INDEX" in text


def test_the_test_script_says_what_it_installs_and_asks_for_root_only_when_needed() -> None:
    text = SCRIPTS["test.sh"].read_text()
    assert "pip install -q" not in text  # not silent for minutes
    assert "nothing to install (no root needed)" in text
