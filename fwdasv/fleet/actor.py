"""The Ray side of one GPU: an actor that says which GPU it holds and measures on it.

`GpuWorker` is made a Ray actor by the head (`ray.remote(GpuWorker).options(num_gpus=1,
node affinity)`), one per GPU of each node. `identify` names its GPU as `fwdasv hw
machine` does (`nvml_identity`: NVML's entry of the GPU Ray gave it, its UUID's digest
in the machine name), with the node's id and address; a test passes its own `identity`
(fake NVML ids). `prepare` sets up the node's `Workspace` from the head's payload and
bundle (raising `WorkspaceError` when the environments cannot be built); `measure` runs
one commit there and returns its result files; `confirm` re-measures findings of this
GPU's machine (`fwdasv.fleet.remote`). `Hooks` carries the optional test seams: the
identity and a gate held around each asv run (several fake nodes on one small box).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fwdasv.fleet.ledger import Worker
from fwdasv.fleet.workspace import Payload, Workspace
from fwdasv.hw.shard import GpuMachine


@dataclass(frozen=True)
class Hooks:
    """Seams for tests: who a GPU is, and a gate around each asv run."""

    identity: Callable[[], GpuMachine] | None = None
    gate: Callable[[], AbstractContextManager[Any]] | None = None


def nvml_identity() -> GpuMachine:
    """The GPU Ray gave this worker, as NVML and `fwdasv hw machine` name it."""
    import ray

    from fwdasv.hw.nvml import read_inventory
    from fwdasv.hw.shard import gpu_machines

    ids = ray.get_gpu_ids()
    if len(ids) != 1:
        raise RuntimeError(f"a fleet worker holds one GPU, Ray gave it {ids!r}")
    (gpu,) = gpu_machines(read_inventory((str(int(ids[0])),)))
    return gpu


class GpuWorker:
    def __init__(self, root: str, hooks: Hooks) -> None:
        import ray

        self.root = Path(root)
        self.hooks = hooks
        self.gpu = (hooks.identity or nvml_identity)()
        context = ray.get_runtime_context()
        self.node_id = context.get_node_id()
        self.node_ip = ray.util.get_node_ip_address()
        self.workspace = Workspace(self.root, self.gpu.machine, self.gpu.uuid, gate=hooks.gate)
        self.project: Any = None

    def identify(self) -> Worker:
        return Worker(self.gpu.machine, self.node_id, self.node_ip, self.gpu.uuid, self.gpu.entry)

    def prepare(self, payload: Payload, bundle: bytes, setup: bool = True) -> str:
        self.project = self.workspace.prepare(payload, bundle, self.gpu.entry, setup=setup)
        return str(self.project.config_path)

    def measure(self, commit: str, bench: Sequence[str] = ()) -> dict[str, Any]:
        return self.workspace.measure(self.project, commit, bench)

    def confirm(
        self, stored: Mapping[str, str], idents: Sequence[Mapping[str, Any]], max_processes: int
    ) -> dict[str, Any]:
        from fwdasv.fleet.remote import confirm_here

        os.environ["CUDA_VISIBLE_DEVICES"] = self.gpu.uuid
        done = confirm_here(self.project, self.gpu.machine, stored, idents, max_processes)
        return {**done, "node_id": self.node_id, "visible": os.environ["CUDA_VISIBLE_DEVICES"]}
