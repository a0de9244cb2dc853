"""`fwdasv publish` says where the site is and how to open it, and refuses in one line what
it cannot publish."""

from __future__ import annotations

import json
from pathlib import Path

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


def _unpublishable(tmp_path: Path) -> Path:
    """An asv.conf.json whose results and html directories the test fills in."""
    config = tmp_path / "asv.conf.json"
    config.write_text(
        json.dumps({"version": 1, "project": "p", "repo": ".", "results_dir": "results"})
    )
    return config


def test_publish_refuses_what_asv_would_answer_with_a_traceback(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fwdasv.cli import main

    config = _unpublishable(tmp_path)

    def publish() -> list[str]:
        result = CliRunner().invoke(main, ["publish", "--config", str(config)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and result.stdout == ""
        return result.stderr.splitlines()

    # Nothing measured yet: what to run, not asv's "just-discover" hint.
    (line,) = publish()
    assert line.startswith(
        f"Error: nothing to publish: {tmp_path / 'results'} has no benchmarks.json yet; "
        "measure first (`fwdasv hw machine`, then `asv run --record-samples"
    ), line
    # results a file.
    (tmp_path / "results").write_text("not a directory")
    assert publish() == [
        f"Error: results_dir {tmp_path / 'results'} is a file, not asv's results directory"
    ]
    # html a file (asv printed its traceback twice): left as it was.
    (tmp_path / "results").unlink()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "benchmarks.json").write_text("{}")
    (tmp_path / "html").write_text("my notes")
    (line,) = publish()
    assert line.startswith(f"Error: html_dir {tmp_path / 'html'} is a file: move it away"), line
    assert (tmp_path / "html").read_text() == "my notes"
