"""asv's machine file: this machine named after its exact GPUs (or its CPU), merged atomically.

A swapped GPU starts a new series instead of reading as a regression.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from fwdasv.core.files import check_output_path, write_atomic
from fwdasv.hw.checks import CLOCK_POLICIES
from fwdasv.hw.errors import HardwareError, NoDriver
from fwdasv.hw.nvml import GpuInfo, Inventory, read_inventory

DEFAULT_MACHINE_FILE = "~/.asv-machine.json"
MACHINE_FILE_VERSION = 1  # asv.machine.MachineCollection.api_version


# --------------------------------------------------------------------------- asv machine file


def _slug(text: str) -> str:
    text = re.sub(r"^nvidia\s+", "", text.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def default_machine_name(host: str, gpus: Sequence[GpuInfo]) -> str:
    """hostname-<count>x<model>-<digest of the GPU UUIDs>.

    The digest makes another GPU (or another subset of a box's GPUs) another
    machine: asv stores results at results/<machine>/<commit>-<env>.json, so a
    shared name would let runs on different chips overwrite each other.
    """
    models = sorted({_slug(g.name or "unknown") for g in gpus})
    uuids = ",".join(sorted(g.uuid or "" for g in gpus))
    digest = hashlib.sha256(uuids.encode()).hexdigest()[:6]
    host_part = _slug(host.split(".")[0]) if host else "host"
    return f"{host_part}-{len(gpus)}x{'+'.join(models)}-{digest}"


def clock_policy_label(gpus: Sequence[GpuInfo], policy: str = "auto") -> str:
    """'locked-<how>' / 'default' / 'any' as recorded in the machine file."""
    locks = [g.clock_lock.gpu if g.clock_lock else None for g in gpus]
    labels = sorted({lock.label for lock in locks if lock})
    if policy == "auto":
        policy = "locked" if locks and all(locks) else "default"
    if policy == "locked" and labels:
        return "locked-" + "+".join(labels)
    if policy not in CLOCK_POLICIES:
        raise HardwareError(f"clock policy {policy!r}: choose auto, {', '.join(CLOCK_POLICIES)}")
    return policy


def machine_entry(
    inventory: Inventory,
    name: str | None = None,
    clock_policy: str = "auto",
    defaults: dict[str, str] | None = None,
) -> dict[str, str]:
    """asv's machine entry plus the GPU keys asv merges into every result's params.

    Every value is a string: asv uses them as graph dimensions (sets, file names).
    """
    gpus = inventory.gpus
    if not gpus:
        raise NoDriver("no GPU selected")
    missing = [g.label for g in gpus if not g.uuid]
    if missing:
        raise HardwareError(f"UUID unreadable for {', '.join(missing)}: the machine needs it")
    if defaults is None:
        from asv.machine import Machine  # asv's own detection, as `asv machine --yes` does

        defaults = Machine.get_defaults()
    machine = name or default_machine_name(defaults.get("machine") or platform.node(), gpus)
    models = list(dict.fromkeys(g.name or "unknown" for g in gpus))
    return {
        "machine": machine,
        "os": str(defaults.get("os", "")),
        "arch": str(defaults.get("arch", "")),
        "cpu": str(defaults.get("cpu", "")),
        "num_cpu": str(defaults.get("num_cpu", "")),
        "ram": str(defaults.get("ram", "")),
        "gpu": ",".join(models),
        "gpu_count": str(len(gpus)),
        "gpu_uuids": ",".join(g.uuid or "" for g in gpus),
        "driver": inventory.driver_version or "unknown",
        "cuda": inventory.cuda_driver_version or "unknown",
        "clock_policy": clock_policy_label(gpus, clock_policy),
    }


def environment_digest(prefix: str | None = None, torch: str | None = None) -> str:
    """6 hex digits naming the Python environment that runs asv (its prefix) and its torch."""
    prefix = sys.prefix if prefix is None else prefix
    torch = torch_version() if torch is None else torch
    return hashlib.sha256(f"{os.path.realpath(prefix)}\n{torch}".encode()).hexdigest()[:6]


def default_cpu_machine_name(host: str, digest: str | None = None) -> str:
    """hostname-cpu-<digest of this environment and its torch>: a box timed by the host timer.

    On a CPU the environment is part of the machine (its torch times the kernels), and
    asv's machine file is per user: two projects on one box with one name would relabel
    each other's results. The digest gives each environment its own name.
    """
    return f"{_slug(host.split('.')[0]) if host else 'host'}-cpu-{digest or environment_digest()}"


def torch_version() -> str:
    """The installed torch's version, read without importing torch ('none' without it)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def cpu_machine_entry(
    name: str | None = None, defaults: dict[str, str] | None = None
) -> dict[str, str]:
    """asv's machine entry for a box without NVIDIA GPUs: host, CPU, cores, RAM, OS, torch.

    On a CPU the host timer measures torch's own kernels, so the torch version
    is part of the machine: another torch starts a new series.
    """
    if defaults is None:
        from asv.machine import Machine  # asv's own detection, as `asv machine --yes` does

        defaults = Machine.get_defaults()
    host = platform.node()
    entry = {key: str(defaults.get(key, "")) for key in ("os", "arch", "cpu", "num_cpu", "ram")}
    entry.update(
        machine=name or default_cpu_machine_name(host),
        host=host,
        gpu="none",
        gpu_count="0",
        clock_policy="n/a",
        torch=torch_version(),
    )
    return entry


