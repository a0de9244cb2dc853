"""What the analysis commands share: A and B naming one commit are refused before anything
is read or measured (compare, explain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import git

from fwdasv.cli import main


@pytest.mark.parametrize(
    "command", [["compare"], ["explain", "--case", "prefill_512"]], ids=["compare", "explain"]
)
def test_one_commit_twice_is_refused_before_anything_runs(
    tmp_path: Path, command: list[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n in (1, 2):
        (repo / "f.txt").write_text(str(n))
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"commit {n}")
    head = git(repo, "rev-parse", "HEAD")
    # No results and no environment: the one error is the refusal, before anything is read.
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "repo": str(repo), "results_dir": "results"}))
    name, *options = command
    bench = ["forward.TinyLM.track_latency"] if name == "explain" else []
    for a, b in ((head[:8], head[:8]), (head[:10], "main")):
        result = CliRunner().invoke(main, [name, a, b, *bench, *options, "--config", str(config)])
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"Error: {'GOOD and BAD' if name == 'explain' else 'A and B'} name one commit, "
            f"{head[:8]} ({a!r}, {b!r}): {name} needs two commits, the earlier first (a "
            "finding's pair: `fwdasv regressions` lists them)"
        ]
    # Reversed (the later commit first): refused with the command the right way round.
    first = git(repo, "rev-parse", "HEAD~1")
    result = CliRunner().invoke(
        main, [name, "main", first[:10], *bench, *options, "--config", str(config)]
    )
    assert result.exit_code == 2, result.output
    names = "GOOD and BAD" if name == "explain" else "A and B"
    assert result.stderr.splitlines() == [
        f"Error: {names} are reversed: {first[:10]!r} ({first[:8]}) is an ancestor of 'main' "
        f"({head[:8]}); {name} takes the earlier commit first: `fwdasv {name} {first[:10]} main`"
    ]
