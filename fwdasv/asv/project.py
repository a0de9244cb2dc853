"""Driving asv: its configuration, its commands, and the commits of its repository.

fwdasv never reimplements what asv does (building environments, running
benchmarks, publishing); it runs asv's own commands as subprocesses, with
progress passed through, and reads what they write. This module is where those
commands are put together, so every caller (demo, bisect, nightly) runs asv the
same way: `--record-samples` (samples are what significance needs), with the
project's own launch method (`fwdasv init` writes forkserver: the suites import no
torch, so a fork of asv's server is safe and saves a process start per benchmark;
a configuration without one gets asv's default, spawn). `AsvProject.settings` is
the configuration's `"fwdasv"` block (`fwdasv.asv.settings`), read once.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.asv.locked_machine import MACHINE_FILE_ENV
from fwdasv.asv.locked_machine import MODULE as LOCKED_ASV
from fwdasv.asv.offline_site import make_self_contained
from fwdasv.asv.settings import FwdasvSettings
from fwdasv.asv.unmeasured import drop_unmeasured
from fwdasv.core.errors import UserError
from fwdasv.core.files import Owned, check_outside
from fwdasv.core.verdicts import VerdictSettings
from fwdasv.git import GitError, git, git_run
from fwdasv.launch import LaunchError, LaunchSpec, run_process


class AsvError(UserError):
    """asv could not be run, or failed, or its configuration is unusable."""


def _asv_error(error: GitError, args: Sequence[str], repo: Path) -> AsvError:
    """A GitError of `git ARGS` in the project's clone as one AsvError line."""
    if isinstance(error.cause, OSError):
        return AsvError(f"git {' '.join(args)} cannot run in {repo}: {error.cause.strerror}")
    if error.timed_out:
        return AsvError(f"git {' '.join(args)} in {repo} did not finish in time")
    return AsvError(str(error))


