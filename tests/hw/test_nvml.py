"""`fwdasv.hw.nvml`: the inventory against a fake libnvidia-ml (no GPU here), and no driver.

The fake (tests/fake_nvml.py) replaces only the loaded C library: pynvml's own
wrappers, structs, version handling and error mapping run for real on top of it.
The no-driver tests use the real, absent, library of this machine.
"""

from __future__ import annotations

import os

import pynvml
import pytest
from fake_nvml import MIB, FakeNvml, needs_no_driver
from helpers import one_error_line
from hw_helpers import invoke

from fwdasv.hw import checks as hw_checks
from fwdasv.hw import errors as hw_errors
from fwdasv.hw import nvml as hw_nvml

# --------------------------------------------------------------------------- inventory


def test_inventory_parses_every_field_of_an_h200(fake: FakeNvml):
    fake.gpus[1].processes = [(os.getpid(), 1024 * MIB), (4_000_000, 512 * MIB)]
    fake.gpus[1].memory_used = 1536 * MIB

    inventory = hw_nvml.read_inventory()

    assert inventory.driver_version == "580.159.04"
    assert inventory.cuda_driver_version == "13.0"
    assert inventory.unreadable == {}
    first, second = inventory.gpus
    assert first == hw_nvml.GpuInfo(
        index=0,
        uuid="GPU-5d3c6a1e-8f2b-4c9d-a7e0-1b2c3d4e5f60",
        name="NVIDIA H200",
        memory_total_mib=143771,
        memory_used_mib=0,
        sm_clock_mhz=345,
        sm_clock_max_mhz=1980,
        memory_clock_mhz=3201,
        memory_clock_max_mhz=3201,
        app_graphics_clock_mhz=1980,
        app_memory_clock_mhz=3201,
        default_app_graphics_clock_mhz=1980,
        default_app_memory_clock_mhz=3201,
        clock_lock=None,
        persistence_mode=False,
        temperature_c=31,
        slowdown_temperature_c=87,
        power_draw_w=74.5,
        power_limit_w=700.0,
        default_power_limit_w=700.0,
        utilization_gpu_pct=0,
        clock_event_reasons_mask=0x1,
        clock_event_reasons=("gpu_idle",),
        processes=(),
        mig_mode=False,
        mig_mode_pending=False,
        unreadable={},
    )
    assert second.index == 1 and second.uuid.startswith("GPU-9a8b")
    assert second.memory_used_mib == 1536
    mine, other = second.processes
    assert (mine.pid, mine.used_memory_mib) == (os.getpid(), 1024)
    assert "python" in mine.name or "pytest" in mine.name  # read from /proc
    assert (other.pid, other.used_memory_mib, other.name) == (4_000_000, 512, None)
    # the current (versioned) NVML calls were the ones used
    for name in (
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetClock",
    ):
        assert name in fake.calls
    assert not [c for c in fake.calls if c.startswith(("nvmlDeviceSet", "nvmlDeviceReset"))]


def test_unsupported_fields_read_as_none_and_the_rest_still_reads(fake: FakeNvml):
    for name in (
        "nvmlDeviceGetPowerManagementDefaultLimit",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetCurrentClocksEventReasons",
    ):
        fake.fail[name] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.fail["nvmlDeviceGetComputeRunningProcesses_v3"] = pynvml.NVML_ERROR_NO_PERMISSION

    gpu = hw_nvml.read_inventory(["0"]).gpus[0]

    assert gpu.default_power_limit_w is None
    assert gpu.mig_mode is None and gpu.mig_mode_pending is None
    assert gpu.slowdown_temperature_c is None
    assert gpu.clock_event_reasons is None and gpu.clock_event_reasons_mask is None
    assert gpu.processes is None
    assert gpu.unreadable == {
        "default_power_limit": "Not Supported",
        "mig_mode": "Not Supported",
        "slowdown_temperature": "Not Supported",
        "clock_event_reasons": "Not Supported",
        "processes": "Insufficient Permissions",
    }
    assert gpu.power_limit_w == 700.0 and gpu.temperature_c == 31 and gpu.name == "NVIDIA H200"
    checks = {c.name: c for c in hw_checks.preflight(hw_nvml.read_inventory(["0"]))}
    # what cannot be verified warns; it neither passes silently nor crashes
    assert checks["no-throttling"].status == "warn"
    assert checks["no-other-processes"].status == "warn"
    assert "cannot verify" in checks["no-other-processes"].detail


