"""A new asv project for a PyTorch model repository: what `fwdasv init` (and the demo) write.

`init_project` checks the repository and the target first, then writes, in
one directory, `asv.conf.json` and `benchmarks/forward.py`: one suite that
times the repository's target (`package.module:callable`) through fwdasv's
engine (CUDA graphs on a GPU, a host timer on CPU). asv creates one
network-free environment (`fwdasv.asv.envplugin`: linked to this Python,
whose torch, fwdasv and asv it uses) and installs the repository into it at
each commit it measures.

The configuration carries the verdict settings too: asv's own
`regressions_thresholds` (for asv's own detector on the published site: a
latency step above 5%; the validation series are never flagged) and a
`"fwdasv"` block, which asv ignores (it keeps unknown top-level keys as
attributes and never reads them) and fwdasv's calibrated verdicts read
(`fwdasv.core.verdicts`):

    "fwdasv": {"min_effect_pct": 0.3, "confirm": true}

- `min_effect_pct`: the smallest change of a series' median, in percent,
  that may be called a regression, however quiet the series is (the default
  of `--min-effect`);
- `confirm`: `fwdasv nightly` re-measures a detected step (an A/B of its two
  commits in one run) before its gate counts it (the default of `--confirm`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwdasv.asv import envplugin, treeinstall
from fwdasv.asv.project import AsvProject
from fwdasv.core.cases import parse_case, unique_cases
from fwdasv.core.errors import UserError
from fwdasv.core.files import write_atomic
from fwdasv.core.verdicts import VerdictSettings
from fwdasv.engine.config import EngineOptionError, check_device_name
from fwdasv.launch import run_captured
from fwdasv.targets.base import TargetSpec

# Decode at two batch sizes and contexts, and a prefill: the steps that move
# independently when attention, the MLP or the KV cache code changes.
DEFAULT_CASES = ("decode_bs1_1k=1*1@1024", "decode_bs16_4k=16*1@4096", "prefill_1k=1024")
VERDICT_SETTINGS: dict[str, float | bool] = VerdictSettings().to_json()
DEFAULT_THRESHOLD = 0.05  # asv's regressions_thresholds for latency: a fraction
SUITE_MODULE = "forward"
CHECK_TIMEOUT_S = 900.0
# The environment canary every `fwdasv init` project gets (`canary_suite`): fwdasv's own
# tiny decoder, no code of the project, so a step in it is the machine (load, a driver,
# torch), not a commit; `fwdasv regressions` labels a finding that steps with it `drift`.
CANARY_CLASS = "CanaryDecoder"  # a `Canary*` suite: fwdasv.analysis.findings.CANARY_PREFIX
CANARY_TARGET = "fwdasv.targets.decoder:tiny"
CANARY_CASES = ("decode_bs4=4*1@256", "prefill_64=64")


class InitError(UserError):
    """The repository, target or directory cannot make an asv project (the fix in the message)."""


@dataclass(frozen=True)
class SuiteSpec:
    """One suite class timing `target` on `cases` (the source asv imports)."""

    target: str
    cases: tuple[str, ...] = DEFAULT_CASES
    class_name: str | None = None  # default: from the target's package, e.g. Mymodel
    iters: int = 20
    samples: int = 10
    warmup_s: float = 1.0
    timer: str = "auto"
    device: str = "auto"
    env: Mapping[str, str] = field(default_factory=dict)
    launches: int = 1
    doc: str = ""
    # Directories outside the repository the target is imported from (`--target-path`):
    # on the bench's PYTHONPATH in every process (fwdasv.asv.suite.ForwardSuite.target_path).
    target_path: tuple[str, ...] = ()
    # The host timer on a CPU: fwdasv's fixed workload beside each replay, and the suite's
    # `track_relative` (fwdasv.asv.suite.ForwardSuite.reference).
    reference: bool = False

    def __post_init__(self) -> None:
        # Refuse bad input before anything is written or asv sees it.
        TargetSpec.parse(self.target)
        if not self.cases:
            raise InitError("no cases: give at least one --case (or none for the defaults)")
        unique_cases(parse_case(text) for text in self.cases)
        try:
            check_device_name(self.device)
        except EngineOptionError as error:
            raise InitError(str(error).replace("--device", "device", 1)) from None
        if self.class_name is not None and not self.class_name.isidentifier():
            raise InitError(f"suite class name {self.class_name!r} is not a Python identifier")
        if self.reference and (self.device != "cpu" or self.timer not in ("auto", "host")):
            raise InitError(
                f"reference times a CPU workload beside a CPU forward: it needs device 'cpu' "
                f"and the host timer (got device {self.device!r}, timer {self.timer!r})"
            )

    @property
    def package(self) -> str:
        """The top-level package of the target (what the repository must contain)."""
        return self.target.partition(":")[0].split(".")[0]

    @property
    def name(self) -> str:
        if self.class_name:
            return self.class_name
        words = [w for w in re.split(r"[^A-Za-z0-9]+", self.package) if w]
        name = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
        return name if name[0].isalpha() else f"Model{name}"

    def source(self) -> str:
        lines = [
            f"class {self.name}(asvsuite.TorchSuite):",
            f'    """{self.doc or f"Forward latency of {self.target}."}"""',
            "",
            f"    model = {self.target!r}",
            f"    iters = {self.iters}",
            f"    samples = {self.samples}",
            f"    warmup_s = {self.warmup_s}",
            f"    timer = {self.timer!r}",
            f"    env = {dict(self.env)!r}",
            f"    launches = {self.launches}",
            f"    cases = {tuple(self.cases)!r}",
            '    version = "1"',
        ]
        if self.device != "auto":
            lines.insert(-2, f"    device = {self.device!r}")
        if self.target_path:
            lines.insert(-2, f"    target_path = {tuple(self.target_path)!r}")
        if self.reference:
            lines.insert(-2, "    reference = True")
        return "\n".join(lines) + "\n"


def canary_suite(suite: SuiteSpec) -> SuiteSpec:
    """The environment canary beside `suite`: the same timer and thread settings, so the
    machine's load reaches it as it reaches the suite, at the same commits (asv runs every
    suite at each commit it measures). One launch: only its commit medians are read (for
    drift), and each launch costs a process start at every commit. Paced with the suite
    (`reference`): a paced series' drift is told by the canary's own ratio."""
    return SuiteSpec(
        CANARY_TARGET,
        CANARY_CASES,
        class_name=CANARY_CLASS,
        iters=20,  # its forward is tiny: longer blocks, steadier samples
        samples=suite.samples,
        warmup_s=min(suite.warmup_s, 0.2),
        timer=suite.timer,
        device=suite.device,
        env=dict(suite.env),
        launches=1,
        reference=suite.reference,
        doc=(
            "The environment canary: fwdasv's tiny decoder, no code of the project. A step "
            "here is the machine (its load, torch, a driver), not a commit."
        ),
    )


def torch_suite_source(class_name: str, target: str, cases: Sequence[str], **options: Any) -> str:
    """The source of one suite class (see `SuiteSpec`)."""
    return SuiteSpec(target, tuple(cases), class_name=class_name, **options).source()


# --------------------------------------------------------------------------- the files


def project_config(
    repo: str,
    project: str,
    *,
    branch: str = "main",
    env_dir: str = "env",
    regression_threshold: float = DEFAULT_THRESHOLD,
    import_paths: Sequence[str] | None = None,
) -> dict[str, Any]:
    """asv.conf.json for a repository installed per commit into fwdasv's environment.

    `import_paths` None: pip installs the repository (a package); else its checkout
    goes on the import path, these directories of it (`fwdasv.asv.treeinstall`).
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
        "fwdasv": dict(VERDICT_SETTINGS),
    }


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


