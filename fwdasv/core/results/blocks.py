"""The blocks of a rank's dict, each a value that reads and writes its own JSON.

vLLM's comparisons (`TensorDiff`) and pipeline timeline, fwdasv's telemetry,
timing protocol and engine settings, and the profile block both write.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fwdasv.core.kernels import KernelRow, ProfileError
from fwdasv.core.results.reading import (
    ResultsError,
    integer,
    is_number,
    json_object,
    measured,
    number,
    numbers,
    optional_int,
    optional_number,
    optional_str,
    pairs,
    require,
    string,
)
from fwdasv.core.stats import STATISTICS, Latency, block_medians

T = TypeVar("T")


def _read(
    read: Callable[[Mapping[str, object], str, str], T],
    data: Mapping[str, object],
    where: str,
    *keys: str,
) -> dict[str, T]:
    """Several keys of one kind, each by the same reader: `cls(**_read(...))` keeps mypy's
    check of each field's type, as long as one call passes one such group."""
    return {key: read(data, key, where) for key in keys}


def _fields_json(block: Any, drop_none: tuple[str, ...] = ()) -> dict[str, object]:
    """A block's fields under their own names, tuples as JSON lists; the fields named in
    `drop_none` are left out where None."""
    data = dataclasses.asdict(block)
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in data.items()
        if value is not None or key not in drop_none
    }


@dataclass(frozen=True)
class TensorDiff:
    """`_compare(actual, expected)`: float32 difference of the first output tensor."""

    max_abs: float
    relative_rms: float

    @classmethod
    def from_json(cls, data: object, where: str = "comparison") -> TensorDiff:
        data = json_object(data, where)
        return cls(measured(data, "max_abs", where), measured(data, "relative_rms", where))

    @property
    def exact(self) -> bool:
        return self.max_abs == 0.0

    def to_json(self) -> dict[str, object]:
        return {"max_abs": self.max_abs, "relative_rms": self.relative_rms}


def parse_diffs(data: object, where: str) -> dict[str, TensorDiff]:
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected an object of comparisons")
    return {name: TensorDiff.from_json(value, f"{where}.{name}") for name, value in data.items()}


def diffs_json(values: Mapping[str, TensorDiff] | None) -> dict[str, object] | None:
    return None if values is None else {name: diff.to_json() for name, diff in values.items()}


def parse_latency(data: object, where: str) -> Latency:
    data = json_object(data, where)
    return Latency(
        **_read(number, data, where, *STATISTICS),
        timer=string(data, "timer", where),
        count=integer(data, "count", where),
        samples_us=numbers(data, "samples_us", where),
        layout=tuple(data),
    )


@dataclass(frozen=True)
class GpuIdentity:
    """Which GPU a rank's telemetry read (None: NVML could not say)."""

    index: int
    uuid: str | None
    name: str | None

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "uuid": self.uuid, "name": self.name}

    @classmethod
    def from_json(cls, data: object, where: str) -> GpuIdentity:
        data = json_object(data, where)
        return cls(
            integer(data, "index", where),
            optional_str(data, "uuid", where),
            optional_str(data, "name", where),
        )


@dataclass(frozen=True)
class TelemetryReading:
    """One NVML reading as recorded: seconds since the case's first reading, None where unread."""

    t_s: float
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    utilization_pct: int | None
    clock_event_reasons: tuple[str, ...] | None  # the reasons' names, decoded

    def to_json(self) -> dict[str, object]:
        return _fields_json(self)

    @classmethod
    def from_json(cls, data: object, where: str) -> TelemetryReading:
        data = json_object(data, where)
        reasons = data.get("clock_event_reasons")
        if reasons is not None and (
            not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons)
        ):
            raise ResultsError(f"{where}: 'clock_event_reasons' must be a list of names or null")
        clocks = ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "utilization_pct")
        return cls(
            t_s=number(data, "t_s", where),
            power_w=optional_number(data, "power_w", where),
            clock_event_reasons=None if reasons is None else tuple(reasons),
            **_read(optional_int, data, where, *clocks),
        )


# A rank's telemetry summary figures, in the order they are written.
TELEMETRY_NUMBERS = (
    "readings",
    "sm_clock_min_mhz",
    "sm_clock_median_mhz",
    "sm_clock_max_mhz",
    "memory_clock_min_mhz",
    "memory_clock_median_mhz",
    "power_median_w",
    "power_max_w",
    "temperature_max_c",
    "power_capped_pct",
    "thermal_capped_pct",
)
# A rank's `telemetry` where NVML could not read the GPU names only the reason.
_TELEMETRY_SOURCE = "nvml"


