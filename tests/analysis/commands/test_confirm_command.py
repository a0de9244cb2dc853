"""`fwdasv confirm`: a result file it cannot read fails it, even with nothing to re-measure
(the re-measure itself: analysis/confirm/test_reproduce.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import STEP_INDEX, copy_project, invoke_cli, result_file, truncate_half


@pytest.mark.slow
def test_confirm_with_nothing_to_re_measure_still_fails_on_an_unreadable_result(
    step_free, tmp_path: Path
) -> None:
    project = copy_project(step_free, tmp_path)
    path = result_file(project, step_free.hashes[STEP_INDEX])
    truncate_half(path)
    result = invoke_cli(project, "--format", "json", command="confirm")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr
    assert json.loads(result.stdout)["unreadable_count"] == 1
    skipped = invoke_cli(project, "--skip-unreadable", command="confirm")
    assert skipped.exit_code == 0, skipped.output


@pytest.mark.slow
def test_an_unreadable_result_fails_confirm_before_anything_is_measured(
    stepped, tmp_path: Path
) -> None:
    """A newcomer's confirm re-measured for 20 s, then failed on a truncated result file
    (exit 2 whatever it found): it now names the file and stops before measuring, and
    nothing is recorded (before, the re-measure began: "pair A..B ..., one interleaved
    A/B", then failed on this drawn project's suite)."""
    project = copy_project(stepped, tmp_path)
    path = result_file(project, stepped.hashes[1])
    truncate_half(path)
    result = invoke_cli(project, "--format", "json", command="confirm")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr and "interleaved A/B" not in result.output, result.output
    assert json.loads(result.stdout)["unreadable_count"] == 1
    assert not (project.results_dir / "fwdasv-verdicts.jsonl").exists()


@pytest.mark.parametrize("command", ["confirm", "triage", "check"])
def test_max_processes_under_confirms_three_a_side_is_refused(command: str, tmp_path: Path) -> None:
    """confirm's help says "at least 3 processes a side" (triage fixed-by and check measure
    by its rule, 3 a side at the first look), yet --max-processes 1 confirmed from 1+1."""
    from click.testing import CliRunner

    from fwdasv.cli import main

    args = {"confirm": [], "triage": ["fixed-by", "abcd1234", "--fix", "ef01"],
            "check": ["BASE", "HEAD"]}[command]  # fmt: skip
    for value in ("1", "2"):
        config = str(tmp_path / "asv.conf.json")
        result = CliRunner().invoke(
            main, [command, *args, "--max-processes", value, "--config", config]
        )
        assert result.exit_code == 2, (command, result.output)
        assert "--max-processes" in result.stderr and "x>=3" in result.stderr, result.stderr
