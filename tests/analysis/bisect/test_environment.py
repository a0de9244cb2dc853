"""`fwdasv.analysis.bisect.environment`: environments that cannot show a commit's own build
are refused, in one line, before anything is measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import asv_config

from fwdasv.analysis.bisect.environment import BisectError, check_environment
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