@dataclass(frozen=True)
class Telemetry:
    """One GPU's state while a case ran, from NVML readings (None: not readable there).

    `readings` is how many readings the summary holds: one per sample block in
    fwdasv's engine, one per sampler tick around vLLM's bench. A reading is
    power (or thermally) capped when NVML's clock event reasons said so.
    `reasons_pct` is the share of readings that named each reason; `log` the
    readings themselves, where the engine kept them; `unreadable` the fields
    NVML could not read, with why.
    """

    readings: int
    sm_clock_min_mhz: float | None = None
    sm_clock_median_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    memory_clock_min_mhz: float | None = None
    memory_clock_median_mhz: float | None = None
    power_median_w: float | None = None
    power_max_w: float | None = None
    temperature_max_c: float | None = None
    power_capped_pct: float | None = None
    thermal_capped_pct: float | None = None
    scope: str | None = None
    source: str = _TELEMETRY_SOURCE
    gpu: GpuIdentity | None = None
    reasons_pct: tuple[tuple[str, float], ...] = ()
    log: tuple[TelemetryReading, ...] | None = None
    unreadable: tuple[tuple[str, str], ...] = ()

    def worst(self, other: Telemetry) -> Telemetry:
        """The slower GPU's view of two ranks: lowest clocks, highest power and capping.

        A summary over GPUs: which GPU, its readings and reasons are not kept.
        """

        def pick(
            a: float | None, b: float | None, better: Callable[[list[float]], float]
        ) -> float | None:
            values = [v for v in (a, b) if v is not None]
            return better(values) if values else None

        return Telemetry(
            readings=self.readings + other.readings,
            sm_clock_min_mhz=pick(self.sm_clock_min_mhz, other.sm_clock_min_mhz, min),
            sm_clock_median_mhz=pick(self.sm_clock_median_mhz, other.sm_clock_median_mhz, min),
            sm_clock_max_mhz=pick(self.sm_clock_max_mhz, other.sm_clock_max_mhz, min),
            memory_clock_min_mhz=pick(self.memory_clock_min_mhz, other.memory_clock_min_mhz, min),
            memory_clock_median_mhz=pick(
                self.memory_clock_median_mhz, other.memory_clock_median_mhz, min
            ),
            power_median_w=pick(self.power_median_w, other.power_median_w, max),
            power_max_w=pick(self.power_max_w, other.power_max_w, max),
            temperature_max_c=pick(self.temperature_max_c, other.temperature_max_c, max),
            power_capped_pct=pick(self.power_capped_pct, other.power_capped_pct, max),
            thermal_capped_pct=pick(self.thermal_capped_pct, other.thermal_capped_pct, max),
            scope=self.scope or other.scope,
        )

    def line(self) -> str:
        """`SM 1605-1980 MHz (median 1755), 100% of blocks power-capped`, or what is known."""
        parts = []
        if self.sm_clock_min_mhz is not None and self.sm_clock_max_mhz is not None:
            parts.append(
                f"SM {self.sm_clock_min_mhz:.0f}-{self.sm_clock_max_mhz:.0f} MHz "
                f"(median {self.sm_clock_median_mhz:.0f})"
            )
        if self.power_capped_pct:
            parts.append(f"{self.power_capped_pct:.0f}% power-capped")
        if self.thermal_capped_pct:
            parts.append(f"{self.thermal_capped_pct:.0f}% thermally capped")
        return ", ".join(parts) or "no GPU telemetry"

    def to_json(self) -> dict[str, object]:
        """A rank dict's `telemetry`: source, scope, GPU, summary, readings, unreadable fields."""
        summary: dict[str, object] = {key: getattr(self, key) for key in TELEMETRY_NUMBERS}
        summary["reasons_pct"] = dict(self.reasons_pct)
        data: dict[str, object] = {"source": self.source, "scope": self.scope}
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_json()
        data["summary"] = summary
        if self.log is not None:
            data["readings"] = [reading.to_json() for reading in self.log]
        if self.unreadable:
            data["unreadable"] = dict(self.unreadable)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str) -> Telemetry:
        """A `telemetry` block with a summary (see `_telemetry` for one without)."""
        summary = json_object(data["summary"], f"{where}.summary")
        numbers = _read(optional_number, summary, f"{where}.summary", *TELEMETRY_NUMBERS)
        readings = numbers.pop("readings")
        if readings is None:
            raise ResultsError(f"{where}.summary: missing key 'readings'")
        log = data.get("readings")
        if log is not None and not isinstance(log, list):
            raise ResultsError(f"{where}: 'readings' must be a list")
        scope, source = data.get("scope"), data.get("source")
        return cls(
            readings=int(readings),
            **numbers,
            scope=scope if isinstance(scope, str) else None,
            source=source if isinstance(source, str) else _TELEMETRY_SOURCE,
            gpu=None
            if data.get("gpu") is None
            else GpuIdentity.from_json(data["gpu"], f"{where}.gpu"),
            reasons_pct=pairs(
                summary.get("reasons_pct"), f"{where}.summary.reasons_pct", is_number
            ),
            log=None
            if log is None
            else tuple(
                TelemetryReading.from_json(r, f"{where}.readings[{i}]") for i, r in enumerate(log)
            ),
            unreadable=pairs(
                data.get("unreadable"), f"{where}.unreadable", lambda v: isinstance(v, str)
            ),
        )


