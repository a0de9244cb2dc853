"""vLLM commits over a compiled base: each commit's Python over the base's compiled files.

Most vLLM commits change only Python. As vLLM's own python-only install
(`VLLM_USE_PRECOMPILED=1`) does, a commit is its `vllm/` from git over the
compiled extensions of a base named once (`"fwdasv": {"vllm_base": PATH}`: a
wheel, or a directory holding an installed vllm/), offline, with no compiler
and no index, for asv's per-commit environments (`fwdasv.asv.envplugin`).

`VllmCache` owns `.fwdasv-vllm/` beside asv.conf.json: base/ (a wheel unpacked
once), trees/<commit>/ (`TreeCache`: one tree per commit, built once) and
installs.jsonl (one line per install). `VllmCache.open_base` opens the base and
pins it to its commit; `compiled_change` refuses a commit whose compiled
sources (csrc/, CMakeLists.txt, cmake/, setup.py's extension list) differ from
the base's; `activate` puts a tree first on an environment's sys.path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fwdasv.asv.settings import BASE_COMMIT_KEY, VllmBaseSettings
from fwdasv.core import installed
from fwdasv.core.errors import UserError
from fwdasv.git import GitError, extract, git, git_run

if TYPE_CHECKING:
    from fwdasv.asv.project import AsvProject

PACKAGE = "vllm"
CACHE_DIR = ".fwdasv-vllm"  # beside asv.conf.json: `VllmCache`
PTH_NAME = installed.VLLM_PTH  # sorts before the parent link (zz-...)
COMPILED_PATHS = ("csrc", "CMakeLists.txt", "cmake")
SETUP_PY = "setup.py"
GIT_TIMEOUT_S = 300.0  # a first tree of a large repository: `git archive` of all vllm/
# A line of setup.py that declares a compiled extension (vLLM's: CMakeExtension(name=...)).
_EXTENSION_LINE = re.compile(r"Extension\s*\(")


class BaseError(UserError):
    """The compiled base cannot be used (missing, no vllm/ in it, commit unknown)."""


class Refused(BaseError):
    """A commit whose compiled sources differ from the base's: not measurable over it."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[Any]:
    """`git ARGS` in `repo`, whatever its exit status."""
    try:
        return git_run(repo, *args, timeout_s=GIT_TIMEOUT_S)
    except GitError as error:
        raise BaseError(str(error)) from None


def _git_out(repo: Path, *args: str) -> str:
    try:
        return git(repo, *args, timeout_s=GIT_TIMEOUT_S)
    except GitError as error:
        raise BaseError(str(error)) from None


