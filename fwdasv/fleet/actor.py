"""The Ray side of one GPU: an actor that says which GPU it holds and measures on it.

`GpuWorker` is made a Ray actor by the head (`ray.remote(GpuWorker).options(num_gpus=1,
node affinity)`), one per GPU of each node. `identify` names its GPU as `fwdasv hw
machine` does (`nvml_identity`: NVML's entry of the GPU Ray gave it, its UUID's digest
in the machine name), with the node's id and address; a test passes its own `identity`
(fake NVML ids). `prepare` sets up the node's `Workspace` from the head's payload and
bundle (raising `WorkspaceError` when the environments cannot be built); `measure` runs
one commit there and returns its result files; `triage` confirms, explains and bisects
findings of this GPU's machine (`triage_here`; the head's side is `fwdasv.fleet.remote`).
`Hooks` carries the optional test seams: the identity and a gate held around each asv run
(several fake nodes on one small box).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from fwdasv.analysis import triage
from fwdasv.analysis.confirm.reproduce import unexplained
from fwdasv.analysis.findings.findings import Found
from fwdasv.analysis.findings.verdicts import verdicts_path
from fwdasv.asv.project import AsvProject
from fwdasv.core.files import write_atomic
from fwdasv.fleet import _ray
from fwdasv.fleet.ledger import Worker
from fwdasv.fleet.workspace import CommitRun, Payload, Workspace
from fwdasv.hw.nvml import read_inventory
from fwdasv.hw.shard import GpuMachine, gpu_machines


@dataclass(frozen=True)
class Hooks:
    """Seams for tests: who a GPU is, and a gate around each asv run."""

    identity: Callable[[], GpuMachine] | None = None
    gate: Callable[[], AbstractContextManager[object]] | None = None


def nvml_identity() -> GpuMachine:
    """The GPU Ray gave this worker, as NVML and `fwdasv hw machine` name it."""
    ids = _ray.ray.get_gpu_ids()
    if len(ids) != 1:
        raise RuntimeError(f"a fleet worker holds one GPU, Ray gave it {ids!r}")
    (gpu,) = gpu_machines(read_inventory((str(int(ids[0])),)))
    return gpu


CONFIRM, BISECT, EXPLAIN = "confirm", "bisect", "explain"


@dataclass(frozen=True)
class TriageOrder:
    """What the head sends a node to triage (`triage_here`): the machine's result files by
    path under results/, the findings by ident, the verdicts file's lines, the steps
    (CONFIRM, EXPLAIN, BISECT) and confirm's most processes a side."""

    stored: Mapping[str, str]
    idents: Sequence[Mapping[str, object]]
    max_processes: int
    steps: Sequence[str] = (CONFIRM,)
    verdict_lines: Sequence[str] = ()


class NodeTriage(TypedDict):
    """What `triage_here` sends back: the verdict lines it appended, its log, and explain's
    profile files (paths relative to the project)."""

    verdicts: list[str]
    log: list[str]
    profiles: dict[str, bytes]


class WorkerTriage(NodeTriage):
    """`NodeTriage`, with the node that ran it, the GPU it made visible, its project."""

    node_id: str
    visible: str
    root: str


PROFILES_DIR = ".fwdasv-explain"  # explain's profiles, beside results/ (explain.explain_commits)


def triage_here(project: AsvProject, machine: str, order: TriageOrder) -> NodeTriage:
    """On the node: the head's results and verdicts in place, then triage's steps on the
    named findings here (CONFIRM: the A/B; EXPLAIN: the confirmed ones explained, those
    confirmed now and those confirmed before without a diff; BISECT: their ranges of
    several commits); only the lines appended go back."""
    steps, verdict_lines = order.steps, order.verdict_lines
    mine = project.results_dir / machine
    for old in mine.glob("*.json"):
        old.unlink()
    for name, text in order.stored.items():
        write_atomic(project.results_dir / name, text, what="result file")
    verdicts = verdicts_path(project)
    verdicts.unlink(missing_ok=True)
    if verdict_lines:
        write_atomic(verdicts, "".join(f"{line}\n" for line in verdict_lines), what="verdicts")
    profiles = project.results_dir.parent / PROFILES_DIR

    def written() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in profiles.rglob("*") if p.is_file()}

    before = written()
    wanted = [dict(i) for i in order.idents]

    def named(read: Found) -> Found:
        return replace(
            read, findings=tuple(f for f in read.findings if f.ident.to_json() in wanted)
        )

    read = named(triage.read(project, machine=machine, improvements=True))
    lines: list[str] = []
    # Confirmed before without a diff (fleet-confirm explains nothing): explained here,
    # after confirm, which explains only what it confirms now.
    earlier = unexplained(read.findings) if EXPLAIN in steps else []
    if CONFIRM in steps:
        read = named(
            triage.confirm(
                project,
                read,
                max_processes=order.max_processes,
                run_explain=EXPLAIN in steps,
                echo=lines.append,
            )
        )
    if earlier:
        read = named(triage.explain(project, read, pending=earlier, echo=lines.append))
    if BISECT in steps:
        triage.bisect(project, read, echo=lines.append)
    appended = verdicts.read_text().splitlines()[len(verdict_lines) :] if verdicts.is_file() else []
    new = sorted(p for p, stamp in written().items() if before.get(p) != stamp)
    return {
        "verdicts": appended,
        "log": lines,
        "profiles": {str(p.relative_to(project.results_dir.parent)): p.read_bytes() for p in new},
    }


class GpuWorker:
    def __init__(self, root: str, hooks: Hooks) -> None:
        ray = _ray.ray
        self.root = Path(root)
        self.hooks = hooks
        self.gpu = (hooks.identity or nvml_identity)()
        context = ray.get_runtime_context()
        self.node_id = context.get_node_id()
        self.node_ip = ray.util.get_node_ip_address()
        self.workspace = Workspace(self.root, self.gpu.machine, self.gpu.uuid, gate=hooks.gate)
        self.project: AsvProject | None = None

    def identify(self) -> Worker:
        return Worker(self.gpu.machine, self.node_id, self.node_ip, self.gpu.uuid, self.gpu.entry)

    def prepare(self, payload: Payload, bundle: bytes, setup: bool = True) -> str:
        self.project = self.workspace.prepare(payload, bundle, self.gpu.entry, setup=setup)
        return str(self.project.config_path)

    def _prepared(self) -> AsvProject:
        if self.project is None:
            raise RuntimeError("a fleet worker measures only after `prepare`")
        return self.project

    def measure(self, commit: str, bench: Sequence[str] = ()) -> CommitRun:
        return self.workspace.measure(self._prepared(), commit, bench)

    def triage(self, order: TriageOrder) -> WorkerTriage:
        os.environ["CUDA_VISIBLE_DEVICES"] = self.gpu.uuid
        project = self._prepared()
        done = triage_here(project, self.gpu.machine, order)
        return {
            **done,
            "node_id": self.node_id,
            "visible": os.environ["CUDA_VISIBLE_DEVICES"],
            "root": str(project.results_dir.parent),
        }