def unavailable_telemetry_json(reason: str) -> dict[str, object]:
    """A rank dict's `telemetry` where no GPU could be read: why, and no summary."""
    return {"source": _TELEMETRY_SOURCE, "unavailable": reason, "summary": None}


@dataclass(frozen=True)
class ProtocolRun:
    """How the engine laid out a case's timed replays (`fwdasv.engine.protocol`) and what it did.

    `burst_s` None: bursts without a limit (every protocol but duty-cycled).
    """

    name: str
    gap_ratio: float
    burst_s: float | None
    block_s: float
    iters_per_block: int
    warmup_replays: int
    timed_busy_s: float
    timed_idle_s: float

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: object, where: str) -> ProtocolRun:
        data = json_object(data, where)
        return cls(
            name=string(data, "name", where),
            burst_s=optional_number(data, "burst_s", where),
            iters_per_block=integer(data, "iters_per_block", where),
            warmup_replays=integer(data, "warmup_replays", where),
            **_read(number, data, where, "gap_ratio", "block_s", "timed_busy_s", "timed_idle_s"),
        )


@dataclass(frozen=True)
class ReferenceRun:
    """A fixed workload timed right after each of the forward's timed replays, in the same
    process (`fwdasv.engine.yardstick`, the engine's `--reference`): replay i of `latency`
    ran right after the forward's replay i. The forward's time over it cancels the host's
    own changes of speed, which move both alike. `cpu_ratios` (written since the engine
    reads the thread's CPU time too) are the same pairs' ratios of CPU time, which a
    neighbour taking the CPU away does not lengthen; None in older files."""

    workload: str
    latency: Latency
    cpu_ratios: tuple[float, ...] | None = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"workload": self.workload, "latency_us": self.latency.to_json()}
        if self.cpu_ratios is not None:
            data["cpu_ratios"] = list(self.cpu_ratios)
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> ReferenceRun:
        data = json_object(data, where)
        ratios = numbers(data, "cpu_ratios", where) if "cpu_ratios" in data else None
        return cls(
            workload=string(data, "workload", where),
            latency=parse_latency(require(data, "latency_us", where), f"{where}.latency_us"),
            cpu_ratios=ratios,
        )

    def relative(self, forward: Latency, samples: int) -> list[float]:
        """Per block of replays (the forward's `samples` blocks): the median of the forward's
        replay time over the workload's, replay by replay (CPU time where recorded)."""
        ours, theirs = forward.samples_us, self.latency.samples_us
        if len(ours) != len(theirs) or not ours or len(ours) % samples:
            raise ResultsError(
                f"reference: {len(theirs)} workload times beside {len(ours)} replays "
                f"in {samples} samples: they must pair up, replay by replay"
            )
        if self.cpu_ratios is not None and len(self.cpu_ratios) == len(ours):
            return block_medians(list(self.cpu_ratios), samples)
        ratios = [a / b if b > 0 else math.inf for a, b in zip(ours, theirs, strict=True)]
        return block_medians(ratios, samples)