def _git(repo: Path, *args: str) -> str:
    try:
        proc = run_captured(["git", *args], cwd=repo)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InitError(f"git {' '.join(args)} in {repo} could not run: {error}") from None
    if proc.returncode != 0:
        raise InitError(f"git {' '.join(args)} in {repo} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


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
            branch = run_captured(
                ["git", "symbolic-ref", "--quiet", "--short", "HEAD"], cwd=root
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            branch = ""  # detached or unreadable: the caller asks for --branch
        return cls(root, head, branch or None)

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
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            match = re.search(r'^\s*name\s*=\s*"([^"]+)"', text, re.MULTILINE)
            return match.group(1) if match else None
        try:
            name = tomllib.loads(text).get("project", {}).get("name")
        except tomllib.TOMLDecodeError:
            return None
        return name if isinstance(name, str) and name else None

    def packaging(self) -> str | None:
        """Which of setup.py / pyproject.toml its HEAD has at the root (pip installs it); None:
        not a package."""
        for name in ("pyproject.toml", "setup.py"):
            found = run_captured(["git", "cat-file", "-e", f"{self.head}:{name}"], cwd=self.root)
            if found.returncode == 0:
                return name
        return None

    def export(self, commit: str, destination: Path) -> None:
        """The tree of `commit` written into `destination` (the repository is not touched)."""
        try:
            proc = run_captured(
                ["git", "archive", "--format=tar", commit], cwd=self.root, text=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InitError(
                f"git archive {commit[:8]} in {self.root} could not run: {error}"
            ) from None
        if proc.returncode != 0:
            raise InitError(f"git archive {commit[:8]} in {self.root} failed: {proc.stderr!r}")
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as archive:
            if hasattr(tarfile, "data_filter"):
                archive.extractall(destination, filter="data")
            else:  # pragma: no cover (Python without extraction filters)
                archive.extractall(destination)  # our own repository's tree


def import_root(tree: Path, package: str) -> Path | None:
    """Where `package` is importable from in a source tree: the tree itself or its src/."""
    for base in (tree, tree / "src"):
        if (base / package).is_dir() or (base / f"{package}.py").is_file():
            return base
    return None


def _repo_roots(tree: Path, package: str, import_paths: Sequence[str] | None) -> list[Path]:
    """Where the commit's modules are imported from, as asv's environment will have them:
    the tree install's `import_paths`, or for a package the tree (or its src/)."""
    if import_paths is not None:
        return [tree / treeinstall.check_import_path(p) for p in import_paths]
    base = import_root(tree, package)
    if base is not None:
        return [base]
    return [tree / "src"] if (tree / "src").is_dir() else [tree]


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
    environment gives a commit: the suite's target_path, then the tree (its
    `import_paths` for a repository that is not a package); returns the child's
    summary line, or raises InitError with its last lines.
    """
    from fwdasv.launch import LaunchError, LaunchSpec, run_process

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
        roots = _repo_roots(tree, suite.package, import_paths)
        outside = [Path(p) for p in suite.target_path]
        found = [
            base
            for base in (*outside, *roots)
            if (base / suite.package).is_dir() or (base / f"{suite.package}.py").is_file()
        ]
        if not found:
            looked = (
                "./ and src/"
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
    if completed.returncode != 0:
        lines = [line for line in completed.lines if line.strip()]
        why = lines[-1] if lines else f"exit status {completed.returncode}"
        raise InitError(
            f"--target {suite.target} at {commit} of {repo.root}: {why.removeprefix('fwdasv: ')} "
            "(fix the target, or pass --no-check when it needs a build first)"
        )
    summary = [line for line in completed.lines if line.startswith("ok:")]
    return summary[-1].removeprefix("ok: ") if summary else "ok"


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
) -> Initialized:
    """Write an asv project in `directory` that times `suite` at each commit of `repo`.

    Refuses an existing project there unless `force` (results, environments
    and the site are never touched). With `check`, first imports the target
    from the repository's HEAD and prepares every case. A repository without
    setup.py or pyproject.toml (or given `import_paths`) is installed per commit
    by putting its checkout on the import path; the suite's `target_path`
    (directories outside the repository) must exist.
    With `canary` (the default) the suite module also holds the environment
    canary (`canary_suite`).
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


def init_vllm_project(
    directory: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    base: str | os.PathLike[str],
    *,
    base_commit: str | None = None,
    project: str | None = None,
    branch: str | None = None,
    force: bool = False,
) -> tuple[AsvProject, str]:
    """Write an asv project measuring a vLLM clone's commits over a compiled base.

    The base (a wheel or a directory holding an installed vllm/) and its commit
    in the clone are checked first; returns the project and the base's commit.
    """
    from fwdasv.asv import vllm_base

    root, repository, _, branch = _destination(directory, repo, branch, force, "suites")
    try:
        opened = vllm_base.Base.open(base, root / envplugin.VLLM_CACHE / "base")
        commit = opened.commit_in(repository.root, base_commit)
    except vllm_base.BaseError as error:
        raise InitError(str(error).replace("vllm_base ", "--base ", 1)) from None
    config = project_config(_repo_field(repository.root, root), project or "vllm", branch=branch)
    config["fwdasv"][vllm_base.CONFIG_KEY] = str(Path(base).expanduser().resolve())
    if base_commit:
        config["fwdasv"][vllm_base.COMMIT_KEY] = base_commit
    benchmarks = root / "benchmarks"
    benchmarks.mkdir(parents=True, exist_ok=True)
    write_atomic(benchmarks / "__init__.py", '"""asv suites (written by fwdasv)."""\n')
    write_atomic(benchmarks / f"{SUITE_MODULE}.py", VLLM_SUITES_SOURCE)
    write_atomic(root / "asv.conf.json", json.dumps(config, indent=4) + "\n")
    return AsvProject.load(root / "asv.conf.json"), commit
