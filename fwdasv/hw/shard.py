"""One history measured on several GPUs of a host: which GPU measures which commit.

Input: this host's GPUs (`gpu_machines`: one asv machine entry per GPU, named after its
UUID as `fwdasv hw machine` names one, so each GPU keeps a series of its own) and the
commits of a range, oldest first. Output: `ShardPlan`, a pure value (JSON both ways):
GPU k measures commits k, k+N, k+2N, ... of N GPUs, one bench process per GPU at a time,
so the range takes about 1/N of the time. Interleaved, not in blocks: each GPU's series
spans the whole range, so a step at any commit shows on every series between its
nearest commits (at most N apart); with blocks a step at a block boundary would fall
between two machines and show on neither series. GPUs whose entries differ in a key a
series is split on (`SERIES_KEYS`: model, driver, CUDA, clock policy) are refused in one
line (`ShardRefused`): their series could not be compared commit for commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fwdasv.core.errors import EXIT_HARDWARE
from fwdasv.hw.errors import HardwareError
from fwdasv.hw.machine import machine_entry
from fwdasv.hw.nvml import Inventory

PLAN_VERSION = 2  # 2: each shard's machine entry
# Machine keys whose values split asv's graphs and tell fwdasv's drift: GPUs that differ in
# one of them measure series that cannot be compared.
SERIES_KEYS = {
    "gpu": "model",
    "driver": "driver",
    "cuda": "CUDA version",
    "clock_policy": "clock policy",
}


class ShardRefused(HardwareError):
    """GPUs that cannot share a history (another model, driver, ...) or no commits."""

    exit_code = EXIT_HARDWARE


@dataclass(frozen=True)
class GpuMachine:
    """One GPU of the host and the asv machine entry of it alone."""

    index: int  # NVML's (nvidia-smi's) index
    uuid: str  # what CUDA_VISIBLE_DEVICES names it by
    entry: Mapping[str, str]  # `fwdasv.hw.machine.machine_entry` of this GPU alone

    @property
    def machine(self) -> str:
        return self.entry["machine"]

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.entry.get('gpu', '?')}, {self.uuid})"


def gpu_machines(
    inventory: Inventory, clock_policy: str = "auto", defaults: dict[str, str] | None = None
) -> list[GpuMachine]:
    """One machine entry per GPU of `inventory`, each named after that GPU's UUID."""
    found = []
    for gpu in inventory.gpus:
        alone = Inventory(inventory.driver_version, inventory.cuda_driver_version, (gpu,))
        entry = machine_entry(alone, clock_policy=clock_policy, defaults=defaults)
        found.append(GpuMachine(gpu.index, entry["gpu_uuids"], entry))
    return found


def mismatch(gpus: Sequence[GpuMachine]) -> str | None:
    """Why `gpus` cannot share a history (one line), or None when their series compare."""
    first = gpus[0]
    for other in gpus[1:]:
        for key, what in SERIES_KEYS.items():
            mine, theirs = first.entry.get(key), other.entry.get(key)
            if mine != theirs:
                return (
                    f"{first.label} and {other.label} differ in {what} ({mine} vs {theirs}): "
                    "their series could not be compared commit for commit; shard over GPUs "
                    "of one model, driver and clock policy (--gpus), or run each kind apart"
                )
    return None


@dataclass(frozen=True)
class Shard:
    """The commits one GPU measures, oldest first, in one asv run."""

    gpu: GpuMachine
    commits: tuple[str, ...]

    @property
    def machine(self) -> str:
        return self.gpu.machine

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_index": self.gpu.index,
            "gpu_uuid": self.gpu.uuid,
            "machine": self.machine,
            "commits": list(self.commits),
            "machine_entry": dict(self.gpu.entry),  # what the GPU is: model, driver, clocks
        }


@dataclass(frozen=True)
class ShardPlan:
    """A range's commits (oldest first) split over GPUs, interleaved: who measures what."""

    commits: tuple[str, ...]
    shards: tuple[Shard, ...]

    def __post_init__(self) -> None:
        spread = sorted(c for s in self.shards for c in s.commits)
        assert spread == sorted(self.commits), f"a plan measures each commit once: {self}"
        machines = [s.machine for s in self.shards]
        assert len(set(machines)) == len(machines), f"one machine per GPU: {machines}"

    def measured_by(self) -> dict[str, Shard]:
        """commit -> the shard (GPU, machine) that measures it."""
        return {commit: shard for shard in self.shards for commit in shard.commits}

    def lines(self) -> list[str]:
        """The split as a reader takes it: one line per GPU."""
        out = [f"{len(self.commits)} commit(s) over {len(self.shards)} GPU(s), interleaved:"]
        for shard in self.shards:
            shown = " ".join(c[:8] for c in shard.commits) or "(none)"
            out.append(
                f"  GPU {shard.gpu.index} {shard.gpu.uuid} (machine {shard.machine}): "
                f"{len(shard.commits)} commit(s): {shown}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        by = self.measured_by()
        return {
            "version": PLAN_VERSION,
            "commits": list(self.commits),
            "shards": [s.to_json() for s in self.shards],
            # Which GPU measured which commit, in the range's order.
            "measured_by": [
                {"commit": c, "machine": by[c].machine, "gpu_uuid": by[c].gpu.uuid}
                for c in self.commits
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShardPlan:
        if data.get("version") != PLAN_VERSION:
            raise ValueError(f"shard plan version {data.get('version')!r}, not {PLAN_VERSION}")
        shards = tuple(
            Shard(
                GpuMachine(int(s["gpu_index"]), str(s["gpu_uuid"]), s["machine_entry"]),
                tuple(s["commits"]),
            )
            for s in data["shards"]
        )
        return cls(tuple(data["commits"]), shards)


def plan_shards(gpus: Sequence[GpuMachine], commits: Sequence[str]) -> ShardPlan:
    """`commits` (oldest first) over `gpus`: GPU k takes every Nth commit from the kth.

    Refused (`ShardRefused`) when there is no GPU or commit, or the GPUs differ in a key
    their series are split on (`mismatch`).
    """
    if not gpus:
        raise ShardRefused("no GPU to shard over; pick some with --gpus")
    if not commits:
        raise ShardRefused("the range holds no commit to measure")
    if len(set(commits)) != len(commits):
        raise ShardRefused("the range names a commit twice; give each commit once")
    why = mismatch(gpus)
    if why is not None:
        raise ShardRefused(why)
    n = len(gpus)
    shards = tuple(Shard(gpu, tuple(commits[k::n])) for k, gpu in enumerate(gpus))
    return ShardPlan(tuple(commits), shards)