@dataclass(frozen=True)
class Base:
    """A directory holding an installed vllm/ package with its compiled files."""

    root: Path  # the directory that holds vllm/
    source: Path  # what the user named: the directory or the wheel

    @classmethod
    def open(cls, path: str | os.PathLike[str], unpack_dir: Path) -> Base:
        """The base at `path`; a wheel is unpacked once into `unpack_dir/<wheel name>`."""
        source = Path(path).expanduser().resolve()
        if source.is_file() and source.suffix == ".whl":
            root = unpack_dir / source.stem
            if not (root / PACKAGE / "__init__.py").is_file():
                partial = root.with_name(root.name + ".partial")
                shutil.rmtree(partial, ignore_errors=True)
                try:
                    with zipfile.ZipFile(source) as wheel:
                        wheel.extractall(partial)
                except (OSError, zipfile.BadZipFile) as error:
                    raise BaseError(
                        f"vllm_base {source}: cannot unpack the wheel: {error}"
                    ) from None
                shutil.rmtree(root, ignore_errors=True)
                partial.rename(root)
            return cls._checked(root, source)
        if source.is_dir():
            return cls._checked(source, source)
        raise BaseError(
            f"vllm_base {source}: no such wheel or directory; name a vLLM wheel (.whl) or a "
            "directory that holds an installed vllm/ package with its compiled extensions"
        )

    @classmethod
    def _checked(cls, root: Path, source: Path) -> Base:
        if not (root / PACKAGE / "__init__.py").is_file():
            raise BaseError(
                f"vllm_base {source}: holds no installed vllm/ package; name the directory "
                "that contains vllm/ (e.g. a site-packages) or a vLLM wheel"
            )
        return cls(root, source)

    @property
    def package(self) -> Path:
        return self.root / PACKAGE

    def dist_infos(self) -> list[Path]:
        return sorted(self.root.glob(f"{PACKAGE}-*.dist-info"))

    def version(self) -> str | None:
        version_py = self.package / "_version.py"
        if version_py.is_file():
            found = re.search(
                r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
                version_py.read_text(errors="replace"),
            )
            if found:
                return found.group(1)
        for info in self.dist_infos():
            return info.name[len(PACKAGE) + 1 : -len(".dist-info")]
        return None

    def recorded_commit(self) -> str | None:
        """The commit the base says it was built from, if it records one."""
        version_py = self.package / "_version.py"
        if version_py.is_file():
            found = re.search(
                r"""__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['"]g?([0-9a-f]{7,40})['"]""",
                version_py.read_text(errors="replace"),
            )
            if found:
                return found.group(1)
        for info in self.dist_infos():
            direct = info / "direct_url.json"
            if direct.is_file():
                try:
                    commit = json.loads(direct.read_text()).get("vcs_info", {}).get("commit_id")
                except (OSError, ValueError, AttributeError):
                    commit = None
                if isinstance(commit, str) and commit:
                    return commit
        return None

    def commit_in(self, repo: Path, configured: str | None = None) -> str:
        """The base's commit in `repo`: the config key, else what the base records, else
        the tag v<version>; one error naming the config key when none resolves."""
        tried: list[str] = []
        candidates: list[tuple[str, str]] = []
        if configured:
            candidates.append((configured, f'"{BASE_COMMIT_KEY}": "{configured}"'))
        recorded = self.recorded_commit()
        if recorded:
            candidates.append((recorded, f"the commit the base records ({recorded[:12]})"))
        version = self.version()
        if version:
            candidates.append((f"v{version}", f"the tag v{version} (the base's version)"))
        for rev, what in candidates:
            proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
            if proc.returncode == 0:
                return str(proc.stdout).strip()
            tried.append(what)
            if rev == configured:
                raise BaseError(
                    f'{BASE_COMMIT_KEY} "{configured}" is not a commit of {repo}; give the commit '
                    "the base was built from"
                )
        raise BaseError(
            f"vllm_base {self.source}: cannot tell which commit of {repo} it was built from "
            f"(tried {', '.join(tried) or 'nothing: it records no version'}); set "
            f'"fwdasv": {{"{BASE_COMMIT_KEY}": "COMMIT"}} in asv.conf.json'
        )


# --------------------------------------------------------------------------- the guard


def extension_list(repo: Path, commit: str) -> list[str]:
    """The lines of setup.py at `commit` that declare compiled extensions ([] without one)."""
    proc = _git(repo, "show", f"{commit}:{SETUP_PY}")
    if proc.returncode != 0:
        return []
    return [line.strip() for line in proc.stdout.splitlines() if _EXTENSION_LINE.search(line)]


def compiled_change(repo: Path, base_commit: str, commit: str) -> str | None:
    """Why `commit` cannot be measured over a base built at `base_commit` (None: it can).

    Compiled sources are csrc/, CMakeLists.txt, cmake/ and setup.py's extension
    list. The reason is one line: what differs, and the commit a base must be
    built from to serve (the last compiled-code change at or before `commit`).
    """
    if commit == base_commit:
        return None
    proc = _git(repo, "diff", "--name-only", base_commit, commit, "--", *COMPILED_PATHS)
    if proc.returncode != 0:
        raise BaseError(
            f"git diff {base_commit[:8]} {commit[:8]} in {repo} failed: {proc.stderr.strip()}"
        )
    changed = proc.stdout.split()
    if extension_list(repo, base_commit) != extension_list(repo, commit):
        changed.append("setup.py's extension list")
    if not changed:
        return None
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    last = _git(
        repo, "log", "-1", "--format=%H", commit, "--", *COMPILED_PATHS, SETUP_PY
    ).stdout.strip()
    serve = f"a base built from {last[:12]}" if last else "a base built from this commit"
    return (
        f"{commit[:8]}: compiled code differs from the base's ({base_commit[:8]}): {shown}; "
        f"not measurable over this base ({serve}, its last compiled-code change, would serve)"
    )


