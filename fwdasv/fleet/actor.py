"""The Ray side of one GPU: an actor that says which GPU it holds and measures on it.

`GpuWorker` is made a Ray actor by the head (`ray.remote(GpuWorker).options(num_gpus=1,
node affinity)`), one per GPU of each node. `identify` names its GPU as `fwdasv hw
machine` does (`nvml_identity`: NVML's entry of the GPU Ray gave it, its UUID's digest
in the machine name), with the node's id and address; a test passes its own `identity`
(fake NVML ids). `prepare` sets up the node's `Workspace` from the head's payload and
bundle (raising `WorkspaceError` when the environments cannot be built); `measure` runs
one commit there and returns its result files; `confirm` re-measures findings of this
GPU's machine (`confirm_here`; the head's side is `fwdasv.fleet.remote`). `Hooks` carries
the optional test seams: the identity and a gate held around each asv run (several fake
nodes on one small box).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from fwdasv.analysis import triage
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


class NodeConfirm(TypedDict):
    """What `confirm_here` sends back: the verdict lines it appended, its log, how many."""

    verdicts: list[str]
    log: list[str]
    confirmed: int


class WorkerConfirm(NodeConfirm):
    """`NodeConfirm`, with the node that ran it and the GPU it made visible."""

    node_id: str
    visible: str


def confirm_here(
    project: AsvProject,
    machine: str,
    stored: Mapping[str, str],
    idents: Sequence[Mapping[str, object]],
    max_processes: int,
) -> NodeConfirm:
    """On the node: the head's results in place, the named findings confirmed here."""
    mine = project.results_dir / machine
    for old in mine.glob("*.json"):
        old.unlink()
    for name, text in stored.items():
        write_atomic(project.results_dir / name, text, what="result file")
    verdicts = verdicts_path(project)
    verdicts.unlink(missing_ok=True)  # only what this confirm appends goes back
    wanted = [dict(i) for i in idents]
    read = triage.read(project, machine=machine)
    found = [f for f in read.findings if f.ident.to_json() in wanted]
    lines: list[str] = []
    triage.confirm(
        project,
        read,
        pending=found,
        max_processes=max_processes,
        run_explain=False,
        echo=lines.append,
    )
    appended = verdicts.read_text().splitlines() if verdicts.is_file() else []
    return {"verdicts": appended, "log": lines, "confirmed": len(found)}


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

    def confirm(
        self,
        stored: Mapping[str, str],
        idents: Sequence[Mapping[str, object]],
        max_processes: int,
    ) -> WorkerConfirm:
        os.environ["CUDA_VISIBLE_DEVICES"] = self.gpu.uuid
        done = confirm_here(self._prepared(), self.gpu.machine, stored, idents, max_processes)
        return {**done, "node_id": self.node_id, "visible": os.environ["CUDA_VISIBLE_DEVICES"]}
