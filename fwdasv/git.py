"""The one git helper: every git command fwdasv runs, in a repository's directory.

`git_run` starts git through `fwdasv.launch.run_captured` (an argv, output
captured, a timeout) and returns the completed process, for a caller that reads
the exit status (`rev-parse --verify`, `merge-base --is-ancestor`); `git`
returns its stdout stripped and raises on a non-zero status; `extract` writes a
commit's tree (or some paths of it) into a directory, through `git archive`.

All three raise GitError, a UserError that keeps what went wrong as fields
(`command`, `repo`, `returncode`, `stderr`, `cause`): a caller that words git's
failures for its own users raises its own error from them.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fwdasv.core.errors import UserError
from fwdasv.launch import HELPER_TIMEOUT_S, run_captured

GIT_TIMEOUT_S = HELPER_TIMEOUT_S


class GitError(UserError):
    """git could not start, ran past its timeout (`cause` set, `returncode` None) or exited
    non-zero (`returncode`, `stderr` as git wrote it: text or bytes)."""

    def __init__(
        self,
        command: Sequence[str],
        repo: str | os.PathLike[str],
        *,
        returncode: int | None = None,
        stderr: str | bytes = "",
        cause: OSError | subprocess.TimeoutExpired | None = None,
    ) -> None:
        self.command = tuple(command)
        self.repo = Path(repo)
        self.returncode = returncode
        self.stderr = stderr
        self.cause = cause
        shown = " ".join(self.command)
        if cause is not None:
            super().__init__(f"git {shown} in {repo} could not run: {cause}")
        else:
            super().__init__(f"git {shown} in {repo} failed: {self.stderr_text}")

    @property
    def stderr_text(self) -> str:
        """git's error output as stripped text (bytes decoded, bad bytes replaced)."""
        text = (
            self.stderr.decode(errors="replace") if isinstance(self.stderr, bytes) else self.stderr
        )
        return text.strip()

    @property
    def timed_out(self) -> bool:
        return isinstance(self.cause, subprocess.TimeoutExpired)


def git_run(
    repo: str | os.PathLike[str],
    *args: str,
    text: bool = True,
    timeout_s: float = GIT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[Any]:  # stdout and stderr: str, or bytes (`text` False)
    """`git ARGS` in `repo`, whatever its exit status; GitError when it cannot start or
    times out. `env` None: this process's environment; else exactly `env`."""
    try:
        return run_captured(["git", *args], cwd=repo, env=env, timeout_s=timeout_s, text=text)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitError(args, repo, cause=error) from None


def git(
    repo: str | os.PathLike[str],
    *args: str,
    timeout_s: float = GIT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> str:
    """The stripped stdout of `git ARGS` in `repo`; GitError when it does not exit 0."""
    done = git_run(repo, *args, timeout_s=timeout_s, env=env)
    if done.returncode != 0:
        raise GitError(args, repo, returncode=done.returncode, stderr=done.stderr)
    return str(done.stdout).strip()


def extract(
    repo: str | os.PathLike[str],
    commit: str,
    destination: Path,
    paths: Sequence[str] = (),
    *,
    timeout_s: float = GIT_TIMEOUT_S,
) -> None:
    """`commit`'s tree (only `paths` of it, when given) written into `destination` (made if
    missing) through `git archive`; the repository is not touched. GitError (bytes
    `stderr`) when git fails."""
    destination.mkdir(parents=True, exist_ok=True)
    args = ("archive", "--format=tar", commit, *(("--", *paths) if paths else ()))
    done = git_run(repo, *args, text=False, timeout_s=timeout_s)
    if done.returncode != 0:
        raise GitError(args, repo, returncode=done.returncode, stderr=done.stderr)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(destination, filter="data")
        else:  # pragma: no cover (Python without extraction filters)
            archive.extractall(destination)  # a tree of a repository fwdasv was pointed at
