"""Which commits a history is read for: hash prefixes, and git ranges resolved in the clone.

`parse_commit_filter` turns `A..B` (or `A...B`) into the commits `git rev-list`
lists there, merges' other parents included (unlike asv's `--first-parent` runs:
an export should not hide results asv did store); anything else is a hash
prefix. `CommitFilter` matches full hashes and prefixes, and pre-checks a result
file's name (asv's names carry sha[:8]) before the file is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fwdasv.asv.result_files import HistoryError
from fwdasv.git import GitError, git_run

GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class CommitFilter:
    """A set of commits: full hashes and/or hash prefixes (asv's file names carry sha[:8])."""

    prefixes: frozenset[str]
    _full: frozenset[str] = field(init=False, repr=False, compare=False)
    _partial: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _sha8: frozenset[str] = field(init=False, repr=False, compare=False)
    _short: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        prefixes = frozenset(p.lower() for p in self.prefixes)
        object.__setattr__(self, "prefixes", prefixes)
        # Sets for the long ones: a resolved range can hold thousands of full hashes.
        object.__setattr__(self, "_full", frozenset(p for p in prefixes if len(p) == 40))
        object.__setattr__(self, "_partial", tuple(p for p in prefixes if len(p) < 40))
        object.__setattr__(self, "_sha8", frozenset(p[:8] for p in prefixes if len(p) >= 8))
        object.__setattr__(self, "_short", tuple(p for p in prefixes if len(p) < 8))

    def matches(self, commit_hash: str) -> bool:
        commit_hash = commit_hash.lower()
        return commit_hash in self._full or commit_hash.startswith(self._partial)

    def may_match_file(self, sha8: str) -> bool:
        """Cheap pre-check on a result file's name, before the file is read."""
        sha8 = sha8.lower()
        return sha8 in self._sha8 or sha8.startswith(self._short)


_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


def parse_commit_filter(specs: Iterable[str], repo: str | os.PathLike[str] | None) -> CommitFilter:
    """`A..B` (or `A...B`) ranges via `git rev-list` in `repo`; anything else is a hash prefix.

    Several specs (or a comma-separated list) add up. A range takes every commit
    git lists, merges' other parents included, unlike asv's `--first-parent`
    runs: an export should not hide results asv did store.
    """
    prefixes: set[str] = set()
    for spec in specs:
        if not spec.replace(",", "").strip():
            raise HistoryError(
                f"--commits {spec!r} names no commit; give hash prefixes (comma-separated) or "
                "a range A..B, or leave --commits out to take every commit"
            )
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            if ".." in part:
                prefixes.update(_rev_list(part, repo))
            elif _HEX.match(part):
                prefixes.add(part.lower())
            else:
                raise HistoryError(
                    f"commit {part!r} is neither a hash prefix (4-40 hex digits) nor a git "
                    "range A..B; give hashes, or a range with --repo pointing at the project's clone"
                )
    return CommitFilter(frozenset(prefixes))


def _rev_list(range_spec: str, repo: str | os.PathLike[str] | None) -> list[str]:
    if repo is None:
        raise HistoryError(
            f"the commit range {range_spec!r} needs the project's git clone to resolve it: "
            "add --repo DIR (asv.conf.json's 'repo')"
        )
    repo = Path(repo)
    if not repo.is_dir():
        raise HistoryError(f"--repo {repo}: no such directory (give the project's git clone)")
    try:
        done = git_run(repo, "rev-list", range_spec, "--", timeout_s=GIT_TIMEOUT_S)
    except GitError as error:
        if isinstance(error.cause, FileNotFoundError):
            raise HistoryError(
                "git is not installed; give commit hashes instead of a range"
            ) from None
        if error.timed_out:
            raise HistoryError(
                f"git rev-list {range_spec} in {repo} took over {GIT_TIMEOUT_S} s"
            ) from None
        raise
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"
        raise HistoryError(
            f"git rev-list {range_spec!r} failed in {repo}: {reason} "
            "(check both ends exist there: git fetch, or fix the names)"
        )
    listed = [line.strip().lower() for line in done.stdout.splitlines() if line.strip()]
    old, dots, new = range_spec.partition("..")
    if not listed and dots and old and new and not new.startswith("."):
        try:  # turned round, does it hold commits? (git failing here leaves the range empty)
            turned = git_run(repo, "rev-list", "--max-count=1", f"{new}..{old}", "--")
        except GitError:
            return listed
        if turned.returncode == 0 and turned.stdout.strip():
            raise HistoryError(
                f"the commit range {range_spec!r} holds no commit: {new} is older than "
                f"{old}; write it oldest first, {new}..{old}"
            )
    return listed
