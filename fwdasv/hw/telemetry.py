"""GPU telemetry while a forward is timed: clocks, power, temperature, clock event reasons.

On a shared H200 the heavy cases run at the 700 W cap and the SM clock moves between
1605 and 1980 MHz from block to block; latency follows it (-0.88 correlation on
decode_bs32_8k), so each case records the GPU's state while it ran. fwdasv's engine calls
`GpuTelemetry.read()` at every sample-block boundary, outside the timed replays;
`Sampler`, a thread reading every GPU every `interval_s` (~0.1 s), serves vLLM's bench,
which has no block hooks: its readings are split per case at the case's `[forward]
NAME:` line, and only a busy GPU's readings are summarized. Nothing here sets anything.
Each field is read on its own (as `fwdasv.hw.nvml` does): one the GPU cannot report is
None and named in `unreadable`, and a machine without NVML gives `None` telemetry with
the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

from fwdasv.core.results import GpuIdentity, Telemetry, TelemetryReading
from fwdasv.hw.nvml import CLOCK_EVENT_REASONS, _Reader, decode_clock_event_reasons

_BIT = {name: bit for bit, name in CLOCK_EVENT_REASONS.items()}
# NVML's reasons that mean the clocks were cut for power, or for heat.
# hw_slowdown (0x8) is either (temperature, or an external power brake): it counts as both.
POWER_CAP_MASK = _BIT["sw_power_cap"] | _BIT["hw_power_brake_slowdown"] | _BIT["hw_slowdown"]
THERMAL_CAP_MASK = _BIT["sw_thermal_slowdown"] | _BIT["hw_thermal_slowdown"] | _BIT["hw_slowdown"]
IDLE_MASK = _BIT["gpu_idle"]

DEFAULT_INTERVAL_S = 0.1


@dataclass(frozen=True)
class Reading:
    """One reading of one GPU; None where NVML could not say."""

    t_s: float  # time.monotonic()
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    utilization_pct: int | None
    clock_event_reasons: int | None  # NVML's mask

    def has_reason(self, mask: int) -> bool | None:
        """Whether NVML's clock event reasons include one of `mask`'s (None: not read)."""
        return None if self.clock_event_reasons is None else bool(self.clock_event_reasons & mask)

    @property
    def power_capped(self) -> bool | None:
        return self.has_reason(POWER_CAP_MASK)

    @property
    def thermal_capped(self) -> bool | None:
        return self.has_reason(THERMAL_CAP_MASK)

    @property
    def busy(self) -> bool:
        """Not reported idle (a reading taken between a bench's cases or before its model load)."""
        if self.has_reason(IDLE_MASK):
            return False
        return self.utilization_pct is None or self.utilization_pct > 0

    def record(self, origin_s: float = 0.0) -> TelemetryReading:
        """As kept in a rank's telemetry: seconds since `origin_s` (to 0.1 ms), reasons by name."""
        return TelemetryReading(
            t_s=round(self.t_s - origin_s, 4),
            sm_clock_mhz=self.sm_clock_mhz,
            memory_clock_mhz=self.memory_clock_mhz,
            power_w=self.power_w,
            temperature_c=self.temperature_c,
            utilization_pct=self.utilization_pct,
            clock_event_reasons=None
            if self.clock_event_reasons is None
            else decode_clock_event_reasons(self.clock_event_reasons),
        )


class TelemetryUnavailable(Exception):
    """No NVML here (no driver, no such GPU): telemetry is None, with this reason."""


class GpuTelemetry:
    """One GPU's NVML handle, for reading only. NVML stays initialised until `close`."""

    def __init__(self, handle: Any, index: int):
        self.handle = handle
        self.index = index
        self.unreadable: dict[str, str] = {}
        read = _Reader()
        self.uuid = read("uuid", lambda: pynvml.nvmlDeviceGetUUID(handle))
        self.name = read("name", lambda: pynvml.nvmlDeviceGetName(handle))
        self._closed = False

    @classmethod
    def open(cls, uuid: str | None = None, index: int = 0) -> GpuTelemetry:
        """The GPU with NVML UUID `uuid` (the surest), else NVML index `index`."""
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError, pynvml.NVMLLibraryMismatchError) as error:
            raise TelemetryUnavailable(f"NVML cannot start here ({error})") from None
        try:
            if uuid is not None:
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
                index = pynvml.nvmlDeviceGetIndex(handle)
            else:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as error:
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlShutdown()
            raise TelemetryUnavailable(f"NVML has no GPU {uuid or index} ({error})") from None
        return cls(handle, index)

    def describe(self) -> GpuIdentity:
        return GpuIdentity(self.index, self.uuid, self.name)

    def read(self, clock: Callable[[], float] = time.monotonic) -> Reading:
        read = _Reader()
        nv, handle = pynvml, self.handle
        milliwatts = read("power", lambda: nv.nvmlDeviceGetPowerUsage(handle))
        utilization = read("utilization", lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        reading = Reading(
            t_s=clock(),
            sm_clock_mhz=read(
                "sm_clock", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)
            ),
            memory_clock_mhz=read(
                "memory_clock", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)
            ),
            power_w=None if milliwatts is None else milliwatts / 1000,
            temperature_c=read(
                "temperature",
                lambda: nv.nvmlDeviceGetTemperatureV(handle, nv.NVML_TEMPERATURE_GPU),
                lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
            ),
            utilization_pct=None if utilization is None else utilization.gpu,
            clock_event_reasons=read(
                "clock_event_reasons",
                lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle),
                lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
            ),
        )
        self.unreadable.update(read.unreadable)
        return reading

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlShutdown()


