"""One machine identity: a fresh project measured by hand, then by cron, is one series.

Real asv over a real git history, every command a subprocess: `fwdasv init --machine`,
`fwdasv hw machine`, `asv run`, a new commit, then `fwdasv nightly` with its defaults
from cron's environment (`env -i HOME=... PATH=...`). And `--machine-file F`: asv reads
that file, not ~/.asv-machine.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git

from fwdasv.demo.project import build_project

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
CASE = "decode=2*1@64"


def _cron_env(home: Path) -> dict[str, str]:
    """What cron gives a job: HOME and a short PATH (PYTHONPATH only when the tests run
    from a checkout that is not the installed one)."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _commit(repo: Path, message: str) -> str:
    (repo / "NOTES.md").write_text(message + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def _stored(results: Path) -> dict[str, set[str]]:
    """Per machine directory, the short hashes with a result."""
    return {
        folder.name: {p.name.split("-")[0] for p in folder.glob("*-*.json")}
        for folder in results.iterdir()
        if (folder / "machine.json").is_file()
    }


@pytest.fixture
def fresh(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A fresh project of a 2-commit history: (home, repo, project dir), `init` run in it."""
    home = tmp_path / "home"
    home.mkdir()
    repo = tmp_path / "tinylm"
    build_project(repo, commits=2)
    project = tmp_path / "asv"
    env = _cron_env(home)
    init = _run(
        [
            str(BIN / "fwdasv"),
            "init",
            "--repo",
            str(repo),
            "--target",
            "tinylm.bench:target",
            "--case",
            CASE,
            "--dir",
            str(project),
            "--no-canary",
            "--no-check",
            "--machine",
            "benchbox",
        ],
        env,
        tmp_path,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    assert "machine benchbox: recorded in asv.conf.json" in init.stdout
    assert "fwdasv hw machine --name benchbox" in init.stdout
    return home, repo, project


def test_cron_nightly_with_defaults_measures_the_same_machine_and_series(fresh) -> None:
    home, repo, project = fresh
    env = _cron_env(home)
    named = _run([str(BIN / "fwdasv"), "hw", "machine", "--name", "benchbox"], env, project)
    assert named.returncode == 0, named.stdout + named.stderr
    measured = _run(
        [
            sys.executable,
            "-m",
            "asv",
            "run",
            "--record-samples",
            "--machine",
            "benchbox",
            "--show-stderr",
            "ALL",
        ],
        env,
        project,
    )
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr[-3000:]
    before = _stored(project / "results")
    assert list(before) == ["benchbox"] and len(before["benchbox"]) == 2, before
    new = _commit(repo, "Add notes")
    # cron: no --machine, no --config (the project's directory), nothing of this shell.
    night = _run([str(BIN / "fwdasv"), "nightly"], env, project)
    assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-3000:]
    assert "[nightly] 2/7 machine benchbox" in night.stdout
    after = _stored(project / "results")
    assert list(after) == ["benchbox"], f"a new series was started: {after}"
    assert after["benchbox"] == before["benchbox"] | {new[:8]}
    # Another box (here: another torch recorded) is refused, in one line naming both.
    config = project / "asv.conf.json"
    raw = json.loads(config.read_text())
    raw["fwdasv"]["machine"]["torch"] = "0.0-elsewhere"
    config.write_text(json.dumps(raw))
    refused = _run([str(BIN / "fwdasv"), "nightly", "--no-confirm"], env, project)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    error = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and "not the project's machine 'benchbox'" in error[0], error
    assert "torch" in error[0] and "--machine" in error[0]
    assert "[nightly] 1/7" not in refused.stdout  # refused before anything ran


def test_nightly_machine_file_is_the_one_asv_reads(fresh) -> None:
    home, _, project = fresh
    machine_file = project.parent / "machines.json"
    # No ~/.asv-machine.json at all: asv can only find the machine in --machine-file.
    night = _run(
        [
            str(BIN / "fwdasv"),
            "nightly",
            "--no-confirm",
            "--no-bisect",
            "--machine-file",
            str(machine_file),
        ],
        _cron_env(home),
        project,
    )
    assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-3000:]
    assert "benchbox" in json.loads(machine_file.read_text())
    assert not (home / ".asv-machine.json").exists()
    assert list(_stored(project / "results")) == ["benchbox"]
    assert len(_stored(project / "results")["benchbox"]) == 2
