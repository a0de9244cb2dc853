"""A new asv project: what `fwdasv init` (and the demo) write, after checking the repository.

`init_project` checks the repository and its target (`fwdasv.asv.repository`), then
writes, in one directory, `asv.conf.json` (`project_config`) and
`benchmarks/forward.py` (a `SuiteSpec` suite and the canary); `init_vllm_project`
writes fwdasv's vLLM suites over a compiled base. asv creates one network-free
environment (`fwdasv.asv.envplugin`) and installs the repository at each commit.
The configuration carries asv's `regressions_thresholds` (asv's own detector on the
site: a latency step above DEFAULT_THRESHOLD; validation series never flagged) and the
`"fwdasv"` block (`fwdasv.asv.settings`): `min_effect_pct` (the default of
`--min-effect`) and `confirm` (whether `fwdasv nightly` re-measures a step before its
gate counts it). Where the repository's pages are known (vLLM's GitHub; a GitHub, GitLab
or Bitbucket remote) it sets asv's `show_commit_url`, so commit links open the commit
(else `fwdasv publish` points them at its own commits page).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.asv import envplugin, treeinstall
from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import MACHINE_KEY, ProjectMachine
from fwdasv.asv.repository import Repository, check_target
from fwdasv.asv.settings import FwdasvSettings, VllmBaseSettings
from fwdasv.asv.suitespec import (
    CANARY_CLASS,
    InitError,
    SuiteSpec,
    canary_suite,
)
from fwdasv.asv.vllm_base import BaseError, VllmCache
from fwdasv.core.files import write_atomic

DEFAULT_THRESHOLD = 0.05  # asv's regressions_thresholds for latency: a fraction
VLLM_COMMIT_URL = "https://github.com/vllm-project/vllm/commit/"
SUITE_MODULE = "forward"


# --------------------------------------------------------------------------- the files


def project_config(
    repo: str,
    project: str,
    *,
    branch: str = "main",
    env_dir: str = "env",
    regression_threshold: float = DEFAULT_THRESHOLD,
    import_paths: Sequence[str] | None = None,
    settings: FwdasvSettings | None = None,
    commit_url: str | None = None,
    machine: ProjectMachine | None = None,
) -> dict[str, Any]:
    """asv.conf.json for a repository installed per commit into fwdasv's environment.

    `import_paths` None: pip installs the repository (a package); else its checkout
    goes on the import path, these directories of it (`fwdasv.asv.treeinstall`).
    `settings` None: the default `"fwdasv"` block. `commit_url`: asv's
    `show_commit_url` (and its repository page, `project_url`), when known. `machine`:
    the project's machine (`fwdasv.asv.project_machine`), recorded in the block.
    """
    install = (
        envplugin.INSTALL_COMMAND
        if import_paths is None
        else envplugin.tree_install_command(tuple(import_paths))
    )
    return {
        "version": 1,
        "project": project,
        "repo": repo,
        "branches": [branch],
        "dvcs": "git",
        # Per-commit virtualenvs linked to this Python; nothing from an index.
        "plugins": [envplugin.PLUGIN],
        "environment_type": envplugin.TOOL_NAME,
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"],
        "build_command": envplugin.BUILD_COMMAND,
        "install_command": install,
        "uninstall_command": envplugin.UNINSTALL_COMMAND,
        "benchmark_dir": "benchmarks",
        "results_dir": "results",
        "html_dir": "html",
        "env_dir": env_dir,
        # Each suite's benchmarks (7 per case) read its one cached bench run: a spawned
        # process costs ~0.5 s each on a 2-core box, a fork of asv's server ~0.1 s. The
        # forkserver is safe here: the suites import no torch and touch no CUDA; only
        # the bench processes they launch do (fwdasv.asv.suite).
        "launch_method": "forkserver",
        "default_benchmark_timeout": 1800,
        "regressions_thresholds": {".*track_latency.*": regression_threshold},
        "regressions_first_commits": {
            ".*track_spread_pct.*": None,
            ".*track_graph_vs_eager.*": None,
            ".*track_clock_uncertainty_us.*": None,
        },
        "fwdasv": (settings or FwdasvSettings()).to_json()
        | ({MACHINE_KEY: machine.to_json()} if machine is not None else {}),
    } | _commit_links(commit_url)


def _commit_links(commit_url: str | None) -> dict[str, str]:
    """asv's `show_commit_url` and `project_url` (the repository's page) for a commit URL."""
    if commit_url is None:
        return {}
    page = commit_url.rstrip("/").rpartition("/")[0].removesuffix("/-")
    return {"project_url": page + "/", "show_commit_url": commit_url}


def write_project(root: Path, config: dict[str, Any], suites: Sequence[str]) -> AsvProject:
    """Write root/asv.conf.json and root/benchmarks/; returns the project."""
    benchmarks = root / "benchmarks"
    benchmarks.mkdir(parents=True, exist_ok=True)
    write_atomic(benchmarks / "__init__.py", '"""asv suites (written by fwdasv)."""\n')
    module = (
        '"""Forward latency per commit, timed by fwdasv\'s engine (written by fwdasv init)."""\n'
        "\n"
        "from fwdasv import asvsuite\n\n\n"
    )
    write_atomic(benchmarks / f"{SUITE_MODULE}.py", module + "\n\n".join(suites))
    write_atomic(root / "asv.conf.json", json.dumps(config, indent=4) + "\n")
    return AsvProject.load(root / "asv.conf.json")