def test_an_older_driver_is_read_through_the_older_calls(fake: FakeNvml):
    fake.remove(
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetClock",
    )
    fake.cuda_driver_version = 12080
    fake.gpus[0].clock_event_reasons = 0x4
    fake.gpus[0].processes = [(os.getpid(), 100 * MIB)]

    inventory = hw_nvml.read_inventory(["0"])
    gpu = inventory.gpus[0]

    assert inventory.cuda_driver_version == "12.8"
    assert gpu.clock_event_reasons == ("sw_power_cap",)
    assert gpu.temperature_c == 31
    assert gpu.memory_total_mib == 143771
    assert gpu.memory_used_mib == 553  # v1 counts the reserved memory as used
    assert gpu.processes[0].pid == os.getpid()
    assert (gpu.app_graphics_clock_mhz, gpu.default_app_memory_clock_mhz) == (1980, 3201)
    assert gpu.unreadable == {}
    for name in (
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetApplicationsClock",
        "nvmlDeviceGetDefaultApplicationsClock",
    ):
        assert name in fake.calls


def test_a_struct_version_the_driver_rejects_falls_back_to_the_older_call(fake: FakeNvml):
    fake.fail["nvmlDeviceGetTemperatureV"] = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    fake.fail["nvmlDeviceGetMemoryInfo_v2"] = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    gpu = hw_nvml.read_inventory(["0"]).gpus[0]
    assert (gpu.temperature_c, gpu.memory_total_mib) == (31, 143771)
    assert gpu.unreadable == {}
    assert "nvmlDeviceGetTemperature" in fake.calls and "nvmlDeviceGetMemoryInfo" in fake.calls


def test_clock_event_reasons_are_decoded_into_names():
    assert hw_nvml.decode_clock_event_reasons(0) == ()
    assert hw_nvml.decode_clock_event_reasons(0x1 | 0x4 | 0x40 | 0x80) == (
        "gpu_idle",
        "sw_power_cap",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    )
    assert hw_nvml.decode_clock_event_reasons(0x8 | 0x20 | 0x2000) == (
        "hw_slowdown",
        "sw_thermal_slowdown",
        "unknown_0x2000",
    )


def test_gpus_are_selected_by_index_or_uuid(fake: FakeNvml):
    by_uuid = hw_nvml.read_inventory([fake.gpus[1].uuid, "1"]).gpus
    assert [g.index for g in by_uuid] == [1]
    with pytest.raises(hw_errors.HardwareError, match=r"GPU index 5 does not exist.*2 GPU"):
        hw_nvml.read_inventory(["5"])
    with pytest.raises(hw_errors.HardwareError, match="no GPU with UUID GPU-nope"):
        hw_nvml.read_inventory(["GPU-nope"])
    with pytest.raises(hw_errors.HardwareError, match="neither an NVML index"):
        hw_nvml.parse_gpu_selection("0,cuda:1")


# --------------------------------------------------------------------------- no driver


@needs_no_driver
def test_no_driver_is_one_error_with_its_own_exit_status(monkeypatch: pytest.MonkeyPatch):
    # the real pynvml against this machine's real absence of libnvidia-ml
    monkeypatch.setattr(pynvml, "nvmlLib", None)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    with pytest.raises(hw_errors.NoDriver, match=r"libnvidia-ml\.so\.1 was not found"):
        hw_nvml.read_inventory()
    result = invoke("check", "--format", "json")
    assert result.exit_code == 4 == hw_errors.NoDriver.exit_code
    assert result.stdout == ""
    assert "no NVIDIA driver" in one_error_line(result.stderr, ignoring=())


def test_driver_not_loaded_is_no_driver(fake: FakeNvml):
    fake.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    result = invoke("check")
    assert result.exit_code == 4
    assert "Driver Not Loaded" in one_error_line(result.stderr, ignoring=())
