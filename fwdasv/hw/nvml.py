"""GPU hygiene through NVML: inventory, pre-flight checks, clock lock/unlock, asv's machine file.

Forward latency moves with the GPU's clocks, its temperature, its neighbours and
even the individual chip (two H200s of one model differed by 1.5-1.8% on vLLM's
forward bench), so a run records what it ran on, refuses a busy or throttled
GPU, and the asv machine is named after the exact GPUs: a swapped GPU starts a
new series instead of reading as a regression.

Every NVML field is read on its own: one the GPU or driver cannot report is
None (and listed in `unreadable`), never a crash. NVML setters are reached only
through `NvmlApplier`; a dry run uses `PrintingApplier` instead, so it cannot
change anything. Changes are saved before they are made and undone by `reset`,
also when the process is interrupted (atexit and SIGTERM/SIGINT handlers).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import platform
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from fwdasv.core.errors import UserError
from fwdasv.core.results import write_atomic

STATE_FILE_ENV = "FWDASV_HW_STATE_FILE"
DEFAULT_STATE_FILE = "~/.cache/fwdasv/hw-state.json"
DEFAULT_MACHINE_FILE = "~/.asv-machine.json"
STATE_VERSION = 1
MACHINE_FILE_VERSION = 1  # asv.machine.MachineCollection.api_version

EXIT_CHECKS_FAILED = 3

CLOCK_POLICIES = ("any", "default", "locked")

# NVML's clocks event (formerly "throttle") reason bits, by name.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
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

_MIB = 1024 * 1024


class HardwareError(UserError):
    """A GPU state or setting the user can fix; `exit_code` is the CLI's exit status."""

    exit_code = 1


class NoDriver(HardwareError):
    """No usable NVIDIA driver or GPU (no libnvidia-ml, driver not loaded, no GPU)."""

    exit_code = 4


class NotPermitted(HardwareError):
    """A change that needs root (or NVML refused it for lack of permission)."""

    exit_code = 5


# --------------------------------------------------------------------------- NVML session


@contextlib.contextmanager
def nvml() -> Iterator[None]:
    """An initialised NVML for the block; no driver ends as `NoDriver` with the fix in one line."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        raise NoDriver(
            "no NVIDIA driver: NVML's library libnvidia-ml.so.1 was not found; "
            "run on a machine with an NVIDIA GPU and its driver installed"
        ) from None
    except pynvml.NVMLError_DriverNotLoaded:
        raise NoDriver(
            "no NVIDIA driver loaded (NVML: Driver Not Loaded); "
            "load the nvidia kernel module or run on a GPU machine"
        ) from None
    except pynvml.NVMLError_LibRmVersionMismatch:
        raise NoDriver(
            "the NVIDIA kernel driver and libnvidia-ml differ in version; "
            "reboot (or reload the nvidia module) after the driver upgrade"
        ) from None
    except pynvml.NVMLError_NoPermission:
        raise NotPermitted("NVML refused to start: no permission to open the GPU devices") from None
    except pynvml.NVMLError as error:
        raise NoDriver(f"NVML failed to start ({error}); check the NVIDIA driver") from None
    try:
        yield
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


# --------------------------------------------------------------------------- inventory


@dataclass(frozen=True)
class ComputeProcess:
    pid: int
    used_memory_mib: int | None
    name: str | None  # from /proc when readable (a pid in another namespace is not)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML reports it; None where the GPU or driver cannot say."""

    index: int
    uuid: str | None
    name: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    memory_clock_mhz: int | None
    memory_clock_max_mhz: int | None
    app_graphics_clock_mhz: int | None
    app_memory_clock_mhz: int | None
    default_app_graphics_clock_mhz: int | None
    default_app_memory_clock_mhz: int | None
    # NVML has no getter for locked clocks: this is the lock fwdasv's state file records
    # for this GPU in this boot, or None (a lock set with `nvidia-smi -lgc` is invisible).
    clock_lock: dict[str, Any] | None
    persistence_mode: bool | None
    temperature_c: int | None
    slowdown_temperature_c: int | None
    power_draw_w: float | None
    power_limit_w: float | None
    default_power_limit_w: float | None
    utilization_gpu_pct: int | None
    clock_event_reasons_mask: int | None
    clock_event_reasons: tuple[str, ...] | None
    processes: tuple[ComputeProcess, ...] | None
    mig_mode: bool | None
    mig_mode_pending: bool | None
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name or 'unknown model'}, {self.uuid or 'no UUID'})"


