"""`fwdasv compare`'s command line (the comparisons themselves: test_compare_stored.py)."""

from __future__ import annotations

from click.testing import CliRunner

from fwdasv.cli import main


def test_unknown_method_is_one_clear_error() -> None:
    result = CliRunner().invoke(main, ["compare", "a", "b", "--method", "t-test"])
    assert result.exit_code == 2 and "'t-test' is not one of" in result.stderr