@dataclass(frozen=True)
class EngineInfo:
    """What produced a result (fwdasv's engine): target, device, settings, versions.

    `target_options` are the target factory's keyword options, JSON values as
    given on the command line; `gpu` is the CUDA device's name; the pipeline
    fields are set on a pipeline's ranks. `imported` names the modules of the code under
    test the process had imported when the case was timed (`fwdasv.engine.imports`:
    what a commit must change to reach this forward); None: not recorded.
    """

    target: str
    target_options: Mapping[str, object]
    device: str
    dtype: str
    iters: int
    samples: int
    seed: int
    warmup_s: float
    timer: str
    protocol: str
    torch: str
    python: str
    gpu: str | None = None
    pipeline_stages: int | None = None
    world_size: int | None = None
    threads: int | None = None  # torch's intra-op threads while timing
    imported: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        data = _fields_json(
            self, drop_none=("gpu", "pipeline_stages", "world_size", "threads", "imported")
        )
        data["target_options"] = dict(self.target_options)
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> EngineInfo:
        data = json_object(data, where)
        texts = ("target", "device", "dtype", "timer", "protocol", "torch", "python")
        return cls(
            **_read(string, data, where, *texts),
            target_options=json_object(require(data, "target_options", where), where),
            iters=integer(data, "iters", where),
            samples=integer(data, "samples", where),
            seed=integer(data, "seed", where),
            warmup_s=number(data, "warmup_s", where),
            gpu=optional_str(data, "gpu", where),
            pipeline_stages=optional_int(data, "pipeline_stages", where),
            world_size=optional_int(data, "world_size", where),
            threads=optional_int(data, "threads", where),
            imported=_names(data.get("imported"), f"{where}: 'imported'"),
        )


def _names(value: object, where: str) -> tuple[str, ...] | None:
    """A list of strings (module names), or None when absent."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ResultsError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class ProfileBlock:
    """A rank dict's `profile`: where the case's kernels.json is and its top rows.

    vLLM's keys, plus fwdasv's `device` and vLLM's pipeline `scope` when set;
    a profile that failed is its `error` alone (the case's timing is kept).
    """

    summary: str | None = None
    span_us: float | None = None
    busy_us: float | None = None
    activities: int | None = None
    top_kernels: tuple[KernelRow, ...] = ()
    device: str | None = None
    scope: str | None = None
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> ProfileBlock:
        return cls(error=error)

    def to_json(self) -> dict[str, object]:
        if self.error is not None:
            return {"error": self.error}
        data: dict[str, object] = {"summary": self.summary}
        if self.device is not None:
            data["device"] = self.device
        data.update(
            span_us=self.span_us,
            busy_us=self.busy_us,
            activities=self.activities,
            top_kernels=[row.to_json() for row in self.top_kernels],
        )
        if self.scope is not None:
            data["scope"] = self.scope
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> ProfileBlock:
        data = json_object(data, where)
        if "error" in data:
            return cls.failed(str(data["error"]))
        rows = require(data, "top_kernels", where)
        if not isinstance(rows, list):
            raise ResultsError(f"{where}: 'top_kernels' must be a list")
        try:
            top = tuple(
                KernelRow.from_json(r, f"{where}.top_kernels[{i}]") for i, r in enumerate(rows)
            )
        except ProfileError as error:
            raise ResultsError(str(error)) from None
        return cls(
            summary=string(data, "summary", where),
            span_us=number(data, "span_us", where),
            busy_us=number(data, "busy_us", where),
            activities=integer(data, "activities", where),
            top_kernels=top,
            device=optional_str(data, "device", where),
            scope=optional_str(data, "scope", where),
        )


@dataclass(frozen=True)
class PipelineTimeline:
    """One rank's microbatch times on rank 0's clock, in µs (vLLM's `pipeline_timeline`).

    `count + 2 * margin` entries, warmup and drain included; `clock_method` is
    fwdasv's (how this rank reads rank 0's clock), absent from vLLM's files.
    """

    stage: int
    dp_rank: int
    starts_us: tuple[float, ...]
    ends_us: tuple[float, ...]
    clock_uncertainty_us: float
    clock_method: str | None = None

    def to_json(self) -> dict[str, object]:
        return _fields_json(self, drop_none=("clock_method",))

    @classmethod
    def from_json(cls, data: object, where: str) -> PipelineTimeline:
        data = json_object(data, where)
        return cls(
            **_read(integer, data, where, "stage", "dp_rank"),
            starts_us=numbers(data, "starts_us", where),
            ends_us=numbers(data, "ends_us", where),
            clock_uncertainty_us=number(data, "clock_uncertainty_us", where),
            clock_method=optional_str(data, "clock_method", where),
        )