@dataclass(frozen=True)
class Inventory:
    driver_version: str | None
    cuda_driver_version: str | None
    gpus: tuple[GpuInfo, ...]
    unreadable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """The names of the set bits of an NVML clocks event/throttle reasons mask."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_{unknown:#x}")
    return tuple(names)


def format_cuda_version(version: int) -> str:
    """NVML's CUDA driver version integer (13000) as CUDA writes it ("13.0")."""
    return f"{version // 1000}.{version % 1000 // 10}"


# A driver older (or newer) than nvidia-ml-py: the versioned call or struct is not there.
_OLDER_DRIVER = (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_ArgumentVersionMismatch)


class _Reader:
    """Reads one field through the first NVML call the library has; failures become None."""

    def __init__(self) -> None:
        self.unreadable: dict[str, str] = {}

    def __call__(self, name: str, *calls: Callable[[], Any]) -> Any:
        error: Exception | None = None
        for call in calls:
            try:
                return call()
            except _OLDER_DRIVER as missing:
                error = missing  # the driver lacks this call or struct version: try the older call
            except (pynvml.NVMLError, pynvml.NVMLLibraryMismatchError) as failed:
                error = failed
                break
        self.unreadable[name] = str(error)
        return None


def _mib(value: int | None) -> int | None:
    return None if value is None else round(value / _MIB)


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def process_name(pid: int) -> str | None:
    """The command line (or name) of `pid` from /proc, None where it is not readable."""
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        words = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
        if words:
            return " ".join(" ".join(words).split())[:200]
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    return None


def _processes(handle: Any) -> tuple[ComputeProcess, ...]:
    try:
        found = pynvml.nvmlDeviceGetComputeRunningProcesses_v3(handle)
    except _OLDER_DRIVER:
        found = pynvml.nvmlDeviceGetComputeRunningProcesses_v2(handle)
    return tuple(
        ComputeProcess(pid=p.pid, used_memory_mib=_mib(p.usedGpuMemory), name=process_name(p.pid))
        for p in found
    )


def _memory(handle: Any) -> Any:
    try:
        return pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    except _OLDER_DRIVER:
        return pynvml.nvmlDeviceGetMemoryInfo(handle)


