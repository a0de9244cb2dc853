"""`fwdasv.asv.value_format`: asv's own tables, run by real asv with fwdasv's plugin, show a
ratio series' value in a few digits, not every digit of the float."""

from __future__ import annotations

import json
import re

import pytest

from fwdasv.asv import project as asv_project
from fwdasv.asv.envplugin import PLUGIN


@pytest.mark.slow
def test_asv_runs_table_shows_a_ratio_in_four_digits(drawn_history) -> None:
    history = drawn_history("ratio_table", (1.0,), samples=5, paced=(1.17254,))
    project = history.project
    config = json.loads(project.config_path.read_text())
    config["plugins"] = [PLUGIN]
    project.config_path.write_text(json.dumps(config, indent=2))
    lines: list[str] = []
    asv_project.run_asv(
        project,
        "run",
        "--set-commit-hash",
        history.hashes[0],
        "--machine",
        history.machine,
        "--bench",
        "Paced.track_relative",
        "--launch-method",
        "spawn",
        echo=lines.append,
    )
    output = "\n".join(lines)
    # The drawn ratio is about 2 * 1.17254 with 1% noise: asv's json.dumps would print 15+.
    shown = re.search(r"\b(2\.\d+)±([0-9.]+)", output)
    assert shown is not None, output
    assert len(shown.group(1)) <= 5 and len(shown.group(2)) <= 6, shown.group(0)
