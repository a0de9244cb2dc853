"""`AsvProject.ancestry` and `is_ancestor`: git's answer whether one commit is in another's
history, with git's own reason where it cannot tell (`triage fixed-by` refuses with it),
or False for the callers that only refuse a pair git can place."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import asv_config, git

from fwdasv.asv.project import AsvError


def _history(path: Path, commits: int) -> list[str]:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    hashes = []
    for index in range(commits):
        (path / "model.py").write_text(f"x = {index}\n")
        git(path, "add", "model.py")
        git(path, "commit", "-q", "-m", f"commit {index}")
        hashes.append(git(path, "rev-parse", "HEAD").strip())
    return hashes


def test_git_places_a_commit_before_or_not_before_another(tmp_path: Path) -> None:
    first, second, third = _history(tmp_path / "repo", 3)
    project = asv_config(tmp_path, repo="repo")
    assert project.ancestry(first, third) and project.is_ancestor(first, third)
    assert project.ancestry(second, second)  # a commit is in its own history
    assert not project.ancestry(third, first) and not project.is_ancestor(third, first)
    assert project.first_parent_range(first, third) == [second, third]
    with pytest.raises(AsvError, match="is not an ancestor of"):
        project.first_parent_range(third, first)


def test_where_git_cannot_tell_the_reason_is_given_or_the_answer_is_no(tmp_path: Path) -> None:
    (first,) = _history(tmp_path / "repo", 1)
    project = asv_config(tmp_path, repo="repo")
    unknown = "0" * 40
    with pytest.raises(AsvError) as raised:
        project.ancestry(unknown, first)
    said = str(raised.value)
    assert "\n" not in said and "merge-base --is-ancestor 00000000" in said
    assert "not a valid commit" in said.lower() or "bad object" in said, said  # git's words
    assert not project.is_ancestor(unknown, first)
    (tmp_path / "other").mkdir()
    moved = asv_config(tmp_path / "other", repo=str(tmp_path / "gone"))  # moved or deleted
    with pytest.raises(AsvError, match="cannot run in"):
        moved.ancestry(first, first)
    assert not moved.is_ancestor(first, first)