def write_torch_project(
    root: str | Path,
    repo: str | Path,
    project: str,
    suites: Sequence[str],
    *,
    env_dir: str | Path | None = None,
    regression_threshold: float = DEFAULT_THRESHOLD,
    branch: str = "main",
) -> AsvProject:
    """Write (or rewrite) an asv project for `repo` with suite sources `suites`; no checks."""
    root = Path(root).resolve()
    config = project_config(
        str(Path(repo).resolve()),
        project,
        branch=branch,
        env_dir=str(Path(env_dir).resolve()) if env_dir else "env",
        regression_threshold=regression_threshold,
    )
    return write_project(root, config, suites)


# --------------------------------------------------------------------------- the repository

# --------------------------------------------------------------------------- init


def _repo_field(repo: Path, root: Path) -> str:
    """The repository as the configuration names it: relative when one holds the other."""
    if repo == root or root in repo.parents or repo in root.parents:
        return os.path.relpath(repo, root)
    return str(repo)


def existing_files(root: Path) -> list[Path]:
    """What `init` would replace in `root`."""
    names = ("asv.conf.json", "asv.conf.jsonc", f"benchmarks/{SUITE_MODULE}.py")
    return [root / name for name in names if (root / name).exists()]


@dataclass(frozen=True)
class Initialized:
    """What `init_project` wrote and checked."""

    project: AsvProject
    repo: Repository
    suite: SuiteSpec
    checked: str | None  # the target check's summary; None when skipped
    replaced: tuple[Path, ...]
    # None: pip installs the repository (a package); else these directories of each
    # commit's checkout go on the import path (fwdasv.asv.treeinstall).
    import_paths: tuple[str, ...] | None = None
    packaging: str | None = None  # the file that makes it a package (setup.py, pyproject.toml)

    @property
    def install(self) -> str:
        """How each commit is installed, in words."""
        if self.import_paths is None:
            return f"pip installs the package ({self.packaging}, no index)"
        paths = ", ".join("the checkout's root" if p == "." else p for p in self.import_paths)
        why = "" if self.packaging else f"{self.repo.root.name} has no setup.py or pyproject.toml: "
        return f"{why}each commit's checkout goes on the import path ({paths})"


