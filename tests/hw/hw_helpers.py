"""What the hw tests share besides fixtures (those are in tests/hw/conftest.py)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from fwdasv.cli import main


def quiet(_: str) -> None:
    """An `echo` that prints nothing."""


def invoke(*args: str) -> Result:
    """`fwdasv hw ARGS` through click's runner."""
    return CliRunner().invoke(main, ["hw", *args])