def open_for_device(uuid: str | None, visible_index: int) -> GpuTelemetry:
    """The NVML view of CUDA device `visible_index` of this process.

    `uuid` (from torch's device properties) names it exactly; without it the
    index goes through CUDA_VISIBLE_DEVICES (indices or UUIDs) to NVML's.
    """
    if uuid:
        return GpuTelemetry.open(uuid=uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        if visible_index >= len(entries):
            raise TelemetryUnavailable(
                f"CUDA device {visible_index} is not in CUDA_VISIBLE_DEVICES={visible!r}"
            )
        entry = entries[visible_index]
        if entry.isdigit():
            return GpuTelemetry.open(index=int(entry))
        return GpuTelemetry.open(uuid=entry)
    return GpuTelemetry.open(index=visible_index)


# --- summaries ------------------------------------------------------------------------


def _values(readings: Iterable[Reading], key: str) -> list[float]:
    return [float(v) for r in readings if (v := getattr(r, key)) is not None]


def _pct(flags: Sequence[bool | None]) -> float | None:
    known = [f for f in flags if f is not None]
    return 100.0 * sum(known) / len(known) if known else None


def summarize(readings: Sequence[Reading]) -> Telemetry:
    """The per-case figures of some readings (which GPU, and where they come from, unset)."""
    sm = _values(readings, "sm_clock_mhz")
    memory = _values(readings, "memory_clock_mhz")
    power = _values(readings, "power_w")
    temperature = _values(readings, "temperature_c")
    reasons: dict[str, float] = {}
    masks = [r.clock_event_reasons for r in readings if r.clock_event_reasons is not None]
    for mask in masks:
        for name in decode_clock_event_reasons(mask):
            reasons[name] = reasons.get(name, 0.0) + 100.0 / len(masks)
    return Telemetry(
        readings=len(readings),
        sm_clock_min_mhz=min(sm) if sm else None,
        sm_clock_median_mhz=statistics.median(sm) if sm else None,
        sm_clock_max_mhz=max(sm) if sm else None,
        memory_clock_min_mhz=min(memory) if memory else None,
        memory_clock_median_mhz=statistics.median(memory) if memory else None,
        power_median_w=statistics.median(power) if power else None,
        power_max_w=max(power) if power else None,
        temperature_max_c=max(temperature) if temperature else None,
        power_capped_pct=_pct([r.power_capped for r in readings]),
        thermal_capped_pct=_pct([r.thermal_capped for r in readings]),
        reasons_pct=tuple((name, round(pct, 2)) for name, pct in sorted(reasons.items())),
    )


def rank_telemetry(
    gpu: GpuTelemetry,
    readings: Sequence[Reading],
    scope: str,
    *,
    keep_readings: bool,
    source: str = "nvml",
) -> Telemetry:
    """A rank's telemetry: the summary of `readings` on `gpu`, where they come from, and
    (`keep_readings`) the readings themselves, timed from the first."""
    origin = readings[0].t_s if readings else 0.0
    return dataclasses.replace(
        summarize(readings),
        scope=scope,
        source=source,
        gpu=gpu.describe(),
        log=tuple(r.record(origin) for r in readings) if keep_readings else None,
        unreadable=tuple(gpu.unreadable.items()),
    )


# --- a sampler thread, for a bench without block hooks ----------------------------------


@dataclass
class _Window:
    label: str
    start_s: float
    end_s: float


@dataclass
class Sampler:
    """Reads `gpus` every `interval_s` on a thread between `start` and `stop`.

    `mark(label)` closes the window that ends now (a case whose result line was
    just printed) and opens the next; `windows()` gives each GPU's readings per
    window. Failures of a reading never stop the thread (a field is None).
    """

    gpus: Sequence[GpuTelemetry]
    interval_s: float = DEFAULT_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    readings: list[list[Reading]] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.readings = [[] for _ in self.gpus]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="fwdasv-telemetry", daemon=True)
        self._started_s: float | None = None

    def start(self) -> Sampler:
        self._started_s = self.clock()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        """One reading of every GPU (the thread's tick; callable directly)."""
        for gpu, readings in zip(self.gpus, self.readings, strict=True):
            reading = gpu.read(self.clock)
            with self._lock:
                readings.append(reading)

    def mark(self, label: str) -> None:
        with self._lock:
            self.marks.append((label, self.clock()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5 * self.interval_s + 1.0)

    def windows(self) -> list[_Window]:
        with self._lock:
            marks = list(self.marks)
        start = self._started_s if self._started_s is not None else -float("inf")
        out = []
        for label, at in marks:
            out.append(_Window(label, start, at))
            start = at
        return out

    def window_readings(self, gpu: int, window: _Window) -> list[Reading]:
        """Readings of GPU `gpu` inside the window, the busy ones when there are any."""
        with self._lock:
            inside = [r for r in self.readings[gpu] if window.start_s < r.t_s <= window.end_s]
        busy = [r for r in inside if r.busy]
        return busy or inside

    def close(self) -> None:
        self.stop()
        for gpu in self.gpus:
            gpu.close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