def this_machine(
    name: str | None = None, gpus: Sequence[str] | None = None, clock_policy: str = "auto"
) -> dict[str, str]:
    """This machine's asv entry: with its GPUs when NVML sees any, else a CPU box (gpu "none")."""
    try:
        return machine_entry(read_inventory(gpus, None), name=name, clock_policy=clock_policy)
    except NoDriver:
        return cpu_machine_entry(name)


# Keys that say which software a machine entry's results ran with: an entry of the same
# name that differs in one of them belongs to another environment.
ENVIRONMENT_KEYS = ("host", "torch")


def collision(old: dict[str, Any], new: dict[str, str]) -> str | None:
    """How `old`, an entry of the same name, belongs to another environment; None if not."""
    for key in ENVIRONMENT_KEYS:
        if key in old and key in new and str(old[key]) != new[key]:
            return f"{key} {old[key]} (this one: {new[key]})"
    return None


class MachineCollision(HardwareError):
    """An entry of this name was written for another environment (the fix in the message)."""


def write_machine_file(
    entry: dict[str, str], path: str | os.PathLike[str] | None = None, *, replace: bool = False
) -> Path:
    """Merge `entry` into asv's machine file (other machines kept), atomically.

    An entry of the same name written for another environment (another host or
    torch) is refused unless `replace`: results of both would be labelled alike.
    """
    target = machine_file_path(path)
    # Before it is read: a FIFO would block the read, a symlink or device must not be replaced.
    check_output_path(target, what="machine file")
    machines: dict[str, Any] = {}
    if target.exists():
        try:
            machines = json.loads(target.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise HardwareError(
                f"cannot read the asv machine file {target} ({error}); fix or move it, "
                "fwdasv will not overwrite it"
            ) from None
        if not isinstance(machines, dict) or machines.get("version", MACHINE_FILE_VERSION) != 1:
            raise HardwareError(
                f"{target} is not an asv machine file of version {MACHINE_FILE_VERSION}; "
                "fix or move it, fwdasv will not overwrite it"
            )
    old = machines.get(entry["machine"])
    other = collision(old, entry) if isinstance(old, dict) and not replace else None
    if other is not None:
        raise MachineCollision(
            f"machine {entry['machine']!r} in {target} was written for another environment "
            f"({other}): results of both would be stored under one name. Give this one "
            f"another --name (`fwdasv hw machine` without --name names each environment "
            f"apart), or pass --replace if that entry is this environment's, changed"
        )
    machines[entry["machine"]] = dict(entry)
    machines["version"] = MACHINE_FILE_VERSION
    write_atomic(
        target,
        json.dumps(machines, indent=4, sort_keys=True) + "\n",
        make_parents=False,
        what="machine file",
    )
    return target


def machine_file_path(path: str | os.PathLike[str] | None = None) -> Path:
    """asv's machine file: `path`, or ~/.asv-machine.json."""
    return Path(path if path is not None else DEFAULT_MACHINE_FILE).expanduser()


@dataclass(frozen=True)
class Recorded:
    """What `record_machine` wrote: the entry, the file, and why it is a CPU entry."""

    entry: dict[str, str]
    path: Path
    no_gpu: str | None  # NVML's reason when no GPU was found; None for a GPU entry


def record_machine(
    gpus: Sequence[str] | None = None,
    name: str | None = None,
    machine_file: str | os.PathLike[str] | None = None,
    clock_policy: str = "auto",
    state_file: str | os.PathLike[str] | None = None,
    replace: bool = False,
) -> Recorded:
    """`fwdasv hw machine`: the GPU entry, or, on a box without NVIDIA GPUs, a CPU entry.

    GPUs asked for by index or UUID that NVML cannot see stay an error
    (`NoDriver`): the run that follows would not time them.
    """
    try:
        entry = machine_entry(read_inventory(gpus, state_file), name, clock_policy)
        return Recorded(entry, write_machine_file(entry, machine_file, replace=replace), None)
    except NoDriver as error:
        if gpus is not None:
            raise NoDriver(f"{error} (or drop --gpus for a CPU machine entry)") from None
        entry = cpu_machine_entry(name)
        reason = str(error).split(";")[0]
        return Recorded(entry, write_machine_file(entry, machine_file, replace=replace), reason)
