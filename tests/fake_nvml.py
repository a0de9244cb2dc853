"""A fake libnvidia-ml for tests without a GPU, shaped after what an H200 reports.

pynvml loads the C library once into `pynvml.nvmlLib` (a ctypes CDLL) and finds
every function on it with getattr (`_nvmlGetFunctionPointer`). `FakeNvml.install`
puts this object there instead: its attributes are real ctypes function pointers
(CFUNCTYPE) with NVML's C signatures, which write NVML's real structs and return
NVML's return codes. So everything above the C boundary runs for real: pynvml's
wrappers, struct layouts and version fields, buffer sizes, the two-call process
listing, the fall-back to FUNCTION_NOT_FOUND for a missing symbol and the mapping
of return codes to NVMLError subclasses. `loaded` sets a GPU busy; `needs_no_driver` skips
where a real driver is installed.

The numbers come from an H200 SXM with driver 580.159.04 (CUDA 13.0): 143771 MiB,
SM clock max 1980 MHz, memory 3201 MHz, 700 W. Values marked "assumed" are
plausible stand-ins, not readings.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from ctypes import CFUNCTYPE, c_char_p, c_int, c_uint, c_ulonglong, c_void_p
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import pytest

MIB = 1024 * 1024
H200_UUIDS = (
    "GPU-5d3c6a1e-8f2b-4c9d-a7e0-1b2c3d4e5f60",
    "GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
)
SETTER_PREFIXES = ("nvmlDeviceSet", "nvmlDeviceReset")
# Clock event reason bits (nvmlClocksEventReason*): power cap and software thermal slowdown.
SW_POWER_CAP, SW_THERMAL = 0x4, 0x20


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


# The no-driver tests use the real, absent, library of this machine.
needs_no_driver = pytest.mark.skipif(_driver_present(), reason="this machine has an NVIDIA driver")


def loaded(gpu: FakeGpu, clock_mhz: int, reasons: int, power_w: float = 700.0) -> None:
    """`gpu` busy at `clock_mhz`, with clock event `reasons`, drawing `power_w`."""
    gpu.sm_clock_mhz = clock_mhz
    gpu.clock_event_reasons = reasons
    gpu.power_usage_mw = int(power_w * 1000)
    gpu.utilization_gpu = 100


class _Return(Exception):
    """Ends a fake call with an NVML return code."""

    def __init__(self, code: int):
        self.code = code


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H200"
    memory_total: int = 143771 * MIB
    memory_reserved: int = 553 * MIB  # assumed
    memory_used: int = 0
    graphics_clock_mhz: int = 345  # idle
    sm_clock_mhz: int = 345
    memory_clock_mhz: int = 3201
    max_graphics_clock_mhz: int = 1980
    max_sm_clock_mhz: int = 1980
    max_memory_clock_mhz: int = 3201
    app_graphics_clock_mhz: int = 1980
    app_memory_clock_mhz: int = 3201
    default_app_graphics_clock_mhz: int = 1980
    default_app_memory_clock_mhz: int = 3201
    tdp_base_clock_mhz: int = 1365  # assumed: what NVML_CLOCK_LIMIT_ID_TDP resolves to
    persistence: int = 0
    temperature_c: int = 31
    slowdown_temperature_c: int = 87  # assumed
    shutdown_temperature_c: int = 92  # assumed
    power_usage_mw: int = 74_500
    power_limit_mw: int = 700_000
    default_power_limit_mw: int = 700_000
    utilization_gpu: int = 0
    utilization_memory: int = 0
    clock_event_reasons: int = 0x1  # gpu_idle
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)
    mig_mode: tuple[int, int] = (0, 0)
    gpu_locked_clocks: tuple[int, int] | None = None
    memory_locked_clocks: tuple[int, int] | None = None

    def settings(self) -> dict[str, Any]:
        """What setup may change and reset must restore."""
        return {
            "persistence": self.persistence,
            "gpu_locked_clocks": self.gpu_locked_clocks,
            "memory_locked_clocks": self.memory_locked_clocks,
            "app_graphics_clock_mhz": self.app_graphics_clock_mhz,
            "app_memory_clock_mhz": self.app_memory_clock_mhz,
        }


def nvml_function(*argtypes: Any, restype: Any = c_int) -> Callable[[Any], Any]:
    """Marks a method `c_<name>` as NVML's C function `<name>` with these C types."""

    def mark(method: Any) -> Any:
        method.nvml_signature = (restype, argtypes)
        return method

    return mark