def _read_gpu(handle: Any, index: int, locks: dict[str, dict[str, Any]]) -> GpuInfo:
    read = _Reader()
    nv = pynvml
    uuid = read("uuid", lambda: nv.nvmlDeviceGetUUID(handle))
    memory = read("memory", lambda: _memory(handle))
    reasons = read(
        "clock_event_reasons",
        lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle),
        lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
    )
    mig = read("mig_mode", lambda: nv.nvmlDeviceGetMigMode(handle))
    utilization = read("utilization", lambda: nv.nvmlDeviceGetUtilizationRates(handle))
    persistence = read("persistence_mode", lambda: nv.nvmlDeviceGetPersistenceMode(handle))

    return GpuInfo(
        index=index,
        uuid=uuid,
        name=read("name", lambda: nv.nvmlDeviceGetName(handle)),
        memory_total_mib=_mib(memory.total) if memory is not None else None,
        memory_used_mib=_mib(memory.used) if memory is not None else None,
        sm_clock_mhz=read("sm_clock", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)),
        sm_clock_max_mhz=read(
            "sm_clock_max", lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)
        ),
        memory_clock_mhz=read(
            "memory_clock", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)
        ),
        memory_clock_max_mhz=read(
            "memory_clock_max", lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)
        ),
        app_graphics_clock_mhz=read(
            "app_graphics_clock",
            lambda: nv.nvmlDeviceGetClock(
                handle, nv.NVML_CLOCK_GRAPHICS, nv.NVML_CLOCK_ID_APP_CLOCK_TARGET
            ),
            lambda: nv.nvmlDeviceGetApplicationsClock(handle, nv.NVML_CLOCK_GRAPHICS),
        ),
        app_memory_clock_mhz=read(
            "app_memory_clock",
            lambda: nv.nvmlDeviceGetClock(
                handle, nv.NVML_CLOCK_MEM, nv.NVML_CLOCK_ID_APP_CLOCK_TARGET
            ),
            lambda: nv.nvmlDeviceGetApplicationsClock(handle, nv.NVML_CLOCK_MEM),
        ),
        default_app_graphics_clock_mhz=read(
            "default_app_graphics_clock",
            lambda: nv.nvmlDeviceGetClock(
                handle, nv.NVML_CLOCK_GRAPHICS, nv.NVML_CLOCK_ID_APP_CLOCK_DEFAULT
            ),
            lambda: nv.nvmlDeviceGetDefaultApplicationsClock(handle, nv.NVML_CLOCK_GRAPHICS),
        ),
        default_app_memory_clock_mhz=read(
            "default_app_memory_clock",
            lambda: nv.nvmlDeviceGetClock(
                handle, nv.NVML_CLOCK_MEM, nv.NVML_CLOCK_ID_APP_CLOCK_DEFAULT
            ),
            lambda: nv.nvmlDeviceGetDefaultApplicationsClock(handle, nv.NVML_CLOCK_MEM),
        ),
        clock_lock=locks.get(uuid) if uuid else None,
        persistence_mode=None if persistence is None else persistence == nv.NVML_FEATURE_ENABLED,
        temperature_c=read(
            "temperature",
            lambda: nv.nvmlDeviceGetTemperatureV(handle, nv.NVML_TEMPERATURE_GPU),
            lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
        ),
        slowdown_temperature_c=read(
            "slowdown_temperature",
            lambda: nv.nvmlDeviceGetTemperatureThreshold(
                handle, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            ),
        ),
        power_draw_w=_watts(read("power_draw", lambda: nv.nvmlDeviceGetPowerUsage(handle))),
        power_limit_w=_watts(
            read("power_limit", lambda: nv.nvmlDeviceGetPowerManagementLimit(handle))
        ),
        default_power_limit_w=_watts(
            read("default_power_limit", lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(handle))
        ),
        utilization_gpu_pct=utilization.gpu if utilization is not None else None,
        clock_event_reasons_mask=reasons,
        clock_event_reasons=decode_clock_event_reasons(reasons) if reasons is not None else None,
        processes=read("processes", lambda: _processes(handle)),
        mig_mode=None if mig is None else mig[0] == nv.NVML_DEVICE_MIG_ENABLE,
        mig_mode_pending=None if mig is None else mig[1] == nv.NVML_DEVICE_MIG_ENABLE,
        unreadable=read.unreadable,
    )


def parse_gpu_selection(text: str | None) -> tuple[str, ...] | None:
    """'0,1' or 'GPU-…,GPU-…' -> the items; None or 'all' -> None (every GPU)."""
    if text is None or text.strip().lower() in ("", "all"):
        return None
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    for item in items:
        if not (item.isdigit() or item.startswith(("GPU-", "MIG-"))):
            raise HardwareError(
                f"--gpus {text!r}: {item!r} is neither an NVML index (0, 1, ...) nor a GPU UUID "
                "(GPU-...); give e.g. --gpus 0,1"
            )
    return items


