"""`fwdasv.hw.telemetry`: GPU readings and their summary, over a fake libnvidia-ml
(tests/fake_nvml.py, conftest's `readonly_nvml`): pynvml and everything above it run for
real on an H200's numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pynvml
import pytest
from fake_nvml import SW_POWER_CAP, SW_THERMAL, FakeNvml, loaded

from fwdasv.core import results
from fwdasv.hw import telemetry

# --- readings and summaries -------------------------------------------------------------


def test_a_reading_holds_clocks_power_and_reasons_of_the_gpu(readonly_nvml: FakeNvml):
    loaded(readonly_nvml.gpus[1], 1605, SW_POWER_CAP, power_w=699.5)
    gpu = telemetry.GpuTelemetry.open(uuid=readonly_nvml.gpus[1].uuid)
    try:
        reading = gpu.read(clock=lambda: 12.5)
        assert gpu.describe() == results.GpuIdentity(1, readonly_nvml.gpus[1].uuid, "NVIDIA H200")
    finally:
        gpu.close()
    assert reading == telemetry.Reading(
        t_s=12.5,
        sm_clock_mhz=1605,
        memory_clock_mhz=3201,
        power_w=699.5,
        temperature_c=31,
        utilization_pct=100,
        clock_event_reasons=SW_POWER_CAP,
    )
    assert reading.power_capped is True and reading.thermal_capped is False and reading.busy
    record = reading.record(origin_s=10.0)
    assert record.clock_event_reasons == ("sw_power_cap",) and record.t_s == 2.5
    assert record.to_json()["clock_event_reasons"] == ["sw_power_cap"]


def test_a_field_the_gpu_cannot_report_is_none_and_the_rest_still_reads(readonly_nvml: FakeNvml):
    readonly_nvml.fail["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    readonly_nvml.remove("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV")
    loaded(readonly_nvml.gpus[0], 1980, SW_THERMAL)
    gpu = telemetry.GpuTelemetry.open(index=0)
    try:
        reading = gpu.read()
    finally:
        gpu.close()
    assert reading.power_w is None
    # An older driver: the older calls answer.
    assert reading.clock_event_reasons == SW_THERMAL and reading.temperature_c == 31
    assert reading.sm_clock_mhz == 1980
    assert "power" in gpu.unreadable


def test_no_gpu_of_that_uuid_is_unavailable_not_a_crash(readonly_nvml: FakeNvml):
    with pytest.raises(telemetry.TelemetryUnavailable, match="GPU-nope"):
        telemetry.GpuTelemetry.open(uuid="GPU-nope")


def test_cuda_visible_devices_maps_the_process_gpu_to_nvml(readonly_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    gpu = telemetry.open_for_device(None, 0)
    assert gpu.index == 1
    gpu.close()
    # torch's UUID (without the GPU- prefix) names it exactly.
    gpu = telemetry.open_for_device(readonly_nvml.gpus[0].uuid.removeprefix("GPU-"), 5)
    assert gpu.index == 0
    gpu.close()


def test_summary_gives_clock_range_and_the_share_of_capped_readings():
    def reading(clock: int, reasons: int | None) -> telemetry.Reading:
        return telemetry.Reading(0.0, clock, 3201, 650.0, 60, 100, reasons)

    readings = [
        reading(1980, 0),
        reading(1605, SW_POWER_CAP),
        reading(1755, SW_POWER_CAP),
        reading(1800, SW_THERMAL),
        reading(1900, None),
    ]
    summary = telemetry.summarize(readings)
    assert summary.readings == 5
    assert (summary.sm_clock_min_mhz, summary.sm_clock_median_mhz) == (1605, 1800)
    assert summary.sm_clock_max_mhz == 1980
    # Of the 4 readings whose reasons were read.
    assert summary.power_capped_pct == 50.0
    assert summary.thermal_capped_pct == 25.0
    assert summary.reasons_pct == (("sw_power_cap", 50.0), ("sw_thermal_slowdown", 25.0))
    assert summary.to_json()["summary"]["reasons_pct"] == {
        "sw_power_cap": 50.0,
        "sw_thermal_slowdown": 25.0,
    }


def test_a_cpu_run_records_no_telemetry(tmp_path, clean_env):
    out = tmp_path / "out.json"
    args = ["--device", "cpu", "--case", "p=4", "--iters", "2", "--samples", "2"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwdasv.engine",
            *args,
            "--warmup-s",
            "0",
            "--output-json",
            str(out),
        ],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (case,) = results.load(out)
    assert "telemetry" not in json.loads(out.read_text())[0]["ranks"][0]
    assert case.ranks[0].telemetry is None and case.telemetry is None
    assert case.ranks[0].telemetry_unavailable is None
    assert case.ranks[0].protocol.name == "steady"
