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


@pytest.mark.slow
def test_one_bench_regex_of_nothing_beside_one_that_matches_is_named(stepped) -> None:
    """`-b Drawn -b Typo` compared Drawn and said nothing of Typo: the same comparison and
    exit now, and a warning line naming the regex that selects nothing."""
    a, b = stepped.hashes[STEP_INDEX - 1], stepped.hashes[STEP_INDEX]
    args = (a, b, "--format", "json", "--bench", "Drawn")
    alone = invoke_cli(stepped.project, *args, command="compare")
    both = invoke_cli(stepped.project, *args, "-b", "Typo", command="compare")
    assert alone.exit_code == both.exit_code == 1, both.output
    assert both.stdout == alone.stdout and "Typo" not in alone.stderr
    (line,) = [x for x in both.stderr.splitlines() if "Typo" in x]
    assert line.startswith("Warning: --bench 'Typo' matches no benchmark in"), line


@pytest.mark.slow
def test_a_range_a_dot_dot_b_is_the_pair_a_b(stepped) -> None:
    """`compare A..B` said "Missing argument 'B'": it is the pair A B now, the same
    comparison; one commit alone, or a range with an end left out, is one usage line."""
    a, b = stepped.hashes[STEP_INDEX - 1], stepped.hashes[STEP_INDEX]
    pair = invoke_cli(stepped.project, a[:8], b[:8], "--format", "json", command="compare")
    ranged = invoke_cli(stepped.project, f"{a[:8]}..{b[:8]}", "--format", "json", command="compare")
    assert pair.exit_code == ranged.exit_code == 1, ranged.output
    assert ranged.stdout == pair.stdout
    for alone in (a[:8], f"{a[:8]}..", f"..{b[:8]}", f"{a[:8]}...{b[:8]}"):
        result = invoke_cli(stepped.project, alone, command="compare")
        assert result.exit_code == 2, (alone, result.output)
        assert "give two commits: A B (before, after), or A..B" in result.stderr, alone