def _put(address: int, ctype: Any, value: int) -> None:
    ctype.from_address(address).value = value


def _put_text(address: int, size: int, text: str) -> None:
    data = text.encode() + b"\0"
    if len(data) > size:
        raise _Return(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
    ctypes.memmove(address, data, len(data))


class FakeNvml:
    """Stands in for the loaded libnvidia-ml.so.1; records every call it gets."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        driver_version: str = "580.159.04",
        cuda_driver_version: int = 13000,
    ):
        self.gpus = gpus
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.root = True  # NVML refuses setters with NO_PERMISSION when False
        self.init_error: int | None = None
        self.fail: dict[str, int] = {}  # function name -> return code
        self.calls: list[str] = []
        self.setter_calls: list[tuple[str, str, tuple[int, ...]]] = []
        self.errors: list[str] = []  # exceptions inside the fake: a broken test, never NVML
        self.initialised = 0
        self.dump_path: Path | None = None
        self._handles = [ctypes.create_string_buffer(8) for _ in gpus]
        self._by_address = {
            ctypes.addressof(h): g for h, g in zip(self._handles, gpus, strict=True)
        }
        self._strings: dict[int, Any] = {}
        self._keep: list[Any] = []
        for attr in dir(type(self)):
            method = getattr(self, attr)
            signature = getattr(method, "nvml_signature", None)
            if signature is not None:
                name = attr.removeprefix("c_")
                setattr(self, name, self._export(name, method, *signature))

    @classmethod
    def h200(cls, count: int = 1) -> FakeNvml:
        return cls([FakeGpu(uuid=H200_UUIDS[i]) for i in range(count)])

    # ---------------------------------------------------------------- plumbing

    def _export(self, name: str, method: Any, restype: Any, argtypes: tuple[Any, ...]) -> Any:
        def entry(*args: Any) -> Any:
            self.calls.append(name)
            if name in self.fail:
                return self.fail[name]
            try:
                result = method(*args)
            except _Return as ret:
                return ret.code
            except Exception as error:
                self.errors.append(f"{name}{args}: {error!r}")
                return pynvml.NVML_ERROR_UNKNOWN
            return pynvml.NVML_SUCCESS if result is None else result

        pointer = CFUNCTYPE(restype, *argtypes)(entry)
        self._keep.append(pointer)
        return pointer

    def remove(self, *names: str) -> None:
        """Drop symbols, as an older driver's library lacks them (FUNCTION_NOT_FOUND)."""
        for name in names:
            delattr(self, name)

    def install(self, monkeypatch: Any = None) -> FakeNvml:
        """Become pynvml's loaded library (through monkeypatch when given, else for good)."""
        for attr, value in (
            ("nvmlLib", self),
            ("_nvmlGetFunctionPointer_cache", {}),
            ("_nvmlLib_refcount", 0),
        ):
            if monkeypatch is not None:
                monkeypatch.setattr(pynvml, attr, value)
            else:
                setattr(pynvml, attr, value)
        return self

    def _gpu(self, handle: int | None) -> FakeGpu:
        gpu = self._by_address.get(handle or 0)
        if gpu is None:
            raise _Return(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    def _setter(self, name: str, handle: int | None, *args: int) -> FakeGpu:
        gpu = self._gpu(handle)
        self.setter_calls.append((name, gpu.uuid, args))
        if not self.root:
            raise _Return(pynvml.NVML_ERROR_NO_PERMISSION)
        return gpu

    def settings(self) -> dict[str, dict[str, Any]]:
        return {g.uuid: g.settings() for g in self.gpus}

    def dump(self) -> None:
        """Write the GPUs' settings and the setter calls (for a test in another process)."""
        if self.dump_path is not None:
            state = {"gpus": [asdict(g) for g in self.gpus], "setter_calls": self.setter_calls}
            self.dump_path.write_text(json.dumps(state))

    # ---------------------------------------------------------------- system

    @nvml_function(c_uint)
    def c_nvmlInitWithFlags(self, flags: int) -> int | None:
        if self.init_error is not None:
            return self.init_error
        self.initialised += 1
        return None

    @nvml_function()
    def c_nvmlShutdown(self) -> int | None:
        if self.initialised == 0:
            return pynvml.NVML_ERROR_UNINITIALIZED
        self.initialised -= 1
        return None

    @nvml_function(c_int, restype=c_void_p)
    def c_nvmlErrorString(self, code: int) -> int:
        text = self._strings.setdefault(code, ctypes.create_string_buffer(f"error {code}".encode()))
        return ctypes.addressof(text)

    @nvml_function(c_void_p, c_uint)
    def c_nvmlSystemGetDriverVersion(self, buffer: int, size: int) -> None:
        _put_text(buffer, size, self.driver_version)

    @nvml_function(c_void_p)
    def c_nvmlSystemGetCudaDriverVersion_v2(self, out: int) -> None:
        _put(out, c_int, self.cuda_driver_version)

    @nvml_function(c_void_p)
    def c_nvmlSystemGetCudaDriverVersion(self, out: int) -> None:
        _put(out, c_int, self.cuda_driver_version)

    # ---------------------------------------------------------------- devices

    @nvml_function(c_void_p)
    def c_nvmlDeviceGetCount_v2(self, out: int) -> None:
        _put(out, c_uint, len(self.gpus))

    @nvml_function(c_uint, c_void_p)
    def c_nvmlDeviceGetHandleByIndex_v2(self, index: int, out: int) -> int | None:
        if index >= len(self.gpus):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _put(out, c_void_p, ctypes.addressof(self._handles[index]))
        return None

    @nvml_function(c_char_p, c_void_p)
    def c_nvmlDeviceGetHandleByUUID(self, uuid: bytes, out: int) -> int | None:
        for index, gpu in enumerate(self.gpus):
            if gpu.uuid.encode() == uuid:
                _put(out, c_void_p, ctypes.addressof(self._handles[index]))
                return None
        return pynvml.NVML_ERROR_NOT_FOUND

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetIndex(self, handle: int, out: int) -> None:
        _put(out, c_uint, self.gpus.index(self._gpu(handle)))

    @nvml_function(c_void_p, c_void_p, c_uint)
    def c_nvmlDeviceGetName(self, handle: int, buffer: int, size: int) -> None:
        _put_text(buffer, size, self._gpu(handle).name)

    @nvml_function(c_void_p, c_void_p, c_uint)
    def c_nvmlDeviceGetUUID(self, handle: int, buffer: int, size: int) -> None:
        _put_text(buffer, size, self._gpu(handle).uuid)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetMemoryInfo(self, handle: int, out: int) -> None:
        gpu = self._gpu(handle)
        memory = pynvml.c_nvmlMemory_t.from_address(out)
        memory.total = gpu.memory_total
        memory.used = gpu.memory_used + gpu.memory_reserved  # v1 counts reserved as used
        memory.free = memory.total - memory.used

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetMemoryInfo_v2(self, handle: int, out: int) -> int | None:
        gpu = self._gpu(handle)
        memory = pynvml.c_nvmlMemory_v2_t.from_address(out)
        if memory.version != pynvml.nvmlMemory_v2:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        memory.total = gpu.memory_total
        memory.reserved = gpu.memory_reserved
        memory.used = gpu.memory_used
        memory.free = gpu.memory_total - gpu.memory_reserved - gpu.memory_used
        return None

    def _clock(self, gpu: FakeGpu, kind: int, current: bool) -> int:
        table = {
            pynvml.NVML_CLOCK_GRAPHICS: (gpu.graphics_clock_mhz, gpu.max_graphics_clock_mhz),
            pynvml.NVML_CLOCK_SM: (gpu.sm_clock_mhz, gpu.max_sm_clock_mhz),
            pynvml.NVML_CLOCK_MEM: (gpu.memory_clock_mhz, gpu.max_memory_clock_mhz),
        }
        if kind not in table:
            raise _Return(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return table[kind][0 if current else 1]

    def _app_clock(self, gpu: FakeGpu, kind: int, default: bool) -> int:
        if kind == pynvml.NVML_CLOCK_MEM:
            return gpu.default_app_memory_clock_mhz if default else gpu.app_memory_clock_mhz
        if kind in (pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM):
            return gpu.default_app_graphics_clock_mhz if default else gpu.app_graphics_clock_mhz
        raise _Return(pynvml.NVML_ERROR_NOT_SUPPORTED)

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetClockInfo(self, handle: int, kind: int, out: int) -> None:
        _put(out, c_uint, self._clock(self._gpu(handle), kind, current=True))

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetMaxClockInfo(self, handle: int, kind: int, out: int) -> None:
        _put(out, c_uint, self._clock(self._gpu(handle), kind, current=False))

    @nvml_function(c_void_p, c_uint, c_uint, c_void_p)
    def c_nvmlDeviceGetClock(self, handle: int, kind: int, clock_id: int, out: int) -> None:
        gpu = self._gpu(handle)
        if clock_id == pynvml.NVML_CLOCK_ID_CURRENT:
            value = self._clock(gpu, kind, current=True)
        elif clock_id == pynvml.NVML_CLOCK_ID_APP_CLOCK_TARGET:
            value = self._app_clock(gpu, kind, default=False)
        elif clock_id == pynvml.NVML_CLOCK_ID_APP_CLOCK_DEFAULT:
            value = self._app_clock(gpu, kind, default=True)
        elif clock_id == pynvml.NVML_CLOCK_ID_CUSTOMER_BOOST_MAX:
            value = self._clock(gpu, kind, current=False)
        else:
            raise _Return(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        _put(out, c_uint, value)

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetApplicationsClock(self, handle: int, kind: int, out: int) -> None:
        _put(out, c_uint, self._app_clock(self._gpu(handle), kind, default=False))

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetDefaultApplicationsClock(self, handle: int, kind: int, out: int) -> None:
        _put(out, c_uint, self._app_clock(self._gpu(handle), kind, default=True))

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetPersistenceMode(self, handle: int, out: int) -> None:
        _put(out, c_uint, self._gpu(handle).persistence)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetTemperatureV(self, handle: int, out: int) -> int | None:
        gpu = self._gpu(handle)
        reading = pynvml.c_nvmlTemperature_v1_t.from_address(out)
        if reading.version != pynvml.nvmlTemperature_v1:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        if reading.sensorType != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        reading.temperature = gpu.temperature_c
        return None

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetTemperature(self, handle: int, sensor: int, out: int) -> int | None:
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _put(out, c_uint, self._gpu(handle).temperature_c)
        return None

    @nvml_function(c_void_p, c_uint, c_void_p)
    def c_nvmlDeviceGetTemperatureThreshold(self, handle: int, threshold: int, out: int) -> None:
        gpu = self._gpu(handle)
        values = {
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: gpu.slowdown_temperature_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: gpu.shutdown_temperature_c,
        }
        if threshold not in values:
            raise _Return(pynvml.NVML_ERROR_NOT_SUPPORTED)
        _put(out, c_uint, values[threshold])

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetPowerUsage(self, handle: int, out: int) -> None:
        _put(out, c_uint, self._gpu(handle).power_usage_mw)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetPowerManagementLimit(self, handle: int, out: int) -> None:
        _put(out, c_uint, self._gpu(handle).power_limit_mw)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetPowerManagementDefaultLimit(self, handle: int, out: int) -> None:
        _put(out, c_uint, self._gpu(handle).default_power_limit_mw)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetUtilizationRates(self, handle: int, out: int) -> None:
        gpu = self._gpu(handle)
        rates = pynvml.c_nvmlUtilization_t.from_address(out)
        rates.gpu, rates.memory = gpu.utilization_gpu, gpu.utilization_memory

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetCurrentClocksEventReasons(self, handle: int, out: int) -> None:
        _put(out, c_ulonglong, self._gpu(handle).clock_event_reasons)

    @nvml_function(c_void_p, c_void_p)
    def c_nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int, out: int) -> None:
        _put(out, c_ulonglong, self._gpu(handle).clock_event_reasons)

    def _processes(self, handle: int, count_out: int, infos: int | None) -> int | None:
        gpu = self._gpu(handle)
        capacity = c_uint.from_address(count_out).value
        _put(count_out, c_uint, len(gpu.processes))
        if not gpu.processes:
            return None
        if len(gpu.processes) > capacity or not infos:
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        array = (pynvml.c_nvmlProcessInfo_v3_t * capacity).from_address(infos)
        for slot, (pid, used) in zip(array, gpu.processes, strict=False):
            slot.pid = pid
            slot.usedGpuMemory = used
            slot.gpuInstanceId = 0xFFFFFFFF  # not a MIG instance
            slot.computeInstanceId = 0xFFFFFFFF
        return None

    @nvml_function(c_void_p, c_void_p, c_void_p)
    def c_nvmlDeviceGetComputeRunningProcesses_v3(
        self, handle: int, count_out: int, infos: int | None
    ) -> int | None:
        return self._processes(handle, count_out, infos)

    @nvml_function(c_void_p, c_void_p, c_void_p)
    def c_nvmlDeviceGetComputeRunningProcesses_v2(
        self, handle: int, count_out: int, infos: int | None
    ) -> int | None:
        return self._processes(handle, count_out, infos)

    @nvml_function(c_void_p, c_void_p, c_void_p)
    def c_nvmlDeviceGetMigMode(self, handle: int, current: int, pending: int) -> None:
        gpu = self._gpu(handle)
        _put(current, c_uint, gpu.mig_mode[0])
        _put(pending, c_uint, gpu.mig_mode[1])

    # ---------------------------------------------------------------- setters

    @nvml_function(c_void_p, c_uint)
    def c_nvmlDeviceSetPersistenceMode(self, handle: int, mode: int) -> None:
        gpu = self._setter("nvmlDeviceSetPersistenceMode", handle, mode)
        gpu.persistence = mode
        self.dump()

    @nvml_function(c_void_p, c_uint, c_uint)
    def c_nvmlDeviceSetGpuLockedClocks(self, handle: int, low: int, high: int) -> None:
        gpu = self._setter("nvmlDeviceSetGpuLockedClocks", handle, low, high)
        tdp = pynvml.NVML_CLOCK_LIMIT_ID_TDP
        low, high = (gpu.tdp_base_clock_mhz if v == tdp else v for v in (low, high))
        if not (0 < low <= high <= gpu.max_graphics_clock_mhz):
            raise _Return(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu.gpu_locked_clocks = (low, high)
        self.dump()

    @nvml_function(c_void_p)
    def c_nvmlDeviceResetGpuLockedClocks(self, handle: int) -> None:
        gpu = self._setter("nvmlDeviceResetGpuLockedClocks", handle)
        gpu.gpu_locked_clocks = None
        self.dump()

    @nvml_function(c_void_p, c_uint, c_uint)
    def c_nvmlDeviceSetMemoryLockedClocks(self, handle: int, low: int, high: int) -> None:
        gpu = self._setter("nvmlDeviceSetMemoryLockedClocks", handle, low, high)
        if not (0 < low <= high <= gpu.max_memory_clock_mhz):
            raise _Return(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu.memory_locked_clocks = (low, high)
        self.dump()

    @nvml_function(c_void_p)
    def c_nvmlDeviceResetMemoryLockedClocks(self, handle: int) -> None:
        gpu = self._setter("nvmlDeviceResetMemoryLockedClocks", handle)
        gpu.memory_locked_clocks = None
        self.dump()

    @nvml_function(c_void_p, c_uint, c_uint)
    def c_nvmlDeviceSetApplicationsClocks(self, handle: int, memory: int, graphics: int) -> None:
        gpu = self._setter("nvmlDeviceSetApplicationsClocks", handle, memory, graphics)
        gpu.app_memory_clock_mhz, gpu.app_graphics_clock_mhz = memory, graphics
        self.dump()

    @nvml_function(c_void_p)
    def c_nvmlDeviceResetApplicationsClocks(self, handle: int) -> None:
        gpu = self._setter("nvmlDeviceResetApplicationsClocks", handle)
        gpu.app_memory_clock_mhz = gpu.default_app_memory_clock_mhz
        gpu.app_graphics_clock_mhz = gpu.default_app_graphics_clock_mhz
        self.dump()
