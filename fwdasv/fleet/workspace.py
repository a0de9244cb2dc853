"""A node's copy of the head's project: the repository from a git bundle, asv run there.

The head packs what a node needs into a `Payload`: asv.conf.json as parsed, the
benchmark directory's files and a git bundle of the repository (`bundle_repository`,
every ref; it travels through Ray's object store, so no filesystem is shared). On the
node, `Workspace` (ROOT/<project>/<machine>/, one per GPU, kept between runs so its
environments are reused) fetches the bundle into repo/, writes the benchmarks and a
configuration naming its own repo/, results/ and env/, writes the GPU's machine entry,
and builds the environments (`fwdasv.fleet.envsetup`): a failure there is `WorkspaceError`, one
line. `measure` runs one commit through asv (under `fwdasv.fleet.tether`, with
CUDA_VISIBLE_DEVICES the GPU's UUID) and returns the result files asv wrote for it,
paths relative to results/, for the head to write; no result file: `files` is empty.
No Ray here: what runs in a worker, testable alone.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from fwdasv.asv.locked_machine import MODULE as LOCKED_ASV
from fwdasv.asv.project import ASV_TIMEOUT_S, AsvProject, run_args
from fwdasv.asv.shard_run import write_machines
from fwdasv.core.errors import UserError
from fwdasv.core.files import write_atomic
from fwdasv.git import GitError, git
from fwdasv.hw.devices import VISIBLE_DEVICES
from fwdasv.hw.shard import GpuMachine
from fwdasv.launch import LaunchError, LaunchSpec, run_process

TETHER = "fwdasv.fleet.tether"
ENVSETUP = "fwdasv.fleet.envsetup"
TAIL_LINES = 3


class WorkspaceError(UserError):
    """A node could not set up its copy of the project (clone, environments)."""


def default_root() -> Path:
    """Where a node keeps its workspaces unless told: <tmp>/fwdasv-fleet."""
    return Path(tempfile.gettempdir()) / "fwdasv-fleet"


@dataclass(frozen=True)
class Payload:
    """What a node needs of the head's project, the repository aside (`bundle_repository`)."""

    project: str
    config: Mapping[str, object]
    benchmarks: Mapping[str, bytes]  # benchmark_dir's files, paths relative to it

    @classmethod
    def of(cls, project: AsvProject) -> Payload:
        files = {
            str(p.relative_to(project.benchmark_dir)): p.read_bytes()
            for p in sorted(project.benchmark_dir.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }
        name = str(project.raw.get("project", "project"))
        return cls(name, dict(project.raw), files)


def bundle_repository(project: AsvProject, into: Path) -> bytes:
    """A git bundle of every ref of the project's repository (its bytes)."""
    repo = project.cloned_repo()
    path = into / "repository.bundle"
    try:
        git(repo, "bundle", "create", str(path), "--all")
    except GitError as error:
        raise WorkspaceError(f"cannot bundle {repo} for the fleet: {error}") from None
    return path.read_bytes()


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(no output)"


class CommitRun(TypedDict):
    """One commit's asv run on a node: its result files (paths relative to results/),
    asv's exit status (None: it did not finish), its wall seconds, its output's last lines."""

    files: dict[str, str]
    status: int | None
    seconds: float
    tail: str


@dataclass
class Workspace:
    root: Path
    machine: str
    gpu_uuid: str
    gate: Callable[[], AbstractContextManager[object]] | None = None
    python: str = sys.executable
    logs: list[Path] = field(default_factory=list)

    def folder(self, payload: Payload) -> Path:
        return self.root / payload.project / self.machine

    def prepare(
        self, payload: Payload, bundle: bytes, entry: Mapping[str, str], *, setup: bool = True
    ) -> AsvProject:
        """The node's project, its repository fetched and environments built."""
        here = self.folder(payload)
        repo = here / "repo"
        try:
            if not (repo / ".git").is_dir():
                repo.mkdir(parents=True, exist_ok=True)
                git(repo, "init", "-q")
            bundle_path = here / "repository.bundle"
            bundle_path.write_bytes(bundle)
            git(
                repo,
                "fetch",
                "-q",
                "--force",
                "--update-head-ok",
                str(bundle_path),
                "refs/*:refs/*",
            )
        except (GitError, OSError) as error:
            raise WorkspaceError(
                f"cannot fetch the repository bundle into {repo}: {error}"
            ) from None
        benchmarks = here / "benchmarks"
        for name, data in payload.benchmarks.items():
            target = benchmarks / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        config = {
            **payload.config,
            "repo": "repo",
            "results_dir": "results",
            "env_dir": "env",
            "html_dir": "html",
            "benchmark_dir": "benchmarks",
        }
        config_path = here / "asv.conf.json"
        write_atomic(config_path, json.dumps(config, indent=2) + "\n", what="node configuration")
        write_machines([GpuMachine(0, self.gpu_uuid, dict(entry))])
        project = AsvProject.load(config_path)
        if setup:
            completed = self._asv(project, [], here / "logs" / "setup.log", module=ENVSETUP)
            if completed[0] != 0:
                raise WorkspaceError(
                    f"environment build failed (status {completed[0]}): {completed[1]}"
                )
        return project

    def _asv(
        self, project: AsvProject, args: Sequence[str], log: Path, module: str = LOCKED_ASV
    ) -> tuple[int | None, str]:
        """asv ARGS in the node's project, tethered, on this GPU; (status, its output's tail).

        `module` ENVSETUP: the project's environments built instead (ARGS unused)."""
        config = str(project.config_path)
        asv = [args[0], "--config", config, *args[1:]] if module == LOCKED_ASV else [config]
        spec = LaunchSpec(
            args=["-m", TETHER, self.python, "-m", module, *asv],
            python=self.python,
            env={VISIBLE_DEVICES: self.gpu_uuid},
            timeout_s=ASV_TIMEOUT_S,
            cwd=str(project.config_path.parent),
        )
        self.logs.append(log)
        with self.gate() if self.gate is not None else nullcontext():
            try:
                completed = run_process(spec, log)
            except LaunchError as failed:
                return None, failed.summary
        return completed.returncode, _tail(log.read_text(errors="replace"))

    def measure(self, project: AsvProject, commit: str, bench: Sequence[str] = ()) -> CommitRun:
        """One commit through asv on this GPU: {"files", "status", "seconds", "tail"}."""
        here = project.config_path.parent
        hashfile = here / "logs" / f"{commit}.commits"
        hashfile.parent.mkdir(parents=True, exist_ok=True)
        hashfile.write_text(commit + "\n")
        started = time.perf_counter()
        status, tail = self._asv(
            project,
            ["run", *run_args(f"HASHFILE:{hashfile}", self.machine, bench=bench)],
            here / "logs" / f"{commit[:8]}.log",
        )
        seconds = time.perf_counter() - started
        mine = project.results_dir / self.machine
        files: dict[str, str] = {}
        results = sorted(mine.glob(f"{commit[:8]}-*.json"))
        if results:
            for path in [*results, mine / "machine.json", project.results_dir / "benchmarks.json"]:
                if path.is_file():
                    files[str(path.relative_to(project.results_dir))] = path.read_text()
        return {"files": files, "status": status, "seconds": seconds, "tail": tail}
