"""The GPUs a machine's results were measured on: where a re-measure of them runs.

`fwdasv hw machine` and `fwdasv shard` name a machine after its exact GPUs and record
their UUIDs (`gpu_uuids`) in its entry, which asv copies to results/<machine>/machine.json.
A finding is confirmed and bisected on its own series' GPU, its A and B on that one
device: `machine_devices` gives the CUDA_VISIBLE_DEVICES of their bench processes (the
UUIDs, which CUDA takes in place of indices). Nothing is pinned for a CPU machine, an
entry without UUIDs, or GPUs this host does not have (NVML lists its own): the processes
then run where they would have (the first GPU, A and B alike), and the reason says so.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from fwdasv.hw.errors import HardwareError
from fwdasv.hw.nvml import read_inventory

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class DeviceChoice:
    """The CUDA_VISIBLE_DEVICES of a machine's re-measures (None: left as it is), and why
    (None for a machine that names no GPU: nothing to tell)."""

    visible: str | None
    reason: str | None

    def env(self) -> dict[str, str]:
        """What a bench's environment gets (nothing when nothing is pinned)."""
        return {VISIBLE_DEVICES: self.visible} if self.visible is not None else {}


def choose_devices(
    machine: str, entry: Mapping[str, object], present: Collection[str] | None
) -> DeviceChoice:
    """Pin `machine`'s GPUs (its entry's `gpu_uuids`) when this host has them all.

    `present` is this host's GPU UUIDs, None when NVML cannot be read here.
    """
    raw = entry.get("gpu_uuids")
    uuids = [u.strip() for u in raw.split(",") if u.strip()] if isinstance(raw, str) else []
    if not uuids:
        return DeviceChoice(None, None)
    shown = ",".join(uuids)
    missing = [u for u in uuids if present is None or u not in present]
    if missing:
        where = "no GPU is readable here" if present is None else "they are not on this host"
        return DeviceChoice(
            None,
            f"machine {machine} measured on {shown}, but {where}: A and B run on this host's "
            "default GPU(s), both on the same",
        )
    return DeviceChoice(shown, f"A and B on machine {machine}'s GPU(s): {VISIBLE_DEVICES}={shown}")


def present_uuids() -> frozenset[str] | None:
    """The UUIDs of this host's GPUs; None where NVML cannot be read (no driver)."""
    try:
        inventory = read_inventory()
    except HardwareError:
        return None
    return frozenset(g.uuid for g in inventory.gpus if g.uuid)


def machine_entry_of(results_dir: Path, machine: str) -> dict[str, object]:
    """results/<machine>/machine.json as asv copied it ({} when missing or unreadable)."""
    try:
        loaded = json.loads((results_dir / machine / "machine.json").read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def machine_devices(results_dir: Path, machine: str) -> DeviceChoice:
    """Where `machine`'s findings are re-measured on this host (`choose_devices`)."""
    entry = machine_entry_of(results_dir, machine)
    present = present_uuids() if entry.get("gpu_uuids") else frozenset()
    return choose_devices(machine, entry, present)
