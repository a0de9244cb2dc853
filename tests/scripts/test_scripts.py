"""scripts/ and bench/: what a user runs apart from the measurement harnesses.

scripts/demo.sh and scripts/test.sh install for minutes (torch, vllm), so they are not
run here; what is checked is what keeps the demo's series whole (the demo measures in an
environment the test script's vllm extra, which moves torch, never touches), that every
shell script parses, and that the H200 scripts share one staging helper.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

SCRIPTS = {name: ROOT / "scripts" / name for name in ("demo.sh", "test.sh")}
USER_SCRIPTS = {"demo.sh", "test.sh", "nightly.py", "setup_hardware.py", "export_results.py"}
H200 = ROOT / "bench" / "h200"
SHELL_SCRIPTS = sorted(
    str(path.relative_to(ROOT))
    for path in [*ROOT.glob("scripts/*.sh"), *ROOT.glob("bench/**/*.sh")]
)


def _venv(script: Path) -> str:
    text = script.read_text()
    # The environment the script creates and installs into.
    (created,) = set(re.findall(r'-m venv "?(\.venv[\w-]*|\$venv)"?', text))
    if created == "$venv":
        (created,) = re.findall(r"^venv=(\S+)$", text, re.M)
    return created


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_each_script_is_valid_bash(name: str) -> None:
    done = subprocess.run(["bash", "-n", str(ROOT / name)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_scripts_holds_what_a_user_runs_and_bench_the_harnesses() -> None:
    present = {path.name for path in (ROOT / "scripts").iterdir()} - {"__pycache__"}
    assert present == USER_SCRIPTS
    harnesses = [path.relative_to(ROOT) for path in (ROOT / "bench").rglob("*") if path.is_file()]
    named_after_an_occasion = [
        str(path) for path in harnesses if re.search(r"lease|round\d|finish", path.name)
    ]
    assert not named_after_an_occasion


def test_every_h200_script_stages_through_the_one_helper() -> None:
    for script in sorted(H200.glob("*.sh")):
        if script.name == "stage.sh":
            continue
        text = script.read_text()
        assert '. "$(dirname "$0")/stage.sh"' in text, script.name
        # The settings the helper exports are spelled there alone.
        assert not re.search(r"^export .*(NCCL_NVLS_ENABLE|PIP_NO_INDEX)", text, re.M), script.name
        assert "--target /tmp/site" not in text, script.name


def test_the_demo_and_the_tests_never_share_an_environment() -> None:
    demo, tests = _venv(SCRIPTS["demo.sh"]), _venv(SCRIPTS["test.sh"])
    assert (demo, tests) == (".venv-demo", ".venv")
    assert "vllm" not in SCRIPTS["demo.sh"].read_text().split("set -euo pipefail", 1)[1]
    # Its comment says why without naming a torch version, which goes stale (it said 2.14.1
    # where 2.13.0+cpu was installed).
    assert not re.search(r"torch \(?\d+\.\d+", SCRIPTS["demo.sh"].read_text())
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


def test_the_test_script_installs_byte_compiled_as_pip_did() -> None:
    # uv leaves .py files uncompiled unless told; where PYTHONDONTWRITEBYTECODE is set
    # (this VM) every process then compiled torch and vllm anew: `import torch` 3.3 s
    # against 1.8 s, and a new clone's tests ran a third slower (docs/measurements.md, 41).
    text = SCRIPTS["test.sh"].read_text()
    # Each `uv pip install` command with its continuation lines.
    commands = re.findall(r"-m uv pip install(?:[^\n]*\\\n)*[^\n]*", text)
    assert commands, "test.sh's install is uv's"
    for command in commands:
        assert "--compile-bytecode" in command, command


def test_the_test_script_stops_before_installing_when_the_disk_cannot_hold_it(
    tmp_path: Path,
) -> None:
    # A first install is about 10 GB; with less free, pip used to fail half-way with
    # OSError 28. The script says so first, names the filesystem, and makes no .venv.
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "test.sh"
    script.write_text(SCRIPTS["test.sh"].read_text())
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "FWDASV_INSTALL_GB": "100000000"},
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the first install needs about 100000000 GB" in done.stdout
    assert "free some space there" in done.stdout
    assert not (tmp_path / ".venv").exists()