def resolve_target_path(
    paths: Sequence[str | os.PathLike[str]], repo: Repository
) -> tuple[str, ...]:
    """`--target-path` directories, absolute; each must exist and lie outside the repository
    (a directory of the repository is installed with it, at each commit)."""
    resolved = []
    for given in paths:
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            raise InitError(
                f"--target-path {given}: no such directory; name the directory the target's "
                "package (or module) is in"
            )
        if path == repo.root or repo.root in path.parents:
            raise InitError(
                f"--target-path {path} is inside --repo {repo.root}: code of the repository is "
                "measured at each commit; name the target's module in --target (or the "
                "directory it is in with --import-path), and keep --target-path for a target "
                "outside the repository"
            )
        resolved.append(str(path))
    return tuple(dict.fromkeys(resolved))


def choose_import_paths(
    repo: Repository, import_paths: Sequence[str] | None
) -> tuple[str, ...] | None:
    """The tree install's import paths: as given, or the root for a repository without
    packaging; None (pip) for a package."""
    if import_paths:
        try:
            return tuple(dict.fromkeys(treeinstall.check_import_path(p) for p in import_paths))
        except ValueError as error:
            raise InitError(f"--import-path: {error}") from None
    return None if repo.packaging() else treeinstall.DEFAULT_PATHS


def _destination(
    directory: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    branch: str | None,
    force: bool,
    suites: str,
) -> tuple[Path, Repository, list[Path], str]:
    """The project directory, the repository, the project files `force` replaces and the
    branch (the repository's current one by default): refused with one line each."""
    root = Path(directory).expanduser().resolve()
    repository = Repository.open(repo)
    if root.exists() and not root.is_dir():
        raise InitError(f"--dir {root} is a file; give a directory for the asv project")
    replaced = existing_files(root)
    if replaced and not force:
        raise InitError(
            f"{replaced[0]} exists: {root} already holds an asv project; pass --force to "
            f"replace its configuration and {suites} (results are kept), or choose another --dir"
        )
    if branch is None:
        if repository.branch is None:
            raise InitError(
                f"--repo {repository.root} is on a detached HEAD; pass --branch NAME (the "
                "branch whose history asv measures)"
            )
        return root, repository, replaced, repository.branch
    if branch not in repository.branches():
        known = ", ".join(repository.branches()) or "none"
        raise InitError(f"--branch {branch}: no such branch in {repository.root} (it has: {known})")
    return root, repository, replaced, branch


def init_project(
    directory: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    suite: SuiteSpec,
    *,
    project: str | None = None,
    branch: str | None = None,
    env_dir: str | os.PathLike[str] | None = None,
    regression_threshold: float = DEFAULT_THRESHOLD,
    force: bool = False,
    check: bool = True,
    canary: bool = True,
    echo: Callable[[str], None] | None = None,
    import_paths: Sequence[str] | None = None,
    machine: ProjectMachine | None = None,
) -> Initialized:
    """Write an asv project in `directory` that times `suite` at each commit of `repo`.

    Refuses an existing project there unless `force` (results, environments
    and the site are never touched). With `check`, first imports the target
    from the repository's HEAD and prepares every case. A repository without
    setup.py or pyproject.toml (or given `import_paths`) is installed per commit
    by putting its checkout on the import path; the suite's `target_path`
    (directories outside the repository) must exist.
    With `canary` (the default) the suite module also holds the environment
    canary (`canary_suite`). `machine`: the project's machine, recorded in asv.conf.json.
    """
    if canary and suite.name == CANARY_CLASS:
        raise InitError(
            f"suite class {CANARY_CLASS} is the environment canary's name; pick another "
            "class name (or pass --no-canary)"
        )
    root, repository, replaced, branch = _destination(directory, repo, branch, force, "suite")
    suite = dataclasses.replace(
        suite, target_path=resolve_target_path(suite.target_path, repository)
    )
    paths = choose_import_paths(repository, import_paths)
    checked = None
    if check:
        if echo:
            echo(f"checking {suite.target} at {repository.head[:8]} (HEAD of {repository.root})")
        checked = check_target(repository, suite, import_paths=paths)
    name = project or repository.distribution_name() or repository.root.name
    config = project_config(
        _repo_field(repository.root, root),
        name,
        branch=branch,
        env_dir=str(Path(env_dir).resolve()) if env_dir else "env",
        regression_threshold=regression_threshold,
        import_paths=paths,
        commit_url=repository.commit_url(),
        machine=machine,
    )
    suites = [suite.source()] + ([canary_suite(suite).source()] if canary else [])
    written = write_project(root, config, suites)
    return Initialized(
        written, repository, suite, checked, tuple(replaced), paths, repository.packaging()
    )


