"""Clock and persistence changes: planned as values, made only through `NvmlApplier`.

A dry run uses `PrintingApplier` instead, so it cannot change anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pynvml

from fwdasv.hw.errors import HardwareError, NotPermitted
from fwdasv.hw.nvml import GpuInfo
from fwdasv.hw.statefile import ClockLock, GpuSettings, SavedGpu

# The only NVML functions that change a GPU; `NvmlApplier` refuses any other.
SETTERS = frozenset(
    {
        "nvmlDeviceSetPersistenceMode",
        "nvmlDeviceSetGpuLockedClocks",
        "nvmlDeviceResetGpuLockedClocks",
        "nvmlDeviceSetMemoryLockedClocks",
        "nvmlDeviceResetMemoryLockedClocks",
        "nvmlDeviceSetApplicationsClocks",
        "nvmlDeviceResetApplicationsClocks",
    }
)


# --------------------------------------------------------------------------- changes


_SENTINELS = {
    pynvml.NVML_CLOCK_LIMIT_ID_TDP: "NVML_CLOCK_LIMIT_ID_TDP",
    pynvml.NVML_CLOCK_LIMIT_ID_UNLIMITED: "NVML_CLOCK_LIMIT_ID_UNLIMITED",
}


@dataclass(frozen=True)
class Change:
    """One NVML setter call on one GPU, named so a dry run can print it."""

    gpu_index: int
    gpu_uuid: str
    function: str
    args: tuple[int, ...]
    why: str

    def __post_init__(self) -> None:
        assert self.function in SETTERS, f"{self.function} is not an NVML setter fwdasv uses"

    def describe(self) -> str:
        args = ", ".join(_SENTINELS.get(a, str(a)) for a in self.args)
        return f"GPU {self.gpu_index} ({self.gpu_uuid}): {self.function}({args})  # {self.why}"


class NvmlApplier:
    """The only code that calls NVML setters. Dry runs never build one."""

    dry_run = False

    def __init__(self, echo: Callable[[str], None] = print) -> None:
        self.echo = echo

    def apply(self, change: Change) -> None:
        assert change.function in SETTERS, change
        setter = getattr(pynvml, change.function)
        try:
            setter(pynvml.nvmlDeviceGetHandleByUUID(change.gpu_uuid), *change.args)
        except pynvml.NVMLError_NoPermission:
            raise NotPermitted(
                f"GPU {change.gpu_index}: NVML refused {change.function} (Insufficient "
                "Permissions); changing clocks or persistence mode needs root: run with sudo"
            ) from None
        except pynvml.NVMLError as error:
            raise HardwareError(
                f"GPU {change.gpu_index}: {change.function}"
                f"({', '.join(map(str, change.args))}) failed: {error}"
            ) from None
        self.echo(f"done: {change.describe()}")


class PrintingApplier:
    """Stands in for `NvmlApplier` in a dry run: prints each change, calls nothing."""

    dry_run = True

    def __init__(self, echo: Callable[[str], None] = print) -> None:
        self.echo = echo
        self.changes: list[Change] = []

    def apply(self, change: Change) -> None:
        self.changes.append(change)
        self.echo(f"would call {change.describe()}")


Applier = NvmlApplier | PrintingApplier


def applier_for(dry_run: bool, echo: Callable[[str], None]) -> Applier:
    return PrintingApplier(echo) if dry_run else NvmlApplier(echo)


def require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise NotPermitted(
            f"{action} changes GPU settings and needs root: run it with sudo "
            "(or add --dry-run to see the changes without making them)"
        )


@dataclass(frozen=True)
class LockRequest:
    """What `--lock-clocks` asked for: a frequency in MHz, 'base' or 'default'."""

    kind: str  # "mhz", "base", "default"
    mhz: int | None = None

    @classmethod
    def parse(cls, text: str) -> LockRequest:
        value = text.strip().lower()
        if value in ("base", "default"):
            return cls(value)
        if value.isdigit() and int(value) > 0:
            return cls("mhz", int(value))
        raise HardwareError(
            f"--lock-clocks {text!r}: give a frequency in MHz (e.g. 1755), 'base' (the TDP base "
            "clock) or 'default' (the default applications clock)"
        )

    def resolve(self, gpu: GpuInfo) -> ClockLock:
        """min/max MHz for nvmlDeviceSetGpuLockedClocks on this GPU, and a label for records."""
        if self.kind == "base":
            # NVML resolves the sentinel to the GPU's base (TDP) clock, the one it is rated to
            # sustain at its power limit, so power capping should not pull it lower (nvbench's
            # `--lock-clocks base` does the same).
            tdp = pynvml.NVML_CLOCK_LIMIT_ID_TDP
            return ClockLock(tdp, tdp, "base")
        if self.kind == "default":
            mhz = gpu.default_app_graphics_clock_mhz
            if mhz is None:
                raise HardwareError(
                    f"{gpu.label}: the default applications clock is unreadable "
                    f"({gpu.unreadable.get('default_app_graphics_clock')}); give --lock-clocks MHz"
                )
            return ClockLock(mhz, mhz, f"{mhz}MHz")
        assert self.mhz is not None
        if gpu.sm_clock_max_mhz is not None and self.mhz > gpu.sm_clock_max_mhz:
            raise HardwareError(
                f"--lock-clocks {self.mhz}: above {gpu.label}'s maximum SM clock "
                f"{gpu.sm_clock_max_mhz} MHz"
            )
        return ClockLock(self.mhz, self.mhz, f"{self.mhz}MHz")


def _memory_mhz(text: str) -> int | None:
    """`--lock-memory-clocks`' frequency in MHz; None for 'max' (the GPU's own)."""
    value = text.strip().lower()
    if value == "max":
        return None
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise HardwareError(
        f"--lock-memory-clocks {text!r}: give a frequency in MHz or 'max' (e.g. 3201 on an H200)"
    )


def check_lock_values(lock_clocks: str | None, lock_memory_clocks: str | None) -> None:
    """Refuse a --lock-clocks or --lock-memory-clocks that is neither a frequency nor a word
    they take, before NVML is asked anything (bad input is exit 2 on any box)."""
    if lock_clocks:
        LockRequest.parse(lock_clocks)
    if lock_memory_clocks:
        _memory_mhz(lock_memory_clocks)


def _memory_lock(text: str, gpu: GpuInfo) -> ClockLock:
    mhz = _memory_mhz(text)
    if mhz is None:
        mhz = gpu.memory_clock_max_mhz
        if mhz is None:
            raise HardwareError(f"{gpu.label}: the maximum memory clock is unreadable")
    return ClockLock(mhz, mhz, f"{mhz}MHz")


def plan_setup(
    gpus: Sequence[GpuInfo],
    lock_clocks: str | None = None,
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
) -> tuple[list[SavedGpu], list[Change]]:
    """The saved state of each GPU (before and what will be applied) and the changes, in order."""
    request = LockRequest.parse(lock_clocks) if lock_clocks else None
    saved: list[SavedGpu] = []
    changes: list[Change] = []
    for gpu in gpus:
        if gpu.uuid is None:
            raise HardwareError(f"{gpu.label}: UUID unreadable, so its state cannot be saved")
        before = GpuSettings(
            persistence_mode=gpu.persistence_mode,
            # No lock before: a previous fwdasv lock is refused first.
            app_graphics_clock_mhz=gpu.app_graphics_clock_mhz,
            app_memory_clock_mhz=gpu.app_memory_clock_mhz,
            default_app_graphics_clock_mhz=gpu.default_app_graphics_clock_mhz,
            default_app_memory_clock_mhz=gpu.default_app_memory_clock_mhz,
        )
        persistence_mode, sm_lock, memory_lock = None, None, None

        def change(function: str, *args: int, why: str, gpu: GpuInfo = gpu) -> None:
            changes.append(Change(gpu.index, gpu.uuid or "", function, tuple(args), why))

        if persistence and gpu.persistence_mode is not True:
            persistence_mode = True
            change(
                "nvmlDeviceSetPersistenceMode",
                pynvml.NVML_FEATURE_ENABLED,
                why=f"persistence mode on (was {_on_off(gpu.persistence_mode)})",
            )
        if request is not None:
            sm_lock = request.resolve(gpu)
            change(
                "nvmlDeviceSetGpuLockedClocks",
                sm_lock.min_mhz,
                sm_lock.max_mhz,
                why=f"lock SM clocks at {sm_lock.label}",
            )
        if lock_memory_clocks:
            memory_lock = _memory_lock(lock_memory_clocks, gpu)
            change(
                "nvmlDeviceSetMemoryLockedClocks",
                memory_lock.min_mhz,
                memory_lock.max_mhz,
                why=f"lock memory clocks at {memory_lock.label}",
            )
        applied = GpuSettings(persistence_mode, sm_lock, memory_lock)
        saved.append(SavedGpu(gpu.index, gpu.uuid, gpu.name, before, applied))
    return saved, changes


def plan_reset(saved: Sequence[SavedGpu], current: dict[str, GpuInfo]) -> list[Change]:
    """The changes that bring each saved GPU back to its saved state, setup's in reverse."""
    changes: list[Change] = []
    for entry in saved:
        uuid, before, applied = entry.uuid, entry.before, entry.applied
        gpu = current[uuid]

        def change(
            function: str, *args: int, why: str, gpu: GpuInfo = gpu, uuid: str = uuid
        ) -> None:
            changes.append(Change(gpu.index, uuid, function, tuple(args), why))

        if applied.memory_locked_clocks:
            change("nvmlDeviceResetMemoryLockedClocks", why="memory clocks were not locked before")
        if applied.gpu_locked_clocks:
            change("nvmlDeviceResetGpuLockedClocks", why="SM clocks were not locked before")
        clocks = (before.app_memory_clock_mhz, before.app_graphics_clock_mhz)
        now = (gpu.app_memory_clock_mhz, gpu.app_graphics_clock_mhz)
        memory, graphics = clocks
        if memory is not None and graphics is not None and None not in now and clocks != now:
            defaults = (before.default_app_memory_clock_mhz, before.default_app_graphics_clock_mhz)
            why = f"applications clocks back to {graphics}/{memory} MHz (graphics/memory)"
            if clocks == defaults:
                change("nvmlDeviceResetApplicationsClocks", why=why)
            else:
                change("nvmlDeviceSetApplicationsClocks", memory, graphics, why=why)
        if applied.persistence_mode is not None and before.persistence_mode is not None:
            was = bool(before.persistence_mode)
            if was != bool(applied.persistence_mode):
                mode = pynvml.NVML_FEATURE_ENABLED if was else pynvml.NVML_FEATURE_DISABLED
                change("nvmlDeviceSetPersistenceMode", mode, why=f"persistence mode {_on_off(was)}")
    return changes


def _on_off(value: bool | None) -> str:
    return "unknown" if value is None else ("on" if value else "off")
