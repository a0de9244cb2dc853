"""NVML: the session and the inventory of the GPUs, every field read on its own.

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

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from fwdasv.hw.errors import HardwareError, NoDriver, NotPermitted
from fwdasv.hw.statefile import RecordedLock, recorded_locks, resolve_state_file

_MIB = 1024 * 1024

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
    clock_lock: RecordedLock | None
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


def read_gpu(handle: Any, index: int, locks: Mapping[str, RecordedLock]) -> GpuInfo:
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

    def app_clock(name: str, clock: int, default: bool) -> Any:
        """An applications clock (target or default), through nvmlDeviceGetClock or, on an
        older driver, the older getter."""
        clock_id = (
            nv.NVML_CLOCK_ID_APP_CLOCK_DEFAULT if default else nv.NVML_CLOCK_ID_APP_CLOCK_TARGET
        )
        older = (
            nv.nvmlDeviceGetDefaultApplicationsClock
            if default
            else nv.nvmlDeviceGetApplicationsClock
        )
        return read(
            name,
            lambda: nv.nvmlDeviceGetClock(handle, clock, clock_id),
            lambda: older(handle, clock),
        )

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
        app_graphics_clock_mhz=app_clock("app_graphics_clock", nv.NVML_CLOCK_GRAPHICS, False),
        app_memory_clock_mhz=app_clock("app_memory_clock", nv.NVML_CLOCK_MEM, False),
        default_app_graphics_clock_mhz=app_clock(
            "default_app_graphics_clock", nv.NVML_CLOCK_GRAPHICS, True
        ),
        default_app_memory_clock_mhz=app_clock("default_app_memory_clock", nv.NVML_CLOCK_MEM, True),
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


def read_inventory_in_session(
    selection: Sequence[str] | None, state_file: Path | None
) -> Inventory:
    read = _Reader()
    driver = read("driver_version", pynvml.nvmlSystemGetDriverVersion)
    cuda = read(
        "cuda_driver_version",
        pynvml.nvmlSystemGetCudaDriverVersion_v2,
        pynvml.nvmlSystemGetCudaDriverVersion,
    )
    locks = recorded_locks(state_file)
    gpus = tuple(read_gpu(handle, index, locks) for index, handle in _handles(selection))
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
        return read_inventory_in_session(gpus, resolve_state_file(state_file))