# --------------------------------------------------------------------------- init --vllm

VLLM_SUITES_SOURCE = '''"""vLLM's forward latency per commit (written by fwdasv init --vllm).

The suites ship with fwdasv (`fwdasv.vllm_suites`); asv names them by this
module: forward.Qwen3_0_6B.track_latency, ... Offline, set FWDASV_MODEL_DIR to
a directory holding the models' configs (qwen3-0.6b/, llama-3.1-8b/) and
FWDASV_VLLM_ENTRY=module when vLLM lacks its CLI's server dependencies.
"""

from fwdasv.vllm_suites import Llama31_8B, Qwen3_0_6B, Qwen3_0_6B_Verify

__all__ = ["Llama31_8B", "Qwen3_0_6B", "Qwen3_0_6B_Verify"]
'''


VLLM_PIPELINE_SOURCE = '''"""vLLM's pipeline forward latency per commit, 2 GPUs a process (written by fwdasv init --vllm).

Qwen3_0_6B_PP2 is vLLM's 2-stage pipeline bench; DecoderPP2, fwdasv's own decoder in 2
stages (no vLLM code: a step there is the machine or its NCCL), runs everywhere (gloo
on a CPU). Both ship with fwdasv (`fwdasv.vllm_suites`): pipeline.Qwen3_0_6B_PP2...
"""

from fwdasv.vllm_suites import DecoderPP2, Qwen3_0_6B_PP2

__all__ = ["DecoderPP2", "Qwen3_0_6B_PP2"]
'''
PIPELINE_MODULE = "pipeline"


def init_vllm_project(
    directory: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    base: str | os.PathLike[str],
    *,
    base_commit: str | None = None,
    project: str | None = None,
    branch: str | None = None,
    force: bool = False,
    machine: ProjectMachine | None = None,
) -> tuple[AsvProject, str]:
    """Write an asv project measuring a vLLM clone's commits over a compiled base.

    The base (a wheel or a directory holding an installed vllm/) and its commit
    in the clone are checked first; returns the project and the base's commit.
    """
    root, repository, _, branch = _destination(directory, repo, branch, force, "suites")
    try:
        pinned = VllmCache.beside(root).open_base(base, repository.root, base_commit)
    except BaseError as error:
        raise InitError(str(error).replace("vllm_base ", "--base ", 1)) from None
    vllm = VllmBaseSettings(str(Path(base).expanduser().resolve()), base_commit)
    config = project_config(
        _repo_field(repository.root, root),
        project or "vllm",
        branch=branch,
        settings=FwdasvSettings(vllm=vllm),
        commit_url=VLLM_COMMIT_URL,
        machine=machine,
    )
    benchmarks = root / "benchmarks"
    benchmarks.mkdir(parents=True, exist_ok=True)
    write_atomic(benchmarks / "__init__.py", '"""asv suites (written by fwdasv)."""\n')
    write_atomic(benchmarks / f"{SUITE_MODULE}.py", VLLM_SUITES_SOURCE)
    write_atomic(benchmarks / f"{PIPELINE_MODULE}.py", VLLM_PIPELINE_SOURCE)
    write_atomic(root / "asv.conf.json", json.dumps(config, indent=4) + "\n")
    return AsvProject.load(root / "asv.conf.json"), pinned.commit
