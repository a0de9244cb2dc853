"""`fwdasv export`: formats, filters and progress over conftest's `results_tree` (real asv
results of 3 commits on 2 machines), and the results directory of the configuration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asv_results import PER_COMMIT
from click.testing import CliRunner

from fwdasv.cli import main

pytestmark = pytest.mark.slow


def test_cli_formats_filters_and_progress(results_tree: dict[str, Any], tmp_path: Path) -> None:
    runner = CliRunner()
    c1, _, c3 = results_tree["commits"]
    result = runner.invoke(
        main,
        [
            "export",
            str(results_tree["results"]),
            "--format",
            "jsonl",
            "-m",
            "testbox",
            "-b",
            "track_latency$",
            "--commits",
            f"{c1}..{c3}",
            "--repo",
            str(results_tree["repo"]),
            "--samples",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2 * 3
    assert all(r["metric"] == "track_latency" and r["machine"] == "testbox" for r in lines)
    assert all(len(r["samples"]) == r["sample_count"] for r in lines)
    assert "6 records from 2 result files" in result.stderr

    out = tmp_path / "table.md"
    result = runner.invoke(
        main,
        [
            "export",
            str(results_tree["results"]),
            "--format",
            "markdown",
            "-o",
            str(out),
            "--progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "exporting result files" in result.stderr
    table = out.read_text().splitlines()
    assert table[0].startswith("| commit_hash | commit_date | machine | benchmark | case |")
    assert len(table) == 2 + 4 * PER_COMMIT - 1
    # In the history's order (oldest commit first), not the result files' hash order.
    shown = [row.split("|")[1].strip() for row in table[2:]]
    order = [c[:8] for c in results_tree["commits"]]
    assert shown == sorted(shown, key=order.index), shown
    assert shown[0] == order[0] and shown[-1] == order[-1]

    result = runner.invoke(main, ["export", str(results_tree["results"]), "--format", "xml"])
    assert result.exit_code == 2 and "Invalid value for '--format'" in result.stderr


def test_cli_defaults_to_the_results_dir_of_the_configuration(
    results_tree: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    c1, _, c3 = results_tree["commits"]
    explicit = runner.invoke(main, ["export", str(results_tree["results"]), "--format", "jsonl"])
    assert explicit.exit_code == 0, explicit.output
    monkeypatch.chdir(results_tree["repo"])  # asv.conf.json here, as for the other commands
    default = runner.invoke(main, ["export", "--format", "jsonl"])
    assert default.exit_code == 0, default.output
    assert default.stdout == explicit.stdout and default.stdout

    # --config from elsewhere; its repository resolves --commits ranges.
    monkeypatch.chdir(tmp_path)
    config = str(results_tree["repo"] / "asv.conf.json")
    ranged = runner.invoke(
        main, ["export", "--config", config, "--format", "jsonl", "--commits", f"{c1}..{c3}"]
    )
    assert ranged.exit_code == 0, ranged.output
    assert {json.loads(line)["commit_hash"] for line in ranged.stdout.splitlines()} == set(
        results_tree["commits"][1:]
    )

    missing = runner.invoke(main, ["export"])
    assert missing.exit_code == 2
    assert missing.stderr.splitlines() == [
        f"Error: asv configuration {tmp_path / 'asv.conf.json'} does not exist; pass --config "
        "PATH, or give the results directory (RESULTS_DIR)"
    ]


def test_cli_refuses_an_output_it_cannot_create_and_a_selection_of_nothing(
    results_tree: dict[str, Any], tmp_path: Path
) -> None:
    runner = CliRunner()
    results = str(results_tree["results"])
    # /proc takes no new file, even from root (os.access says yes): one line, status 2.
    proc = runner.invoke(main, ["export", results, "-o", "/proc/fwdasv-export.csv"])
    assert proc.exit_code == 2, proc.output
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        "Error: --output /proc/fwdasv-export.csv: no file can be created in /proc ("
    ), line
    # A selection of no record is an error, and nothing is written over the last export.
    out = tmp_path / "latency.csv"
    out.write_text("the last export\n")
    for option, value in (("--bench", "NoSuchBench"), ("--commits", "0123abcd")):
        empty = runner.invoke(main, ["export", results, "-o", str(out), option, value])
        assert empty.exit_code == 2, empty.output
        assert empty.stderr.splitlines() == [
            f"Error: no record in {results} matches {option} {value}; nothing was written"
        ]
        assert out.read_text() == "the last export\n"
    # The configuration's results_dir a file: named as one.
    afile = tmp_path / "results"
    afile.write_text("not a directory")
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "repo": ".", "results_dir": "results"}))
    named = runner.invoke(main, ["export", "--config", str(config)])
    assert named.exit_code == 2, named.output
    assert named.stderr.startswith(f"Error: {afile} is a file, not a results directory")
