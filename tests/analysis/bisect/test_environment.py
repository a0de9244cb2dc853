"""`fwdasv.analysis.bisect.environment`: environments that cannot show a commit's own build
are refused, and so are results not measured from per-commit installs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import asv_config

from fwdasv.analysis.bisect.environment import BisectError, check_environment, verify_measured
from fwdasv.cli import main


def test_existing_environments_are_refused(tmp_path: Path) -> None:
    check_environment(asv_config(tmp_path, pythons=["3.11"]))
    with pytest.raises(BisectError, match="--python=same selects an existing environment"):
        check_environment(asv_config(tmp_path), python="same")
    with pytest.raises(BisectError, match="pythons holds '/usr/bin/python3'"):
        check_environment(asv_config(tmp_path, pythons=["/usr/bin/python3"]))
    project = asv_config(tmp_path, environment_type="existing")
    result = CliRunner().invoke(
        main,
        ["bisect", "a..b", "track_latency", "--config", str(project.config_path), "-m", "x"],
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "environment_type is 'existing'" in line
    assert "every commit would look the same" in line
    assert '"environment_type": "fwdasv"' in line
    result = CliRunner().invoke(main, ["bisect", "a", "track_latency"])
    assert result.exit_code == 2 and "GOOD..BAD" in result.stderr


def test_verify_measured_refuses_results_not_from_per_commit_installs(tmp_path: Path) -> None:
    project = asv_config(tmp_path, env_dir="env")
    commit, other = "ab" * 20, "ab" * 4 + "cd" * 16
    folder = project.results_dir / "box"
    folder.mkdir(parents=True)

    def store(commit_hash: str, env_name: str) -> None:
        data = {"commit_hash": commit_hash, "env_name": env_name}
        (folder / f"{commit_hash[:8]}-{env_name}.json").write_text(json.dumps(data))

    assert verify_measured(project, "box", [commit]) == [commit]  # nothing saved
    store(commit, "existing-py_usr_bin_python3")
    with pytest.raises(BisectError, match="not one asv builds per commit"):
        verify_measured(project, "box", [commit])
    for path in folder.iterdir():
        path.unlink()
    store(other, "virtualenv-py3.11")  # same 8-character prefix, another commit
    with pytest.raises(BisectError, match="share the 8-character prefix"):
        verify_measured(project, "box", [commit])
    for path in folder.iterdir():
        path.unlink()
    store(commit, "virtualenv-py3.11")
    with pytest.raises(BisectError, match="records installing"):
        verify_measured(project, "box", [commit])
    status = project.env_dir / "0123abcd" / "asv-install-status.json"
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"commit_hash": commit, "version": 1}))
    assert verify_measured(project, "box", [commit]) == []