# --------------------------------------------------------------------------- per-commit trees


@dataclass(frozen=True)
class Installed:
    commit: str
    tree: Path  # the directory put first on sys.path (holds vllm/)
    seconds: float
    built: bool  # False: the tree was already there (cached)
    linked_from: str | None  # the commit whose tree it started from (warm bytecode)


@dataclass(frozen=True)
class TreeCache:
    """Per-commit trees of vllm/ over one base, in `root/<commit>/`.

    A tree is the commit's `vllm/` (git) with every base file the commit does
    not track (the compiled `.so` files, a generated `_version.py`, vendored
    packages) linked in, and the base's dist-info. A new tree starts as hard
    links of the last one built and only the files that differ are written (git
    diff), so unchanged files keep their `__pycache__`: a commit's imports are
    warm wherever the previous commit's were.
    """

    root: Path
    repo: Path
    base: Base

    def path(self, commit: str) -> Path:
        return self.root / commit

    def done(self, commit: str) -> bool:
        return (self.path(commit) / ".fwdasv-tree.json").is_file()

    def built(self) -> list[str]:
        """Commits with a finished tree, the most recently built first."""
        marks = [p for p in self.root.glob("*/.fwdasv-tree.json") if p.is_file()]
        marks.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        return [p.parent.name for p in marks]

    def tree(self, commit: str) -> Installed:
        """The commit's tree, built if it is not there yet."""
        started = time.perf_counter()
        final = self.path(commit)
        if self.done(commit):
            return Installed(commit, final, time.perf_counter() - started, False, None)
        self.root.mkdir(parents=True, exist_ok=True)
        work = self.root / f".{commit}.partial"
        shutil.rmtree(work, ignore_errors=True)
        previous = next(iter(self.built()), None)
        if previous is not None:
            _link_tree(self.path(previous) / PACKAGE, work / PACKAGE)
            self._apply_diff(previous, commit, work)
        else:
            self._export(commit, work, [PACKAGE])
        self._overlay_base(commit, work)
        seconds = time.perf_counter() - started
        record = {"commit": commit, "base": str(self.base.source), "linked_from": previous}
        (work / ".fwdasv-tree.json").write_text(json.dumps({**record, "seconds": seconds}) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        work.rename(final)
        return Installed(commit, final, seconds, True, previous)

    def _export(self, commit: str, destination: Path, paths: list[str]) -> None:
        try:
            extract(self.repo, commit, destination, paths, timeout_s=GIT_TIMEOUT_S)
        except GitError as error:
            if error.returncode is None:
                raise BaseError(str(error)) from None
            raise BaseError(
                f"git archive {commit[:8]} in {self.repo} failed: "
                f"{error.stderr_text} (does the commit hold vllm/?)"
            ) from None

    def _apply_diff(self, previous: str, commit: str, work: Path) -> None:
        """Turn a copy of `previous`'s tree into `commit`'s: only the files that differ."""
        listed = _git_out(
            self.repo, "diff", "--name-only", "--no-renames", previous, commit, "--", PACKAGE
        ).split("\n")
        changed = [name for name in listed if name]
        if not changed:  # (ls-tree of no paths would list the whole tree)
            return
        for name in changed:
            target = work / name
            if target.is_file() or target.is_symlink():
                target.unlink()
            cache = target.parent / "__pycache__"
            for stale in cache.glob(f"{target.stem}.*.pyc") if cache.is_dir() else ():
                stale.unlink()
        present = _git_out(self.repo, "ls-tree", "-r", "--name-only", commit, "--", *changed)
        wanted = [name for name in present.split("\n") if name]
        if wanted:
            self._export(commit, work, wanted)

    def _overlay_base(self, commit: str, work: Path) -> None:
        """Every base file the commit does not track (compiled extensions, a generated
        _version.py, vendored code), linked in; the base's dist-info beside vllm/."""
        tracked = set(
            _git_out(self.repo, "ls-tree", "-r", "--name-only", commit, "--", PACKAGE).split("\n")
        )
        for path in self.base.package.rglob("*"):
            relative = path.relative_to(self.base.root)
            if "__pycache__" in relative.parts or path.is_dir():
                continue
            if relative.as_posix() in tracked:
                continue
            target = work / relative
            if target.exists() or target.is_symlink():
                continue  # linked from the previous tree already
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
        for info in self.base.dist_infos():
            link = work / info.name
            if not link.exists():
                link.symlink_to(info, target_is_directory=True)


def _link_tree(source: Path, destination: Path) -> None:
    """A copy of `source` made of hard links (symlinks copied as links); a copy where the
    filesystem refuses hard links."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, destination, symlinks=True, copy_function=link)


def activate(site_packages: Path, tree: Path | None) -> Path:
    """Put `tree` first on sys.path in the environment (None: take it off); the .pth path.

    One .pth file, before PYTHONPATH (where an offline host keeps its own vLLM):
    switching commits costs nothing."""
    pth = site_packages / PTH_NAME
    if tree is None:
        pth.unlink(missing_ok=True)
        return pth
    line = f"import sys; sys.path.insert(0, {str(tree)!r})\n"
    partial = pth.with_name(pth.name + ".tmp")
    partial.write_text(line)
    partial.replace(pth)
    return pth


@dataclass(frozen=True)
class PinnedBase:
    """A base and the commit of `repo` it was built from: what the guard compares with."""

    base: Base
    repo: Path
    commit: str

    def refusal(self, commit: str) -> str | None:
        """Why `commit` cannot be measured over this base (None: it can)."""
        return compiled_change(self.repo, self.commit, commit)


@dataclass(frozen=True)
class VllmCache:
    """`.fwdasv-vllm/` beside asv.conf.json: base/ (unpacked wheels), trees/<commit>/ and
    installs.jsonl (one line per install: what the cost tables read)."""

    root: Path

    @classmethod
    def beside(cls, config_dir: str | os.PathLike[str]) -> VllmCache:
        """The cache of the asv configuration in `config_dir`."""
        return cls(Path(config_dir) / CACHE_DIR)

    @property
    def base_dir(self) -> Path:
        return self.root / "base"

    @property
    def trees_dir(self) -> Path:
        return self.root / "trees"

    @property
    def installs_log(self) -> Path:
        return self.root / "installs.jsonl"

    def open_base(
        self, path: str | os.PathLike[str], repo: Path, configured: str | None = None
    ) -> PinnedBase:
        """The base at `path` (a wheel unpacked into base/ once), pinned to its commit in
        `repo` (`configured`, else what it records, else the tag of its version)."""
        base = Base.open(path, self.base_dir)
        return PinnedBase(base, repo, base.commit_in(repo, configured))

    def install(self, repo: Path, commit: str, settings: VllmBaseSettings) -> Installed:
        """The commit's tree over the base (built once), after the compiled-code guard
        (Refused); appends one line to `installs_log`."""
        assert settings.base, "install needs a vllm_base"
        started = time.perf_counter()
        pinned = self.open_base(settings.base, repo, settings.base_commit)
        reason = pinned.refusal(commit)
        if reason is not None:
            raise Refused(reason)
        installed = TreeCache(self.trees_dir, repo, pinned.base).tree(commit)
        entry = {
            "commit": commit,
            "built": installed.built,
            "linked_from": installed.linked_from,
            "tree_s": round(installed.seconds, 3),
            "install_s": round(time.perf_counter() - started, 3),
            "at": time.time(),
        }
        with self.installs_log.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        return installed


Guard = Callable[[str], "str | None"]  # commit -> why it is refused (None: measurable)


def project_guard(config_path: Path, settings: object, repo: str) -> Guard | None:
    """For a project in this mode (its "fwdasv" block `settings` names a vllm_base): a
    function commit -> the refusal line, or None when measurable; None for any other
    project."""
    vllm = VllmBaseSettings.from_block(settings)
    if not vllm.base:
        return None
    cache = VllmCache.beside(config_path.parent)
    return cache.open_base(vllm.base, Path(repo), vllm.base_commit).refusal


def compiled_guard(project: AsvProject) -> Guard | None:
    """`project_guard` of a loaded project, from its settings (read once) and its clone."""
    vllm = project.settings.vllm
    if not vllm.base:
        return None
    cache = VllmCache.beside(project.config_path.parent)
    return cache.open_base(vllm.base, project.cloned_repo(), vllm.base_commit).refusal
