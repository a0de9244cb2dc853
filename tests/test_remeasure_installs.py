"""Confirm and explain without reinstalling (issue 19 item 3): one environment per commit.

Real asv installs (fwdasv's environment type, no index) of a real git history:
an interleaved A B A B A B re-measure installs A and B once each, a later
re-measure (explain after confirm) finds both installed, and the old way (the
configuration's one environment) reinstalls at every switch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from toy_model import SLOW_PASS, build_repo

from fwdasv.analysis.remeasure import Remeasurer
from fwdasv.asv.install import env_dir_for
from fwdasv.asv.scaffold import write_torch_project


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def _slow_in(python: str) -> bool:
    code = f"import mymodel.model as m; print({SLOW_PASS!r} in open(m.__file__).read())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.slow
def test_an_interleaved_ab_installs_each_commit_once_and_keeps_it(tmp_path: Path, offline) -> None:
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    a, b = hashes[0], hashes[2]
    measurer = Remeasurer(project, None, tmp_path / "work")  # type: ignore[arg-type]
    pythons = {}
    for _ in range(3):
        for commit in (a, b):
            pythons.setdefault(commit, set()).add(measurer.install(commit).python)
    assert measurer.installs == 2
    assert all(len(found) == 1 for found in pythons.values())
    (python_a,), (python_b,) = pythons[a], pythons[b]
    assert python_a != python_b
    assert python_a.startswith(str(env_dir_for(project, a)))
    assert not _slow_in(python_a) and _slow_in(python_b), "each environment holds its commit"
    # What confirm installed, explain finds installed.
    later = Remeasurer(project, None, tmp_path / "work")  # type: ignore[arg-type]
    later.install(b)
    later.install(a)
    assert later.installs == 0


@pytest.mark.slow
def test_the_shared_environment_reinstalls_at_every_switch(tmp_path: Path, offline) -> None:
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    measurer = Remeasurer(project, None, tmp_path / "work", per_commit_envs=False)  # type: ignore[arg-type]
    for _ in range(2):
        for commit in (hashes[0], hashes[2]):
            measurer.install(commit)
    assert measurer.installs == 4
