"""`fwdasv compare`'s command line (the comparisons themselves: test_compare_stored.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from helpers import STEP_INDEX, invoke_cli

from fwdasv.cli import main


def test_unknown_method_is_one_clear_error() -> None:
    result = CliRunner().invoke(main, ["compare", "a", "b", "--method", "t-test"])
    assert result.exit_code == 2 and "'t-test' is not one of" in result.stderr


@pytest.mark.slow
def test_a_bench_regex_that_matches_nothing_says_so_not_run_asv(stepped) -> None:
    """compare's filter of nothing told the user to `asv run` commits already measured."""
    a, b = stepped.hashes[STEP_INDEX - 1], stepped.hashes[STEP_INDEX]
    result = invoke_cli(stepped.project, a, b, "--bench", "NoSuch", command="compare")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bench 'NoSuch' matches no benchmark" in lines[0], lines
    assert "asv run" not in lines[0]