@dataclass(frozen=True)
class AsvProject:
    """An asv configuration file and the directories it names (absolute)."""

    config_path: Path
    repo: str
    results_dir: Path
    html_dir: Path
    env_dir: Path
    benchmark_dir: Path
    branches: tuple[str, ...]
    environment_type: str
    raw: Mapping[str, object]  # asv.conf.json as parsed: asv's keys and fwdasv's block

    @classmethod
    def load(cls, config_path: str | os.PathLike[str]) -> AsvProject:
        path = Path(config_path).resolve()
        if not path.is_file():
            if path.exists():  # a directory, a device: `--config .` or `--config /dev/null`
                raise AsvError(
                    f"asv configuration {path} is not a file; pass --config PATH of an "
                    "asv.conf.json"
                )
            raise AsvError(f"asv configuration {path} does not exist; pass --config PATH")
        try:
            import json5

            raw = json5.loads(path.read_text())
        except Exception as error:
            raise AsvError(f"asv configuration {path} cannot be read: {error}") from None
        base = path.parent

        def directory(key: str, default: str) -> Path:
            return Path(base, raw.get(key, default)).resolve()

        repo = raw.get("repo", ".")
        if "://" not in repo and not repo.startswith("git@"):
            repo = str((base / repo).resolve())
        return cls(
            config_path=path,
            repo=repo,
            results_dir=directory("results_dir", "results"),
            html_dir=directory("html_dir", "html"),
            env_dir=directory("env_dir", "env"),
            benchmark_dir=directory("benchmark_dir", "benchmarks"),
            branches=tuple(raw.get("branches") or ("main",)),
            environment_type=raw.get("environment_type", "virtualenv"),
            raw=raw,
        )

    @functools.cached_property
    def settings(self) -> FwdasvSettings:
        """The configuration's `"fwdasv"` block, read at first use (SettingsError naming a
        malformed key, every time it is asked for)."""
        return FwdasvSettings.from_config(self.raw, str(self.config_path))

    def verdict_settings(self) -> VerdictSettings:
        """The verdict part of `settings`."""
        return self.settings.verdicts

    @property
    def local_repo(self) -> Path | None:
        """The repository on disk: the configured path, or asv's mirror of a URL."""
        if "://" not in self.repo and not self.repo.startswith("git@"):
            return Path(self.repo)
        mirror = self.config_path.parent / str(self.raw.get("project", "project"))
        return mirror if mirror.is_dir() else None

    def cloned_repo(self) -> Path:
        """`local_repo`, or AsvError when asv has not cloned the configured URL yet."""
        repo = self.local_repo
        if repo is None:
            raise AsvError(
                f"asv has not cloned {self.repo} yet; run `asv run` (or `asv fetch`) once first"
            )
        return repo

    def git_run(self, *args: str) -> subprocess.CompletedProcess[Any]:
        """`git ARGS` in the clone, whatever its exit status; AsvError, one line, when git
        cannot run there (no clone yet, a repository moved or deleted since asv.conf.json
        was written, no git) or does not finish in time."""
        repo = self.cloned_repo()
        try:
            return git_run(repo, *args)
        except GitError as error:
            raise _asv_error(error, args, repo) from None

    def git(self, *args: str) -> str:
        """The stripped stdout of `git ARGS` in the clone; AsvError when it does not exit 0
        (or cannot run: `git_run`)."""
        repo = self.cloned_repo()
        try:
            return git(repo, *args)
        except GitError as error:
            raise _asv_error(error, args, repo) from None

    def resolve(self, rev: str) -> str:
        """A full commit hash for `rev` (a branch, tag or hash prefix)."""
        try:
            return self.git("rev-parse", "--verify", f"{rev}^{{commit}}")
        except AsvError:
            raise AsvError(f"{rev!r} is not a commit of {self.local_repo}") from None

    def first_parent_range(self, good: str, bad: str) -> list[str]:
        """Commits after `good` up to `bad` on the first-parent line, oldest first."""
        good_hash, bad_hash = self.resolve(good), self.resolve(bad)
        if good_hash == bad_hash:
            raise AsvError(f"{good} and {bad} are the same commit")
        if not self.ancestry(good_hash, bad_hash):
            raise AsvError(f"{good} is not an ancestor of {bad}; write GOOD..BAD oldest first")
        listed = self.git("rev-list", "--first-parent", "--reverse", f"{good_hash}..{bad_hash}")
        return listed.splitlines()

    def ancestry(self, older: str, newer: str) -> bool:
        """Whether commit `older` is an ancestor of `newer` (or is it): `git merge-base
        --is-ancestor`. AsvError, with git's own reason, where git cannot tell: no clone on
        disk, no git, a name it cannot read."""
        done = self.git_run("merge-base", "--is-ancestor", older, newer)
        if done.returncode not in (0, 1):
            raise AsvError(
                f"git merge-base --is-ancestor {older[:8]} {newer[:8]}: "
                f"{str(done.stderr).strip() or f'exit {done.returncode}'}"
            )
        return done.returncode == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        """`ancestry`, False where git cannot tell (the callers that only refuse a pair git
        can place)."""
        try:
            return self.ancestry(older, newer)
        except AsvError:
            return False

    def subject(self, commit: str) -> str:
        return self.git("log", "-1", "--format=%s", commit)

    def owned(self) -> tuple[Owned, ...]:
        """What the project reads or rewrites itself: asv.conf.json, the results directory
        (asv's results, machine.json and benchmarks.json, fwdasv's verdicts file), the
        benchmark directory's Python modules (its other files are no suite's) and the html
        directory (`asv publish` rebuilds it)."""
        return (
            Owned(self.config_path, "the project's asv configuration", "every command reads it"),
            results_owned(self.results_dir),
            Owned(
                self.benchmark_dir,
                "a Python module of the project's benchmark directory",
                "asv imports every one as a suite",
                tree=True,
                suffix=".py",
            ),
            Owned(
                self.html_dir, "the project's html directory", "asv publish rewrites it", tree=True
            ),
        )

    def check_output(self, path: str | os.PathLike[str], *, what: str) -> Path:
        """`path`, unless it is one of the project's own files (`owned`): one line naming
        `what` (the option) and the fix, before anything is measured or written."""
        return check_outside(path, self.owned(), what=what)

    def machines(self) -> list[str]:
        """The machines with stored results (a results/<machine>/machine.json each)."""
        if not self.results_dir.is_dir():
            return []
        return sorted(p.name for p in self.results_dir.iterdir() if (p / "machine.json").is_file())

    def only_machine(self) -> str:
        """The one machine with results, or one error asking for --machine."""
        machines = self.machines()
        if len(machines) != 1:
            found = ", ".join(machines) if machines else "none yet"
            raise AsvError(f"pick the asv machine with --machine (results have: {found})")
        return machines[0]


def results_owned(results_dir: Path) -> Owned:
    """A results directory as `Owned`: asv's results and fwdasv's verdicts live there."""
    return Owned(
        results_dir, "the project's results directory", "asv and fwdasv read it", tree=True
    )


# asv's own timeouts guard each benchmark; this one only ends a wedged asv.
ASV_TIMEOUT_S = 7 * 24 * 3600.0


