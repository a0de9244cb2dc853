"""`fwdasv.git`: the one git helper, over a real repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fwdasv.core.errors import UserError
from fwdasv.git import GitError, extract, git, git_run


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    (path / "pkg").mkdir()
    (path / "pkg" / "a.py").write_text("A = 1\n")
    (path / "README").write_text("hello\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=path, check=True, env={**os.environ, **env})
    return path


def test_git_returns_stdout_stripped_and_git_run_the_status(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert len(head) == 40 and head == head.strip()
    assert git_run(repo, "rev-parse", "--verify", "--quiet", "nope^{commit}").returncode != 0


def test_a_failing_command_names_itself_the_repository_and_gits_words(repo: Path) -> None:
    with pytest.raises(GitError) as caught:
        git(repo, "rev-parse", "--verify", "nope")
    error = caught.value
    assert isinstance(error, UserError)
    assert str(error).startswith(f"git rev-parse --verify nope in {repo} failed: fatal:")
    assert error.returncode not in (None, 0) and error.cause is None


def test_git_that_cannot_start_says_so_with_the_cause(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(GitError, match=f"git status in {missing} could not run: ") as caught:
        git(missing, "status")
    assert isinstance(caught.value.cause, FileNotFoundError)
    assert caught.value.returncode is None and not caught.value.timed_out


def test_extract_writes_a_commits_tree_or_some_paths_of_it(repo: Path, tmp_path: Path) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    extract(repo, "HEAD", whole)
    assert (whole / "README").read_text() == "hello\n" and (whole / "pkg" / "a.py").is_file()
    extract(repo, "HEAD", part, ["pkg"])
    assert (part / "pkg" / "a.py").is_file() and not (part / "README").exists()
    with pytest.raises(GitError) as caught:
        extract(repo, "nope", tmp_path / "none")
    assert isinstance(caught.value.stderr, bytes) and "nope" in caught.value.stderr_text
