"""The repository `fwdasv init` measures: a local git clone at its HEAD, its target checked there.

`Repository.open` refuses what asv cannot measure (no directory, no git, no
commit yet); `commit_url` is where a browser shows one of its commits, from its
remote (`web_commit_url`: GitHub, GitLab, Bitbucket, over https or ssh).
`check_target` imports the target from a copy of HEAD's tree, builds it and
prepares every case, in a child (`python -m fwdasv.targets.check`: torch and the
model stay out of this process), on the import path asv's environment gives a
commit: the suite's target_path, then what pip installs from the tree (a package:
installed into a scratch directory as asv installs each commit, so a setup.py that
installs no module fails here, with the fix), or the tree install's import paths
(`fwdasv.asv.treeinstall`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fwdasv.asv import treeinstall
from fwdasv.asv.suitespec import InitError, SuiteSpec
from fwdasv.git import GitError, extract, git, git_run
from fwdasv.launch import LaunchError, LaunchSpec, run_process

CHECK_TIMEOUT_S = 900.0
# A remote as git spells it: scheme://[user@]host[:port]/path or scp-like user@host:path.
_URL_REMOTE = re.compile(
    r"^(?:https?|ssh|git)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+)$"
)
_SCP_REMOTE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^/:]+):(?P<path>[^/].*)$")
# Where each forge shows one commit: the web URL of the repository, then this, then the hash.
COMMIT_PATHS = {"github.com": "/commit/", "gitlab.com": "/-/commit/", "bitbucket.org": "/commits/"}


def web_commit_url(remote: str) -> str | None:
    """The URL a commit's hash is appended to for the page that shows it, from a git remote
    (git@github.com:o/r.git, https://github.com/o/r(.git), ssh://git@github.com/o/r);
    None for a host whose pages fwdasv does not know, or a local path."""
    remote = remote.strip()
    match = _URL_REMOTE.match(remote) or (None if "://" in remote else _SCP_REMOTE.match(remote))
    if match is None:
        return None
    host = match.group("host").lower()
    path = match.group("path").strip("/").removesuffix(".git")
    if host not in COMMIT_PATHS or path.count("/") < 1:
        return None
    return f"https://{host}/{path}{COMMIT_PATHS[host]}"


def _git(repo: Path, *args: str) -> str:
    try:
        return git(repo, *args)
    except GitError as error:
        raise InitError(str(error)) from None


@dataclass(frozen=True)
class Repository:
    """A local git repository at its HEAD."""

    root: Path
    head: str
    branch: str | None  # None: a detached HEAD

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Repository:
        path = Path(path).expanduser().resolve()
        if not path.is_dir():
            raise InitError(f"--repo {path}: no such directory; give a local git clone")
        try:
            root = Path(_git(path, "rev-parse", "--show-toplevel"))
        except InitError:
            raise InitError(
                f"--repo {path} is not a git repository; asv measures commits: give a git clone"
            ) from None
        try:
            head = _git(root, "rev-parse", "--verify", "HEAD^{commit}")
        except InitError:
            raise InitError(f"--repo {root} has no commit yet; commit the model first") from None
        try:
            branch = git_run(root, "symbolic-ref", "--quiet", "--short", "HEAD").stdout.strip()
        except GitError:
            branch = ""  # detached or unreadable: the caller asks for --branch
        return cls(root, head, branch or None)

    def commit_url(self) -> str | None:
        """Its commits' web URL prefix (`web_commit_url`) from the remote `origin`, else the
        first remote with one; None when it has no such remote."""
        try:
            names = git_run(self.root, "remote").stdout.split()
        except GitError:
            return None
        for name in sorted(names, key=lambda n: n != "origin"):
            try:
                remote = git_run(self.root, "remote", "get-url", name).stdout
            except GitError:
                continue
            url = web_commit_url(remote)
            if url is not None:
                return url
        return None

    def branches(self) -> list[str]:
        """Its local branches."""
        listed = _git(self.root, "for-each-ref", "--format=%(refname:short)", "refs/heads")
        return listed.splitlines()

    def distribution_name(self) -> str | None:
        """The `[project] name` of its pyproject.toml at HEAD, if it has one."""
        try:
            text = _git(self.root, "show", f"{self.head}:pyproject.toml")
        except InitError:
            return None
        if sys.version_info >= (3, 11):
            import tomllib

            try:
                name = tomllib.loads(text).get("project", {}).get("name")
            except tomllib.TOMLDecodeError:
                return None
            return name if isinstance(name, str) and name else None
        match = re.search(r'^\s*name\s*=\s*"([^"]+)"', text, re.MULTILINE)  # no tomllib
        return match.group(1) if match else None

    def packaging(self) -> str | None:
        """Which of setup.py / pyproject.toml its HEAD has at the root (pip installs it); None:
        not a package."""
        for name in ("pyproject.toml", "setup.py"):
            found = git_run(self.root, "cat-file", "-e", f"{self.head}:{name}")
            if found.returncode == 0:
                return name
        return None

    def export(self, commit: str, destination: Path) -> None:
        """The tree of `commit` written into `destination` (the repository is not touched)."""
        try:
            extract(self.root, commit, destination)
        except GitError as error:
            if error.returncode is None:
                raise InitError(
                    f"git archive {commit[:8]} in {self.root} could not run: {error.cause}"
                ) from None
            raise InitError(
                f"git archive {commit[:8]} in {self.root} failed: {error.stderr!r}"
            ) from None


def import_root(tree: Path, package: str) -> Path | None:
    """Where `package` is importable from in a source tree: the tree itself or its src/."""
    for base in (tree, tree / "src"):
        if (base / package).is_dir() or (base / f"{package}.py").is_file():
            return base
    return None


# pip as fwdasv's environment runs it per commit (`fwdasv.asv.envplugin.INSTALL_COMMAND`).
PIP_INSTALL = [
    "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--no-compile",
    "--disable-pip-version-check", "--quiet",
]  # fmt: skip


def _pip_install(tree: Path, target: Path, python: str, timeout_s: float) -> str | None:
    """The package in `tree` pip-installed into `target`, as asv installs each commit; the
    failure's last line, or None."""
    spec = LaunchSpec(
        args=[*PIP_INSTALL, "--target", str(target), str(tree)],
        python=python,
        timeout_s=timeout_s,
        cwd=str(tree.parent),
    )
    try:
        completed = run_process(spec, tree.parent / "pip.log")
    except LaunchError as error:
        return error.summary
    if completed.returncode == 0:
        return None
    lines = [line.strip() for line in completed.lines if line.strip()]
    return lines[-1] if lines else f"exit status {completed.returncode}"


def _repo_roots(tree: Path, import_paths: Sequence[str] | None, installed: Path) -> list[Path]:
    """Where the commit's modules are imported from, as asv's environment will have them:
    the tree install's `import_paths`, or for a package what pip installed (`installed`)."""
    if import_paths is not None:
        return [tree / treeinstall.check_import_path(p) for p in import_paths]
    return [installed]


def _holds(base: Path, package: str) -> bool:
    return (base / package).is_dir() or (base / f"{package}.py").is_file()


def _refuse_uninstalled(repo: Repository, suite: SuiteSpec, tree: Path, module: str) -> None:
    """InitError with the fix when the checkout holds `module` and the package pip makes of
    it does not: every commit would fail `No module named ...` where a check of the tree
    passes."""
    in_tree = import_root(tree, module)
    if in_tree is None:
        return
    where = "." if in_tree == tree else "src"
    raise InitError(
        f"--target {suite.target}: {module!r} is in {repo.root.name}'s checkout but not in the "
        f"package pip installs from its {repo.packaging()}, so every commit would fail `No "
        f"module named {module!r}`; pass --import-path {where} to put each checkout on the "
        "import path instead (or make the package install it)"
    )


def check_target(
    repo: Repository,
    suite: SuiteSpec,
    *,
    import_paths: Sequence[str] | None = None,
    timeout_s: float = CHECK_TIMEOUT_S,
    python: str = sys.executable,
) -> str:
    """Import the target from the repository's HEAD, build it and prepare every case.

    Runs `python -m fwdasv.targets.check` in a child (torch and the model stay
    out of this process) on a copy of HEAD's tree, on the import path asv's
    environment gives a commit: the suite's target_path, then what pip installs from
    the tree (or its `import_paths`, given or for a repository that is not a package);
    returns the child's summary line, or raises InitError with its last lines (and
    `--import-path` when the checkout holds a module the installed package lacks).
    """
    commit = repo.head[:8]
    with tempfile.TemporaryDirectory(prefix="fwdasv-init-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        repo.export(repo.head, tree)
        missing = treeinstall.missing_paths(tree, import_paths or ())
        if missing:
            raise InitError(
                f"--import-path {missing[0]}: no such directory in {repo.root} at {commit}; "
                "name directories of the repository (`.` for its root)"
            )
        installed = Path(tmp) / "installed"
        if import_paths is None:
            failed = _pip_install(tree, installed, python, timeout_s)
            if failed is not None:
                raise InitError(
                    f"--target {suite.target} at {commit}: pip cannot install {repo.root.name} "
                    f"({repo.packaging()}) as asv will at each commit: {failed}; fix its "
                    "packaging, or pass --import-path . to put each checkout on the import "
                    "path instead"
                )
        roots = _repo_roots(tree, import_paths, installed)
        outside = [Path(p) for p in suite.target_path]
        found = [base for base in (*outside, *roots) if _holds(base, suite.package)]
        if not found and import_paths is None:
            _refuse_uninstalled(repo, suite, tree, suite.package)
        if not found:
            looked = (
                f"what pip installs from its {repo.packaging()}"
                if import_paths is None
                else ", ".join("./" if p in (".", "./") else f"{p}/" for p in import_paths)
            )
            where = f"in {repo.root} at {commit} (looked in {looked})"
            if outside:
                where += f" nor in --target-path {', '.join(map(str, outside))}"
            raise InitError(
                f"--target {suite.target}: package {suite.package!r} is not {where}; the target "
                "must come from the repository asv installs at each commit, or from a directory "
                "outside it named with --target-path DIR"
            )
        path = [
            *map(str, outside),
            *map(str, roots),
            *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
        ]
        args = ["-m", "fwdasv.targets.check", "--target", suite.target]
        for case in suite.cases:
            args += ["--case", case]
        spec = LaunchSpec(
            args=args,
            python=python,
            env={**dict(suite.env), "PYTHONPATH": os.pathsep.join(path)},
            timeout_s=timeout_s,
            cwd=tmp,
        )
        try:
            completed = run_process(spec, Path(tmp) / "check.log")
        except LaunchError as error:
            raise InitError(
                f"--target {suite.target} at {commit}: the check {error}; pass --no-check to "
                "skip it"
            ) from None
        lines = [line for line in completed.lines if line.strip()]
        why = lines[-1] if lines else f"exit status {completed.returncode}"
        unfound = re.search(r"No module named '([A-Za-z0-9_]+)'", why)
        if completed.returncode != 0 and unfound and import_paths is None:
            _refuse_uninstalled(repo, suite, tree, unfound.group(1))
    if completed.returncode != 0:
        raise InitError(
            f"--target {suite.target} at {commit} of {repo.root}: {why.removeprefix('fwdasv: ')} "
            "(fix the target, or pass --no-check when it needs a build first)"
        )
    summary = [line for line in completed.lines if line.startswith("ok:")]
    return summary[-1].removeprefix("ok: ") if summary else "ok"