def run_asv(
    project: AsvProject,
    command: str,
    *args: str,
    python: str = sys.executable,
    echo: Callable[[str], None] | None = print,
    env: dict[str, str] | None = None,
    check_codes: Sequence[int] = (0,),
    timeout_s: float = ASV_TIMEOUT_S,
    machine_file: str | os.PathLike[str] | None = None,
) -> int:
    """Run `asv COMMAND --config ... ARGS` through `fwdasv.launch`; returns its exit status.

    Its output streams to `echo` and to a log beside the results
    (`.fwdasv-logs/asv-COMMAND-<pid>.log`); a status outside `check_codes` is an
    AsvError with the log's tail. asv has no option for its machine file: with
    `machine_file`, asv runs under `fwdasv.asv.locked_machine`, which reads that one.
    """
    module, extra_env = "asv", {}
    if machine_file is not None:
        module = LOCKED_ASV
        extra_env = {MACHINE_FILE_ENV: str(Path(machine_file).expanduser().resolve())}
    spec = LaunchSpec(
        args=["-m", module, command, "--config", str(project.config_path), *args],
        python=python,
        env={**(env or {}), **extra_env},
        timeout_s=timeout_s,
        cwd=str(project.config_path.parent),
    )
    log = project.results_dir.parent / ".fwdasv-logs" / f"asv-{command}-{os.getpid()}.log"
    try:
        completed = run_process(spec, log, echo)
    except LaunchError as error:
        raise AsvError(f"asv {command} could not run to the end: {error}") from None
    if completed.returncode not in check_codes:
        tail = "\n".join(completed.lines[-25:])
        raise AsvError(
            f"asv {command} exited with status {completed.returncode} (log {log}):\n{tail}"
        )
    return completed.returncode


HASHFILE_PREFIX = ".fwdasv-commits-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def sweep_hashfiles(directory: Path) -> list[Path]:
    """Remove the hash files of runs whose process is gone (killed before its cleanup)."""
    removed = []
    for path in sorted(directory.glob(f"{HASHFILE_PREFIX}*.txt")):
        pid = path.stem[len(HASHFILE_PREFIX) :]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def run_commits(
    project: AsvProject,
    commits: Sequence[str],
    machine: str,
    **kwargs: Any,
) -> int:
    """Measure exactly `commits` (through a HASHFILE); see `run_spec`.

    The hash file is removed when asv is done, even on Ctrl-C; one a killed run
    left behind (SIGTERM, SIGKILL: no cleanup runs) is removed by the next run.
    """
    sweep_hashfiles(project.results_dir.parent)
    if not commits:
        return 0
    hashfile = project.results_dir.parent / f"{HASHFILE_PREFIX}{os.getpid()}.txt"
    hashfile.parent.mkdir(parents=True, exist_ok=True)
    hashfile.write_text("\n".join(commits) + "\n")
    try:
        return run_spec(project, f"HASHFILE:{hashfile}", machine, **kwargs)
    finally:
        hashfile.unlink(missing_ok=True)


def run_spec(
    project: AsvProject,
    spec: str,
    machine: str,
    *,
    bench: Sequence[str] = (),
    extra: Sequence[str] = (),
    append_samples: bool = False,
    skip_existing: bool = True,
    python: str = sys.executable,
    echo: Callable[[str], None] | None = print,
    env: dict[str, str] | None = None,
    machine_file: str | os.PathLike[str] | None = None,
) -> int:
    """`asv run SPEC` (a range `A..B`, a branch, `HASHFILE:f`); returns asv's exit status.

    Samples are always recorded (`--append-samples` adds to stored ones). Status
    2 means some benchmark failed (e.g. a refused case); the others' results
    are saved, so it is not an error here.
    """
    args = run_args(
        spec, machine, bench=bench, append_samples=append_samples, skip_existing=skip_existing
    )
    return run_asv(
        project,
        "run",
        *args,
        *extra,
        python=python,
        echo=echo,
        env=env,
        check_codes=RUN_OK,
        machine_file=machine_file,
    )


# `asv run`'s statuses that mean it ran: 2 is some benchmark failed, the rest saved.
RUN_OK = (0, 2)
# The range specs `asv run` reads itself rather than giving them to git.
ASV_SPECS = ("NEW", "ALL", "EXISTING", "TAGS", "HEAD")