def _handles(selection: Sequence[str] | None) -> list[tuple[int, Any]]:
    """(NVML index, handle) of the selected GPUs, in the order given, without repeats."""
    count = pynvml.nvmlDeviceGetCount()
    if count == 0:
        raise NoDriver("NVML reports no NVIDIA GPU on this machine")
    if selection is None:
        return [(i, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    chosen: dict[int, Any] = {}
    for item in selection:
        if item.isdigit():
            index = int(item)
            if index >= count:
                raise HardwareError(
                    f"--gpus: GPU index {index} does not exist; this machine has {count} "
                    f"GPU(s), indices 0-{count - 1} (as nvidia-smi numbers them)"
                )
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        else:
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(item)
            except pynvml.NVMLError_NotFound:
                raise HardwareError(
                    f"--gpus: no GPU with UUID {item} on this machine (see 'nvidia-smi -L')"
                ) from None
            index = pynvml.nvmlDeviceGetIndex(handle)
        chosen.setdefault(index, handle)
    return list(chosen.items())


def _read_inventory(selection: Sequence[str] | None, state_file: Path | None) -> Inventory:
    read = _Reader()
    driver = read("driver_version", pynvml.nvmlSystemGetDriverVersion)
    cuda = read(
        "cuda_driver_version",
        pynvml.nvmlSystemGetCudaDriverVersion_v2,
        pynvml.nvmlSystemGetCudaDriverVersion,
    )
    locks = _recorded_locks(state_file)
    gpus = tuple(_read_gpu(handle, index, locks) for index, handle in _handles(selection))
    return Inventory(
        driver_version=driver,
        cuda_driver_version=format_cuda_version(cuda) if cuda is not None else None,
        gpus=gpus,
        unreadable=read.unreadable,
    )


def read_inventory(
    gpus: Sequence[str] | None = None, state_file: str | os.PathLike[str] | None = None
) -> Inventory:
    """The NVML inventory of the selected GPUs (all by default)."""
    with nvml():
        return _read_inventory(gpus, resolve_state_file(state_file))


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
    lock = (gpu.clock_lock or {}).get("gpu")
    state = f"locked at {lock['label']}" if lock else "not locked by fwdasv"
    if policy == "any":
        return Check(name, gpu.index, True, False, f"any (clocks {state})")
    if policy == "locked":
        if lock:
            return Check(name, gpu.index, True, True, f"locked at {lock['label']} by fwdasv")
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
            name, gpu.index, False, True, f"clocks locked at {lock['label']}; run 'fwdasv hw reset'"
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
        "taken_at": _now(),
        "host": platform.node(),
        "clock_policy": clock_policy,
        "ok": checks_ok(checks),
        "checks": [dataclasses.asdict(c) | {"status": c.status} for c in checks],
        "inventory": inventory.to_dict(),
    }


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


def _applier(dry_run: bool, echo: Callable[[str], None]) -> Applier:
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

    def resolve(self, gpu: GpuInfo) -> dict[str, Any]:
        """min/max MHz for nvmlDeviceSetGpuLockedClocks on this GPU, and a label for records."""
        if self.kind == "base":
            # NVML resolves the sentinel to the GPU's base (TDP) clock, the one it is rated to
            # sustain at its power limit, so power capping should not pull it lower (nvbench's
            # `--lock-clocks base` does the same).
            tdp = pynvml.NVML_CLOCK_LIMIT_ID_TDP
            return {"min_mhz": tdp, "max_mhz": tdp, "label": "base"}
        if self.kind == "default":
            mhz = gpu.default_app_graphics_clock_mhz
            if mhz is None:
                raise HardwareError(
                    f"{gpu.label}: the default applications clock is unreadable "
                    f"({gpu.unreadable.get('default_app_graphics_clock')}); give --lock-clocks MHz"
                )
            return {"min_mhz": mhz, "max_mhz": mhz, "label": f"{mhz}MHz"}
        assert self.mhz is not None
        if gpu.sm_clock_max_mhz is not None and self.mhz > gpu.sm_clock_max_mhz:
            raise HardwareError(
                f"--lock-clocks {self.mhz}: above {gpu.label}'s maximum SM clock "
                f"{gpu.sm_clock_max_mhz} MHz"
            )
        return {"min_mhz": self.mhz, "max_mhz": self.mhz, "label": f"{self.mhz}MHz"}


def _memory_lock(text: str, gpu: GpuInfo) -> dict[str, Any]:
    value = text.strip().lower()
    if value == "max":
        mhz = gpu.memory_clock_max_mhz
        if mhz is None:
            raise HardwareError(f"{gpu.label}: the maximum memory clock is unreadable")
    elif value.isdigit() and int(value) > 0:
        mhz = int(value)
    else:
        raise HardwareError(
            f"--lock-memory-clocks {text!r}: give a frequency in MHz or 'max' (e.g. 3201 on an H200)"
        )
    return {"min_mhz": mhz, "max_mhz": mhz, "label": f"{mhz}MHz"}


def plan_setup(
    gpus: Sequence[GpuInfo],
    lock_clocks: str | None = None,
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
) -> tuple[list[dict[str, Any]], list[Change]]:
    """The saved state of each GPU (before and what will be applied) and the changes, in order."""
    request = LockRequest.parse(lock_clocks) if lock_clocks else None
    entries: list[dict[str, Any]] = []
    changes: list[Change] = []
    for gpu in gpus:
        if gpu.uuid is None:
            raise HardwareError(f"{gpu.label}: UUID unreadable, so its state cannot be saved")
        before = {
            "persistence_mode": gpu.persistence_mode,
            "gpu_locked_clocks": None,  # a previous fwdasv lock is refused below
            "memory_locked_clocks": None,
            "app_graphics_clock_mhz": gpu.app_graphics_clock_mhz,
            "app_memory_clock_mhz": gpu.app_memory_clock_mhz,
            "default_app_graphics_clock_mhz": gpu.default_app_graphics_clock_mhz,
            "default_app_memory_clock_mhz": gpu.default_app_memory_clock_mhz,
        }
        applied: dict[str, Any] = {
            "persistence_mode": None,
            "gpu_locked_clocks": None,
            "memory_locked_clocks": None,
        }

        def change(function: str, *args: int, why: str, gpu: GpuInfo = gpu) -> None:
            changes.append(Change(gpu.index, gpu.uuid or "", function, tuple(args), why))

        if persistence and gpu.persistence_mode is not True:
            applied["persistence_mode"] = True
            change(
                "nvmlDeviceSetPersistenceMode",
                pynvml.NVML_FEATURE_ENABLED,
                why=f"persistence mode on (was {_on_off(gpu.persistence_mode)})",
            )
        if request is not None:
            lock = request.resolve(gpu)
            applied["gpu_locked_clocks"] = lock
            change(
                "nvmlDeviceSetGpuLockedClocks",
                lock["min_mhz"],
                lock["max_mhz"],
                why=f"lock SM clocks at {lock['label']}",
            )
        if lock_memory_clocks:
            lock = _memory_lock(lock_memory_clocks, gpu)
            applied["memory_locked_clocks"] = lock
            change(
                "nvmlDeviceSetMemoryLockedClocks",
                lock["min_mhz"],
                lock["max_mhz"],
                why=f"lock memory clocks at {lock['label']}",
            )
        entries.append(
            {
                "index": gpu.index,
                "uuid": gpu.uuid,
                "name": gpu.name,
                "before": before,
                "applied": applied,
            }
        )
    return entries, changes


def plan_reset(entries: Sequence[dict[str, Any]], current: dict[str, GpuInfo]) -> list[Change]:
    """The changes that bring each saved GPU back to its saved state, setup's in reverse."""
    changes: list[Change] = []
    for entry in entries:
        uuid, before, applied = entry["uuid"], entry["before"], entry["applied"]
        gpu = current[uuid]

        def change(
            function: str, *args: int, why: str, gpu: GpuInfo = gpu, uuid: str = uuid
        ) -> None:
            changes.append(Change(gpu.index, uuid, function, tuple(args), why))

        if applied.get("memory_locked_clocks"):
            change("nvmlDeviceResetMemoryLockedClocks", why="memory clocks were not locked before")
        if applied.get("gpu_locked_clocks"):
            change("nvmlDeviceResetGpuLockedClocks", why="SM clocks were not locked before")
        saved = (before.get("app_memory_clock_mhz"), before.get("app_graphics_clock_mhz"))
        now = (gpu.app_memory_clock_mhz, gpu.app_graphics_clock_mhz)
        if None not in saved and None not in now and saved != now:
            defaults = (
                before.get("default_app_memory_clock_mhz"),
                before.get("default_app_graphics_clock_mhz"),
            )
            why = f"applications clocks back to {saved[1]}/{saved[0]} MHz (graphics/memory)"
            if saved == defaults:
                change("nvmlDeviceResetApplicationsClocks", why=why)
            else:
                change("nvmlDeviceSetApplicationsClocks", saved[0], saved[1], why=why)
        if (
            applied.get("persistence_mode") is not None
            and before.get("persistence_mode") is not None
        ):
            was = bool(before["persistence_mode"])
            if was != bool(applied["persistence_mode"]):
                mode = pynvml.NVML_FEATURE_ENABLED if was else pynvml.NVML_FEATURE_DISABLED
                change("nvmlDeviceSetPersistenceMode", mode, why=f"persistence mode {_on_off(was)}")
    return changes


def _on_off(value: bool | None) -> str:
    return "unknown" if value is None else ("on" if value else "off")


# --------------------------------------------------------------------------- state file


def resolve_state_file(path: str | os.PathLike[str] | None = None) -> Path:
    """The given path, else $FWDASV_HW_STATE_FILE, else ~/.cache/fwdasv/hw-state.json."""
    chosen = path if path is not None else os.environ.get(STATE_FILE_ENV) or DEFAULT_STATE_FILE
    return Path(chosen).expanduser()


def _boot_id() -> str | None:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return None


def load_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except OSError as error:
        raise HardwareError(f"cannot read the saved GPU state {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise HardwareError(
            f"the saved GPU state {path} is not valid JSON ({error}); restore the GPUs by hand "
            "(nvidia-smi -rgc -rmc) and delete it"
        ) from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise HardwareError(
            f"{path} is not a fwdasv GPU state file of version {STATE_VERSION}; "
            "restore the GPUs by hand (nvidia-smi -rgc -rmc) and delete it"
        )
    return state


def _recorded_locks(path: Path | None) -> dict[str, dict[str, Any]]:
    """uuid -> the locks fwdasv's state file records, when it was written in this boot."""
    if path is None or not path.exists():
        return {}
    try:
        state = load_state(path)
    except HardwareError:
        return {}
    if state.get("boot_id") != _boot_id():
        return {}  # a reboot cleared the locks the file describes
    locks: dict[str, dict[str, Any]] = {}
    for entry in state.get("gpus", []):
        applied = entry.get("applied", {})
        if applied.get("gpu_locked_clocks") or applied.get("memory_locked_clocks"):
            locks[entry["uuid"]] = {
                "gpu": applied.get("gpu_locked_clocks"),
                "memory": applied.get("memory_locked_clocks"),
                "set_at": state.get("created_at"),
                "state_file": str(path),
            }
    return locks


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- undo on interruption


class UndoGuard:
    """Runs `undo` once: when the block ends, at interpreter exit, or on SIGTERM/SIGINT.

    After undoing on a signal it hands the signal to the handler it replaced (so a
    SIGTERM still terminates and a SIGINT still raises KeyboardInterrupt).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo = undo
        self._done = False
        # Reentrant: a signal may arrive while the main thread is already undoing.
        self._lock = threading.RLock()
        self._previous: dict[int, Any] = {}

    def install(self) -> UndoGuard:
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def uninstall(self) -> None:
        atexit.unregister(self._at_exit)
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def run(self) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                self._undo()

    def __enter__(self) -> UndoGuard:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        try:
            self.run()
        finally:
            self.uninstall()

    def _run_quietly(self, when: str) -> None:
        try:
            self.run()
        except Exception as error:
            print(f"fwdasv: undoing the GPU setup {when} failed: {error}", file=sys.stderr)

    def _at_exit(self) -> None:
        self._run_quietly("at exit")

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self._done and pynvml.libLoadLock.locked():
            # The main thread may be inside pynvml, holding its non-reentrant lock: undoing
            # here would deadlock. Undo from a thread once the lock is free, then signal again.
            threading.Thread(target=self._undo_then_signal, args=(signum,), daemon=True).start()
            return
        self._run_quietly("on signal")
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.uninstall()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _undo_then_signal(self, signum: int) -> None:
        self._run_quietly("on signal")
        os.kill(os.getpid(), signum)


# --------------------------------------------------------------------------- setup / reset


def _setup(
    gpus: Sequence[str] | None,
    lock_clocks: str | None,
    lock_memory_clocks: str | None,
    persistence: bool,
    state_file: str | os.PathLike[str] | None,
    dry_run: bool,
    echo: Callable[[str], None],
) -> tuple[dict[str, Any] | None, UndoGuard | None]:
    if not (lock_clocks or lock_memory_clocks or persistence):
        raise HardwareError(
            "nothing to set up: give --lock-clocks MHz|base|default, --lock-memory-clocks "
            "and/or --persistence"
        )
    path = resolve_state_file(state_file)
    if not dry_run:
        require_root("fwdasv hw setup")
    with nvml():
        if path.exists():
            raise HardwareError(
                f"the GPUs are already set up (saved state {path}); run 'fwdasv hw reset' first, "
                "so the state saved before the first setup is not lost"
            )
        inventory = _read_inventory(gpus, None)
        entries, changes = plan_setup(inventory.gpus, lock_clocks, lock_memory_clocks, persistence)
        state = {
            "version": STATE_VERSION,
            "created_at": _now(),
            "host": platform.node(),
            "pid": os.getpid(),
            "boot_id": _boot_id(),
            "gpus": entries,
        }
        applier = _applier(dry_run, echo)
        if not changes:
            echo("nothing to change: the GPUs are already as asked")
            return None, None
        if dry_run:
            echo(f"would save the current GPU state to {path}")
            for change in changes:
                applier.apply(change)
            echo("dry run: nothing was changed")
            return state, None
        write_atomic(path, json.dumps(state, indent=2) + "\n")
        echo(f"saved the current GPU state to {path}")
        guard = UndoGuard(lambda: reset(path, missing_ok=True, echo=echo)).install()
        made = 0
        try:
            for change in changes:
                applier.apply(change)
                made += 1
        except BaseException as error:
            try:
                if made:
                    guard.run()
                else:  # nothing changed (typically NVML refused the first setter)
                    path.unlink(missing_ok=True)
            except Exception as undo_error:
                failed = HardwareError(
                    f"{error}; undoing the partial setup also failed ({undo_error}): "
                    f"run 'fwdasv hw reset --state-file {path}'"
                )
                failed.exit_code = getattr(error, "exit_code", HardwareError.exit_code)
                raise failed from error
            finally:
                guard.uninstall()
            raise
        return state, guard


def setup(
    gpus: Sequence[str] | None = None,
    lock_clocks: str | None = None,
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
    state_file: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> dict[str, Any] | None:
    """Save the GPUs' state, then lock clocks / enable persistence; `reset` undoes it.

    The changes outlive the call (the operator resets later); an interruption while
    they are being made undoes them. Returns the saved state (None when nothing changes).
    """
    state, guard = _setup(
        gpus, lock_clocks, lock_memory_clocks, persistence, state_file, dry_run, echo
    )
    if guard is not None:
        guard.uninstall()
    return state


@contextlib.contextmanager
def locked_clocks(
    gpus: Sequence[str] | None = None,
    lock_clocks: str = "base",
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
    state_file: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> Iterator[dict[str, Any] | None]:
    """Set up for the block and reset after it, also on an exception, exit or SIGTERM/SIGINT."""
    state, guard = _setup(
        gpus, lock_clocks, lock_memory_clocks, persistence, state_file, False, echo
    )
    try:
        yield state
    finally:
        if guard is not None:
            try:
                guard.run()
            finally:
                guard.uninstall()


def reset(
    state_file: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    missing_ok: bool = False,
    echo: Callable[[str], None] = print,
) -> list[Change]:
    """Restore exactly the state `setup` saved, then delete the state file."""
    path = resolve_state_file(state_file)
    if not path.exists():
        if missing_ok:
            return []
        raise HardwareError(
            f"no saved GPU state at {path}: nothing to reset (setup was not run with this "
            "--state-file, or reset already ran)"
        )
    if not dry_run:
        require_root("fwdasv hw reset")
    state = load_state(path)
    entries = state.get("gpus", [])
    with nvml():
        current: dict[str, GpuInfo] = {}
        for entry in entries:
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(entry["uuid"])
            except pynvml.NVMLError_NotFound:
                raise HardwareError(
                    f"GPU {entry['uuid']} from the saved state {path} is not on this machine; "
                    "restore the remaining GPUs by hand (nvidia-smi -rgc -rmc) and delete the file"
                ) from None
            current[entry["uuid"]] = _read_gpu(handle, pynvml.nvmlDeviceGetIndex(handle), {})
        changes = plan_reset(entries, current)
        applier = _applier(dry_run, echo)
        for change in changes:
            applier.apply(change)
    if dry_run:
        echo(f"would delete {path}")
        echo("dry run: nothing was changed")
    else:
        path.unlink(missing_ok=True)
        echo(f"restored the saved GPU state and deleted {path}")
    return changes


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
    locks = [(g.clock_lock or {}).get("gpu") for g in gpus]
    labels = sorted({lock["label"] for lock in locks if lock})
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


def this_machine(
    name: str | None = None, gpus: Sequence[str] | None = None, clock_policy: str = "auto"
) -> dict[str, str]:
    """This machine's asv entry: with its GPUs when NVML sees any, else a CPU box (gpu "none")."""
    try:
        return machine_entry(read_inventory(gpus, None), name=name, clock_policy=clock_policy)
    except NoDriver:
        from asv.machine import Machine

        defaults = Machine.get_defaults()
        entry = {key: str(defaults.get(key, "")) for key in ("os", "arch", "cpu", "num_cpu", "ram")}
        entry.update(
            machine=name or _slug(platform.node().split(".")[0]) or "cpu",
            gpu="none",
            gpu_count="0",
            clock_policy="n/a",
        )
        return entry


def write_machine_file(entry: dict[str, str], path: str | os.PathLike[str] | None = None) -> Path:
    """Merge `entry` into asv's machine file (other machines kept), atomically."""
    target = Path(path if path is not None else DEFAULT_MACHINE_FILE).expanduser()
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
    machines[entry["machine"]] = dict(entry)
    machines["version"] = MACHINE_FILE_VERSION
    write_atomic(target, json.dumps(machines, indent=4, sort_keys=True) + "\n")
    return target


def machine(
    gpus: Sequence[str] | None = None,
    name: str | None = None,
    machine_file: str | os.PathLike[str] | None = None,
    clock_policy: str = "auto",
    state_file: str | os.PathLike[str] | None = None,
) -> tuple[dict[str, str], Path]:
    """Write this machine's entry (for the selected GPUs) into asv's machine file."""
    inventory = read_inventory(gpus, state_file)
    entry = machine_entry(inventory, name, clock_policy)
    return entry, write_machine_file(entry, machine_file)
