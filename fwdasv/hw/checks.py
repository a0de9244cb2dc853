"""Pre-flight checks: a GPU that is busy, throttled, hot or clocked otherwise stops a run."""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fwdasv.hw.errors import HardwareError
from fwdasv.hw.nvml import GpuInfo, Inventory, read_inventory
from fwdasv.hw.statefile import now_iso

CLOCK_POLICIES = ("any", "default", "locked")

# The reasons that mean the clocks are held below what the run asked for.
THROTTLE_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "board_limit",
        "reliability",
    }
)
TEMPERATURE_MARGIN_C = 10


# --------------------------------------------------------------------------- pre-flight checks


@dataclass(frozen=True)
class Check:
    """One pre-flight check on one GPU; a failed `required` check stops the run."""

    name: str
    gpu: int
    ok: bool
    required: bool
    detail: str

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "FAIL" if self.required else "warn"


def _cannot_verify(name: str, gpu: GpuInfo, what: str) -> Check:
    error = gpu.unreadable.get(what, "not readable")
    return Check(name, gpu.index, False, False, f"cannot verify: {what} unreadable ({error})")


def check_processes(gpu: GpuInfo, allow_pids: Iterable[int] = ()) -> Check:
    name = "no-other-processes"
    if gpu.processes is None:
        return _cannot_verify(name, gpu, "processes")
    allowed = set(allow_pids)
    others = [p for p in gpu.processes if p.pid not in allowed]
    if not others:
        mine = len(gpu.processes) - len(others)
        extra = f" ({mine} allowed)" if mine else ""
        return Check(name, gpu.index, True, True, f"no other compute process{extra}")
    listed = ", ".join(
        f"pid {p.pid} {p.name or '(name unreadable)'} {p.used_memory_mib} MiB" for p in others
    )
    return Check(name, gpu.index, False, True, f"{len(others)} other compute process(es): {listed}")


def check_throttling(gpu: GpuInfo) -> Check:
    name = "no-throttling"
    if gpu.clock_event_reasons is None:
        return _cannot_verify(name, gpu, "clock_event_reasons")
    active = [r for r in gpu.clock_event_reasons if r in THROTTLE_REASONS]
    if active:
        return Check(name, gpu.index, False, True, "clocks held down by " + ", ".join(active))
    shown = ", ".join(gpu.clock_event_reasons) or "none"
    return Check(name, gpu.index, True, True, f"clock event reasons: {shown}")


def check_clock_policy(gpu: GpuInfo, policy: str) -> Check:
    """'locked': fwdasv locked this GPU's clocks in this boot; 'default': it did not and the
    applications clocks are the defaults; 'any': always passes (the state is only reported)."""
    name = "clock-policy"
    if policy not in CLOCK_POLICIES:
        raise HardwareError(f"clock policy {policy!r}: choose one of {', '.join(CLOCK_POLICIES)}")
    lock = gpu.clock_lock.gpu if gpu.clock_lock else None
    state = f"locked at {lock.label}" if lock else "not locked by fwdasv"
    if policy == "any":
        return Check(name, gpu.index, True, False, f"any (clocks {state})")
    if policy == "locked":
        if lock:
            return Check(name, gpu.index, True, True, f"locked at {lock.label} by fwdasv")
        return Check(
            name,
            gpu.index,
            False,
            True,
            "clocks are not locked by fwdasv in this boot (NVML cannot read a lock set with "
            "nvidia-smi); run 'fwdasv hw setup --lock-clocks base' as root",
        )
    if lock:
        return Check(
            name, gpu.index, False, True, f"clocks locked at {lock.label}; run 'fwdasv hw reset'"
        )
    target = (gpu.app_graphics_clock_mhz, gpu.app_memory_clock_mhz)
    default = (gpu.default_app_graphics_clock_mhz, gpu.default_app_memory_clock_mhz)
    if None in target or None in default:
        return Check(name, gpu.index, True, True, "not locked; applications clocks unreadable")
    if target != default:
        return Check(
            name,
            gpu.index,
            False,
            True,
            f"applications clocks {target[0]}/{target[1]} MHz (graphics/memory) differ from "
            f"the defaults {default[0]}/{default[1]} MHz; reset them (nvidia-smi -rac)",
        )
    return Check(name, gpu.index, True, True, f"default (applications clocks {target[0]} MHz)")


def check_persistence(gpu: GpuInfo) -> Check:
    name = "persistence-mode"
    if gpu.persistence_mode is None:
        return _cannot_verify(name, gpu, "persistence_mode")
    if gpu.persistence_mode:
        return Check(name, gpu.index, True, False, "on")
    return Check(
        name,
        gpu.index,
        False,
        False,
        "off: the driver may tear down and re-init between runs (fwdasv hw setup --persistence)",
    )


def check_temperature(gpu: GpuInfo) -> Check:
    name = "temperature"
    if gpu.temperature_c is None:
        return _cannot_verify(name, gpu, "temperature")
    if gpu.slowdown_temperature_c is None:
        return Check(name, gpu.index, True, False, f"{gpu.temperature_c} C")
    detail = f"{gpu.temperature_c} C (slowdown at {gpu.slowdown_temperature_c} C)"
    ok = gpu.temperature_c < gpu.slowdown_temperature_c - TEMPERATURE_MARGIN_C
    return Check(name, gpu.index, ok, False, detail)


def check_idle(gpu: GpuInfo) -> Check:
    name = "gpu-idle"
    if gpu.utilization_gpu_pct is None:
        return _cannot_verify(name, gpu, "utilization")
    ok = gpu.utilization_gpu_pct == 0
    return Check(name, gpu.index, ok, False, f"utilization {gpu.utilization_gpu_pct}%")


def preflight(
    inventory: Inventory, clock_policy: str = "any", allow_pids: Iterable[int] = ()
) -> list[Check]:
    """Every check on every GPU of the inventory."""
    allow = tuple(allow_pids)
    checks: list[Check] = []
    for gpu in inventory.gpus:
        checks += [
            check_processes(gpu, allow),
            check_throttling(gpu),
            check_clock_policy(gpu, clock_policy),
            check_persistence(gpu),
            check_temperature(gpu),
            check_idle(gpu),
        ]
    return checks


def checks_ok(checks: Iterable[Check]) -> bool:
    return all(c.ok or not c.required for c in checks)


def preflight_snapshot(
    gpus: Sequence[str] | None = None,
    clock_policy: str = "any",
    allow_pids: Iterable[int] = (),
    state_file: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Inventory and checks as one plain dict, to record alongside results.

    Raises `NoDriver` where there is no NVIDIA driver (a CPU machine): catch it there.
    """
    inventory = read_inventory(gpus, state_file)
    checks = preflight(inventory, clock_policy, allow_pids)
    return {
        "taken_at": now_iso(),
        "host": platform.node(),
        "clock_policy": clock_policy,
        "ok": checks_ok(checks),
        "checks": [dataclasses.asdict(c) | {"status": c.status} for c in checks],
        "inventory": inventory.to_dict(),
    }