def check_spec(project: AsvProject, spec: str, what: str = "--spec") -> None:
    """Refuse, in one line, an `asv run` range that asv would fail on after the work before
    it (a night's clock setup and machine file): a git range that git cannot read
    (`git rev-list --first-parent SPEC --`, as asv runs it), a HASHFILE that is no
    file, or A..B reversed (B an ancestor of A: asv selects no commit, and a night would
    judge only what it judged before; compare and explain refuse such a pair alike). Not
    checked: asv's own words (NEW, ALL, ...) and a repository asv has not cloned yet."""
    if spec in ASV_SPECS:
        return
    hint = "give NEW, ALL, A..B, a branch, a commit or HASHFILE:FILE (asv run's range)"
    if spec.startswith("HASHFILE:"):
        path = spec.removeprefix("HASHFILE:")
        if path != "-" and not Path(path).is_file():
            raise UserError(f"{what} {spec}: {path} is not a file; {hint}")
        return
    repo = project.local_repo
    if repo is None or not repo.is_dir():
        return
    try:
        words = shlex.split(spec)
    except ValueError as error:
        raise UserError(f"{what} {spec!r}: {error}; {hint}") from None
    if not words:
        raise UserError(f"{what} {spec!r}: no range; {hint}")
    try:
        done = git_run(repo, "rev-list", "--first-parent", "--max-count=1", *words, "--")
    except GitError:
        return  # git cannot run here: asv will say so
    if done.returncode not in (0, 1):
        said = str(done.stderr).strip().splitlines()
        raise UserError(
            f"{what} {spec!r}: git cannot read it in {repo} ({said[0] if said else 'no output'}); "
            f"{hint}"
        )
    _refuse_reversed(project, words, what)


def _refuse_reversed(project: AsvProject, words: Sequence[str], what: str) -> None:
    """A UserError when `words` is one range A..B whose B is an ancestor of A (not A...B,
    nor a range with an end left out)."""
    good, dots, bad = words[0].partition("..") if len(words) == 1 else ("", "", "")
    if not dots or not good or not bad or bad.startswith("."):
        return
    try:
        first, second = project.resolve(good), project.resolve(bad)
    except AsvError:
        return  # not two commits (git read it as something else): asv's to say
    if first != second and project.is_ancestor(second, first):
        raise UserError(
            f"{what} {words[0]!r} is reversed: {bad!r} ({second[:8]}) is an ancestor of "
            f"{good!r} ({first[:8]}); asv run measures the commits after A up to B, the "
            f"earlier first: {what} {bad}..{good}"
        )


def run_args(
    spec: str,
    machine: str,
    *,
    bench: Sequence[str] = (),
    append_samples: bool = False,
    skip_existing: bool = True,
) -> list[str]:
    """What follows `asv run` (see `run_spec`): the one place its arguments are put together."""
    args = [spec, "--machine", machine, "--show-stderr"]
    args.append("--append-samples" if append_samples else "--record-samples")
    if skip_existing and not append_samples:
        args.append("--skip-existing-successful")
    for pattern in bench:
        args += ["--bench", pattern]
    return args


def publish_site(
    project: AsvProject, python: str = sys.executable, echo: Callable[[str], None] | None = print
) -> Path:
    """`asv publish`, then the site made to work offline (fwdasv.asv.offline_site), without
    the series no timer measured (fwdasv.asv.unmeasured). asv's sub-item lines are shown
    once: it reads the results at three of its stages and names an unreadable file at
    each."""
    run_asv(project, "publish", python=python, echo=None if echo is None else _once(echo))
    make_self_contained(project.html_dir)
    dropped = drop_unmeasured(project.html_dir)
    if dropped and echo is not None:
        echo(f"not published (measured by no timer here): {', '.join(dropped)}")
    return project.html_dir


_PROGRESS = re.compile(r"^\[\s*[\d.]+%\]\s*")  # asv's "[33.33%] " before each line


def _once(echo: Callable[[str], None]) -> Callable[[str], None]:
    """`echo`, passing over an asv sub-item line ("[88.89%] ·· Error parsing JSON in file
    ...") whose text after the progress figure it has already passed on."""
    seen: set[str] = set()

    def say(line: str) -> None:
        text = _PROGRESS.sub("", line)
        if text.startswith("··"):
            if text in seen:
                return
            seen.add(text)
        echo(line)

    return say


def site_hint(project: AsvProject) -> list[str]:
    """Where the published site is and how to open it (it loads JSON: it needs a web server)."""
    asv = "asv" if shutil.which("asv") else f"{sys.executable} -m asv"
    return [
        f"site: {project.html_dir / 'index.html'}",
        f"to view it: {asv} preview --config {project.config_path}   (serves it and prints "
        "the address; --browser opens it)",
        f"   or copy {project.html_dir}/ to any web server; file:// does not work (the page "
        "loads JSON)",
    ]
