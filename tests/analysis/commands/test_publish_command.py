"""`fwdasv publish` says where the site is and how to open it."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_publish_says_where_the_site_is_and_how_to_open_it(drawn_history) -> None:
    from click.testing import CliRunner

    from fwdasv.cli import main

    history = drawn_history("site-hint", [1.0, 1.0, 1.5], samples=10)
    config = history.project.config_path
    result = CliRunner().invoke(main, ["publish", "--config", str(config)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    index = history.project.html_dir / "index.html"
    assert index.is_file() and f"site: {index}" in lines
    (view,) = [line for line in lines if line.startswith("to view it: ")]
    assert f"asv preview --config {config}" in view
    assert any("file:// does not work" in line for line in lines)
