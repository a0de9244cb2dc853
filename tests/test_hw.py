"""fwdasv.hw.nvml and `fwdasv hw` against a fake libnvidia-ml (no GPU here).

The fake (tests/fake_nvml.py) replaces only the loaded C library: pynvml's own
wrappers, structs, version handling and error mapping run for real on top of it.
The no-driver tests use the real, absent, library of this machine.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pynvml
import pytest
from click.testing import CliRunner
from fake_nvml import MIB, FakeNvml

from fwdasv.cli import main
from fwdasv.hw import checks as hw_checks
from fwdasv.hw import clocks as hw_clocks
from fwdasv.hw import errors as hw_errors
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import nvml as hw_nvml
from fwdasv.hw import setup as hw_setup
from fwdasv.hw import statefile as hw_statefile

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


needs_no_driver = pytest.mark.skipif(_driver_present(), reason="this machine has an NVIDIA driver")


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / "hw-state.json"
    monkeypatch.setenv(hw_statefile.STATE_FILE_ENV, str(path))
    return path


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, state_file: Path):
    nvml = FakeNvml.h200(count=2).install(monkeypatch)
    yield nvml
    assert nvml.errors == []
    assert nvml.initialised == 0, "an nvmlInit without its nvmlShutdown"


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)


@pytest.fixture
def default_sigint():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def quiet(_: str) -> None:
    pass


def invoke(*args: str):
    return CliRunner().invoke(main, ["hw", *args])


def one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


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


# --------------------------------------------------------------------------- checks


def _checks(fake: FakeNvml, **kwargs) -> dict[tuple[str, int], hw_checks.Check]:
    inventory = hw_nvml.read_inventory()
    return {(c.name, c.gpu): c for c in hw_checks.preflight(inventory, **kwargs)}


def test_idle_gpus_pass_and_persistence_off_only_warns(fake: FakeNvml):
    checks = _checks(fake, clock_policy="default")
    assert hw_checks.checks_ok(checks.values())
    assert all(c.ok for c in checks.values() if c.name != "persistence-mode")
    assert checks[("persistence-mode", 0)].status == "warn"
    fake.gpus[0].persistence = 1
    assert _checks(fake)[("persistence-mode", 0)].ok


def test_another_compute_process_fails_and_an_allowed_pid_does_not(fake: FakeNvml):
    fake.gpus[1].processes = [(os.getpid(), 2048 * MIB), (4_000_000, 70_000 * MIB)]
    failed = _checks(fake)[("no-other-processes", 1)]
    assert (failed.ok, failed.required) == (False, True)
    assert "pid 4000000" in failed.detail and "70000 MiB" in failed.detail
    assert _checks(fake)[("no-other-processes", 0)].ok

    fake.gpus[1].processes = [(os.getpid(), 2048 * MIB)]
    assert not _checks(fake)[("no-other-processes", 1)].ok
    allowed = _checks(fake, allow_pids=[os.getpid()])[("no-other-processes", 1)]
    assert allowed.ok and "1 allowed" in allowed.detail


@pytest.mark.parametrize(
    ("mask", "named"),
    [
        (0x20 | 0x40, "sw_thermal_slowdown, hw_thermal_slowdown"),
        (0x4, "sw_power_cap"),
        (0x8, "hw_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
    ],
)
def test_throttling_fails(fake: FakeNvml, mask: int, named: str):
    fake.gpus[0].clock_event_reasons = mask
    check = _checks(fake)[("no-throttling", 0)]
    assert (check.ok, check.required) == (False, True)
    assert check.detail == f"clocks held down by {named}"
    assert not hw_checks.checks_ok(_checks(fake).values())


def test_idle_and_sync_boost_are_not_throttling(fake: FakeNvml):
    fake.gpus[0].clock_event_reasons = 0x1 | 0x10 | 0x2
    assert _checks(fake)[("no-throttling", 0)].ok


def test_a_hot_or_busy_gpu_warns(fake: FakeNvml):
    fake.gpus[0].temperature_c = 80
    fake.gpus[0].utilization_gpu = 37
    checks = _checks(fake)
    assert checks[("temperature", 0)].status == "warn"
    assert checks[("temperature", 0)].detail == "80 C (slowdown at 87 C)"
    assert checks[("gpu-idle", 0)].status == "warn"
    assert hw_checks.checks_ok(checks.values())


def test_clock_policy_is_checked(fake: FakeNvml, as_root, state_file: Path):
    locked = _checks(fake, clock_policy="locked")[("clock-policy", 0)]
    assert (locked.ok, locked.required) == (False, True)
    assert "not locked by fwdasv" in locked.detail
    assert _checks(fake, clock_policy="default")[("clock-policy", 0)].ok
    assert _checks(fake, clock_policy="any")[("clock-policy", 0)].ok

    fake.gpus[0].app_graphics_clock_mhz = 1755
    changed = _checks(fake, clock_policy="default")[("clock-policy", 0)]
    assert not changed.ok and "differ from the defaults 1980/3201" in changed.detail
    fake.gpus[0].app_graphics_clock_mhz = 1980

    hw_setup.setup(lock_clocks="base", echo=quiet)
    assert _checks(fake, clock_policy="locked")[("clock-policy", 1)].ok
    wrong = _checks(fake, clock_policy="default")[("clock-policy", 1)]
    assert not wrong.ok and "locked at base" in wrong.detail
    assert _checks(fake, clock_policy="any")[("clock-policy", 1)].ok


def test_a_lock_recorded_in_an_earlier_boot_does_not_count(
    fake: FakeNvml, as_root, state_file: Path
):
    hw_setup.setup(lock_clocks="1500", echo=quiet)
    state = json.loads(state_file.read_text())
    state["boot_id"] = "another-boot"
    state_file.write_text(json.dumps(state))
    assert not _checks(fake, clock_policy="locked")[("clock-policy", 0)].ok


def test_snapshot_is_plain_json(fake: FakeNvml):
    snapshot = hw_checks.preflight_snapshot(["0"], clock_policy="default")
    again = json.loads(json.dumps(snapshot))
    assert again["ok"] is True
    assert again["inventory"]["gpus"][0]["name"] == "NVIDIA H200"
    assert {c["status"] for c in again["checks"]} == {"ok", "warn"}


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
    assert "no NVIDIA driver" in one_error_line(result)


def test_driver_not_loaded_is_no_driver(fake: FakeNvml):
    fake.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    result = invoke("check")
    assert result.exit_code == 4
    assert "Driver Not Loaded" in one_error_line(result)


# --------------------------------------------------------------------------- setup / reset


def test_dry_run_changes_nothing_even_as_root(fake: FakeNvml, as_root, state_file: Path):
    before = fake.settings()
    lines: list[str] = []
    hw_setup.setup(
        lock_clocks="base",
        lock_memory_clocks="max",
        persistence=True,
        dry_run=True,
        echo=lines.append,
    )
    assert fake.setter_calls == []
    assert fake.settings() == before
    assert not state_file.parent.exists()  # not even the state directory
    would = [line for line in lines if line.startswith("would call ")]
    assert len(would) == 6  # 3 changes on each of 2 GPUs
    assert any(
        "nvmlDeviceSetGpuLockedClocks(NVML_CLOCK_LIMIT_ID_TDP, NVML_CLOCK_LIMIT_ID_TDP)" in line
        for line in would
    )
    assert any("nvmlDeviceSetMemoryLockedClocks(3201, 3201)" in line for line in would)
    assert any("nvmlDeviceSetPersistenceMode(1)" in line for line in would)
    assert lines[-1] == "dry run: nothing was changed"


def test_dry_run_needs_no_root(fake: FakeNvml, as_user):
    hw_setup.setup(lock_clocks="1500", dry_run=True, echo=quiet)
    assert fake.setter_calls == []


def test_setup_then_reset_restores_the_saved_state_exactly(
    fake: FakeNvml, as_root, state_file: Path
):
    fake.gpus[1].persistence = 1  # already on: setup must leave it, reset must not turn it off
    before = fake.settings()

    state = hw_setup.setup(lock_clocks="base", persistence=True, echo=quiet)

    assert fake.gpus[0].gpu_locked_clocks == (1365, 1365)  # the fake's TDP base clock
    assert fake.gpus[1].gpu_locked_clocks == (1365, 1365)
    assert fake.gpus[0].persistence == 1
    saved = json.loads(state_file.read_text())
    assert saved == state.to_json()
    assert state_file.read_text() == json.dumps(saved, indent=2) + "\n"
    assert list(saved) == ["version", "created_at", "host", "pid", "boot_id", "gpus"]
    assert list(saved["gpus"][0]) == ["index", "uuid", "name", "before", "applied"]
    assert list(saved["gpus"][0]["applied"]) == [
        "persistence_mode",
        "gpu_locked_clocks",
        "memory_locked_clocks",
    ]
    assert list(saved["gpus"][0]["applied"]["gpu_locked_clocks"]) == ["min_mhz", "max_mhz", "label"]
    assert saved["gpus"][0]["before"]["persistence_mode"] is False
    assert saved["gpus"][0]["applied"]["gpu_locked_clocks"]["label"] == "base"
    assert saved["gpus"][1]["applied"]["persistence_mode"] is None
    assert [c[0] for c in fake.setter_calls] == [
        "nvmlDeviceSetPersistenceMode",
        "nvmlDeviceSetGpuLockedClocks",
        "nvmlDeviceSetGpuLockedClocks",
    ]
    fake.setter_calls.clear()

    hw_setup.reset(echo=quiet)

    assert fake.settings() == before
    assert not state_file.exists()
    assert sorted(c[0] for c in fake.setter_calls) == [
        "nvmlDeviceResetGpuLockedClocks",
        "nvmlDeviceResetGpuLockedClocks",
        "nvmlDeviceSetPersistenceMode",
    ]


def test_reset_restores_applications_clocks_and_memory_locks(
    fake: FakeNvml, as_root, state_file: Path
):
    gpu = fake.gpus[0]
    gpu.app_graphics_clock_mhz = 1755  # a non-default setting made before fwdasv
    before = fake.settings()
    hw_setup.setup(gpus=["0"], lock_clocks="1500", lock_memory_clocks="3201", echo=quiet)
    assert (gpu.gpu_locked_clocks, gpu.memory_locked_clocks) == ((1500, 1500), (3201, 3201))
    gpu.app_graphics_clock_mhz = 1980  # changed behind fwdasv's back while set up
    hw_setup.reset(echo=quiet)
    assert fake.settings() == before
    assert ("nvmlDeviceSetApplicationsClocks", gpu.uuid, (3201, 1755)) in fake.setter_calls


def test_reset_dry_run_keeps_the_state(fake: FakeNvml, as_root, state_file: Path):
    hw_setup.setup(lock_clocks="1500", echo=quiet)
    locked = fake.settings()
    calls = len(fake.setter_calls)
    lines: list[str] = []
    hw_setup.reset(dry_run=True, echo=lines.append)
    assert len(fake.setter_calls) == calls
    assert fake.settings() == locked
    assert state_file.exists()
    assert sum("would call" in line and "ResetGpuLockedClocks" in line for line in lines) == 2


def test_a_second_setup_is_refused_so_the_first_saved_state_survives(
    fake: FakeNvml, as_root, state_file: Path
):
    hw_setup.setup(lock_clocks="1500", echo=quiet)
    first = state_file.read_text()
    with pytest.raises(hw_errors.HardwareError, match=r"already set up.*fwdasv hw reset"):
        hw_setup.setup(lock_clocks="1200", echo=quiet)
    assert state_file.read_text() == first
    assert fake.gpus[0].gpu_locked_clocks == (1500, 1500)


def test_a_failed_change_undoes_the_ones_made(fake: FakeNvml, as_root, state_file: Path):
    before = fake.settings()
    fake.fail["nvmlDeviceSetMemoryLockedClocks"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(hw_errors.HardwareError, match=r"nvmlDeviceSetMemoryLockedClocks.*Not Supp"):
        hw_setup.setup(lock_clocks="base", lock_memory_clocks="max", persistence=True, echo=quiet)
    assert fake.settings() == before
    assert not state_file.exists()


def test_an_interrupted_setup_is_undone(
    fake: FakeNvml, as_root, state_file: Path, monkeypatch: pytest.MonkeyPatch, default_sigint
):
    before = fake.settings()
    real_apply = hw_clocks.NvmlApplier.apply
    applied: list[hw_clocks.Change] = []

    def apply_then_interrupt(self, change):
        real_apply(self, change)
        applied.append(change)
        if len(applied) == 2:  # Ctrl-C half way through setup's changes
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)

    monkeypatch.setattr(hw_clocks.NvmlApplier, "apply", apply_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        hw_setup.setup(lock_clocks="base", persistence=True, echo=quiet)
    # two of setup's four changes were made, then the undo (the same applier) ran
    assert [c.function for c in applied[:2]] == [
        "nvmlDeviceSetPersistenceMode",
        "nvmlDeviceSetGpuLockedClocks",
    ]
    assert "nvmlDeviceResetGpuLockedClocks" in [c.function for c in applied[2:]]
    assert fake.settings() == before
    assert not state_file.exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_locked_clocks_is_scoped_and_undone_on_sigint(
    fake: FakeNvml, as_root, state_file: Path, default_sigint
):
    before = fake.settings()
    with hw_setup.locked_clocks(lock_clocks="1500", echo=quiet):
        assert fake.gpus[0].gpu_locked_clocks == (1500, 1500)
    assert fake.settings() == before and not state_file.exists()

    with (
        pytest.raises(KeyboardInterrupt),
        hw_setup.locked_clocks(lock_clocks="1500", echo=quiet),
    ):
        assert state_file.exists()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert fake.settings() == before and not state_file.exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_while_pynvml_holds_its_lock_is_undone_without_deadlock(
    fake: FakeNvml, as_root, state_file: Path, default_sigint
):
    before = fake.settings()
    with (
        pytest.raises(KeyboardInterrupt),
        hw_setup.locked_clocks(lock_clocks="1500", echo=quiet),
    ):
        pynvml.libLoadLock.acquire()  # as if the signal landed inside a pynvml call
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            assert fake.gpus[0].gpu_locked_clocks == (1500, 1500)  # the undo waits
        finally:
            pynvml.libLoadLock.release()
        time.sleep(5)  # the undo runs, then the signal comes back as KeyboardInterrupt
    assert fake.settings() == before and not state_file.exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


CHILD = r"""
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import fake_nvml
from fwdasv.hw import checks as hw_checks
from fwdasv.hw import clocks as hw_clocks
from fwdasv.hw import errors as hw_errors
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import nvml as hw_nvml
from fwdasv.hw import setup as hw_setup
from fwdasv.hw import statefile as hw_statefile
fake = fake_nvml.FakeNvml.h200(1).install()
fake.dump_path = Path(sys.argv[2])
fake.dump()
os.geteuid = lambda: 0
with hw_setup.locked_clocks(lock_clocks="base", persistence=True, state_file=sys.argv[3]):
    print("locked", flush=True)
    time.sleep(60)
print("the block ended without the signal", flush=True)
"""


def test_sigterm_during_a_locked_run_still_resets(tmp_path: Path):
    dump, state = tmp_path / "fake.json", tmp_path / "hw-state.json"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(TESTS), str(dump), str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        lines = []
        while not lines or lines[-1] not in ("locked\n", ""):
            lines.append(child.stdout.readline())  # setup's progress, then "locked"
        assert lines[-1] == "locked\n", child.stderr.read()
        gpu = json.loads(dump.read_text())["gpus"][0]
        assert (gpu["persistence"], gpu["gpu_locked_clocks"]) == (1, [1365, 1365])
        assert state.exists()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == -signal.SIGTERM, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    gpu = json.loads(dump.read_text())["gpus"][0]
    assert (gpu["persistence"], gpu["gpu_locked_clocks"]) == (0, None)
    assert not state.exists()


def test_changes_without_root_are_refused_before_any_call(
    fake: FakeNvml, as_user, state_file: Path
):
    with pytest.raises(hw_errors.NotPermitted, match="needs root: run it with sudo"):
        hw_setup.setup(lock_clocks="base", echo=quiet)
    assert fake.calls == [] and not state_file.exists()
    result = invoke("setup", "--lock-clocks", "base")
    assert result.exit_code == 5
    assert "needs root" in one_error_line(result)


def test_nvml_refusing_a_setter_says_so_and_leaves_nothing(
    fake: FakeNvml, as_root, state_file: Path
):
    fake.root = False  # e.g. root in a container without the capability
    before = fake.settings()
    result = invoke("setup", "--lock-clocks", "base")
    assert result.exit_code == 5
    assert "Insufficient Permissions" in one_error_line(result)
    assert fake.settings() == before and not state_file.exists()


def test_lock_values_are_validated(fake: FakeNvml, as_root, state_file: Path):
    with pytest.raises(hw_errors.HardwareError, match=r"above .*maximum SM clock 1980 MHz"):
        hw_setup.setup(lock_clocks="2500", echo=quiet)
    with pytest.raises(hw_errors.HardwareError, match="--lock-clocks 'fast'"):
        hw_setup.setup(lock_clocks="fast", echo=quiet)
    with pytest.raises(hw_errors.HardwareError, match="nothing to set up"):
        hw_setup.setup(echo=quiet)
    assert fake.setter_calls == [] and not state_file.exists()
    hw_setup.setup(lock_clocks="default", echo=quiet)
    assert fake.gpus[0].gpu_locked_clocks == (1980, 1980)


# --------------------------------------------------------------------------- machine file


def test_machine_file_is_merged_and_read_back_by_asv(fake: FakeNvml, tmp_path: Path):
    from asv.machine import Machine, MachineCollection

    path = tmp_path / ".asv-machine.json"
    other = {"machine": "cpu-box", "os": "Linux", "arch": "x86_64", "cpu": "c", "num_cpu": "2"}
    path.write_text(json.dumps({"cpu-box": other, "version": 1}))

    entry, written = hw_machine.machine(machine_file=path)

    assert written == path
    name = entry["machine"]
    data = json.loads(path.read_text())
    assert data["cpu-box"] == other and data["version"] == 1 and data[name] == entry
    assert entry["gpu"] == "NVIDIA H200"
    assert entry["gpu_count"] == "2"
    assert entry["gpu_uuids"] == ",".join(g.uuid for g in fake.gpus)
    assert (entry["driver"], entry["cuda"], entry["clock_policy"]) == (
        "580.159.04",
        "13.0",
        "default",
    )
    assert all(isinstance(v, str) for v in entry.values())
    assert "-2xh200-" in name

    loaded = Machine.load(machine_name=name, _path=str(path))
    for key in ("gpu", "gpu_count", "gpu_uuids", "driver", "cuda", "clock_policy", "os", "ram"):
        assert getattr(loaded, key) == entry[key]
    assert MachineCollection.load("cpu-box", _path=str(path)) == other


def test_another_gpu_is_another_machine(fake: FakeNvml, tmp_path: Path):
    path = tmp_path / "machines.json"
    first, _ = hw_machine.machine(gpus=["0"], machine_file=path)
    second, _ = hw_machine.machine(gpus=["1"], machine_file=path)
    assert first["machine"] != second["machine"]
    assert first["gpu_uuids"] != second["gpu_uuids"]
    assert first["machine"] == hw_machine.machine(gpus=["0"], machine_file=path)[0]["machine"]
    fake.gpus[0].uuid = "GPU-00000000-swapped"  # the same slot, another chip
    swapped, _ = hw_machine.machine(gpus=["0"], machine_file=path)
    assert swapped["machine"] != first["machine"]
    assert set(json.loads(path.read_text())) == {
        first["machine"],
        second["machine"],
        swapped["machine"],
        "version",
    }


def test_machine_records_the_lock(fake: FakeNvml, as_root, state_file: Path, tmp_path: Path):
    hw_setup.setup(lock_clocks="base", echo=quiet)
    entry, _ = hw_machine.machine(machine_file=tmp_path / "m.json", name="box")
    assert entry["machine"] == "box" and entry["clock_policy"] == "locked-base"


def test_a_broken_machine_file_is_not_overwritten(fake: FakeNvml, tmp_path: Path):
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(hw_errors.HardwareError, match="will not overwrite it"):
        hw_machine.machine(machine_file=path)
    assert path.read_text() == "{not json"


# --------------------------------------------------------------------------- CLI


def test_cli_check_json_and_exit_status(fake: FakeNvml):
    result = invoke("check", "--format", "json", "--clock-policy", "default")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and len(report["inventory"]["gpus"]) == 2

    fake.gpus[1].processes = [(4_000_000, 10 * MIB)]
    assert invoke("check", "--format", "json").exit_code == 3
    assert invoke("check", "--gpus", "0").exit_code == 0
    assert invoke("check", "--gpus", "1", "--allow-pid", "4000000").exit_code == 0
    table = invoke("check", "--gpus", "1")
    assert table.exit_code == 3
    assert "no-other-processes    1  FAIL" in table.stdout
    assert "pre-flight FAILED: 1 required check(s) failed" in table.stdout
    assert one_error_line(table) == (
        "Error: pre-flight failed: no-other-processes on GPU 1 (details above)"
    )


def test_cli_bad_gpu_is_one_line(fake: FakeNvml):
    result = invoke("check", "--gpus", "7")
    assert result.exit_code == 1
    assert "GPU index 7 does not exist" in one_error_line(result)


def test_cli_setup_dry_run_then_setup_and_reset(fake: FakeNvml, as_root, state_file: Path):
    before = fake.settings()
    dry = invoke("setup", "--dry-run", "--lock-clocks", "base")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.count("would call") == 2 and fake.setter_calls == []
    assert not state_file.exists()

    done = invoke("setup", "--lock-clocks", "base", "--persistence", "--gpus", "1")
    assert done.exit_code == 0, done.output
    assert fake.gpus[1].gpu_locked_clocks == (1365, 1365) and fake.gpus[0].gpu_locked_clocks is None
    assert invoke("check", "--clock-policy", "locked", "--gpus", "1").exit_code == 0

    undone = invoke("reset")
    assert undone.exit_code == 0, undone.output
    assert fake.settings() == before and not state_file.exists()
    again = invoke("reset")
    assert again.exit_code == 1 and "nothing to reset" in one_error_line(again)


def test_cli_machine_prints_the_entry(fake: FakeNvml, tmp_path: Path):
    path = tmp_path / "m.json"
    result = invoke("machine", "--name", "h200-a", "--machine-file", str(path), "--gpus", "0")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)
    assert entry == json.loads(path.read_text())["h200-a"]
    assert entry["gpu_uuids"] == fake.gpus[0].uuid
    assert "asv run --machine h200-a" in result.stderr


@pytest.mark.parametrize("why", ["driver not loaded", "no GPU"])
def test_cli_machine_without_a_gpu_writes_a_cpu_entry(
    monkeypatch: pytest.MonkeyPatch, state_file: Path, tmp_path: Path, why: str
):
    from importlib import metadata

    from asv.machine import Machine

    if why == "no GPU":
        FakeNvml([]).install(monkeypatch)
    else:
        FakeNvml.h200().install(monkeypatch).init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    path = tmp_path / "m.json"
    result = invoke("machine", "--machine-file", str(path))
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)
    host = platform.node()
    digest = hw_machine.environment_digest(sys.prefix, metadata.version("torch"))
    assert entry["machine"] == f"{hw_machine._slug(host.split('.')[0])}-cpu-{digest}"
    defaults = Machine.get_defaults()
    assert {k: entry[k] for k in ("os", "arch", "cpu", "num_cpu", "ram")} == {
        k: str(defaults[k]) for k in ("os", "arch", "cpu", "num_cpu", "ram")
    }
    assert (entry["host"], entry["torch"], entry["gpu"], entry["gpu_count"]) == (
        host,
        metadata.version("torch"),
        "none",
        "0",
    )
    assert json.loads(path.read_text())[entry["machine"]] == entry
    assert result.stderr.startswith("no NVIDIA GPU found (")
    assert "a CPU machine entry" in result.stderr.splitlines()[0]
    loaded = Machine.load(machine_name=entry["machine"], _path=str(path))
    assert loaded.torch == entry["torch"] and loaded.cpu == entry["cpu"]


def test_cpu_machine_names_differ_per_environment_and_torch():
    """Two projects on one box (other virtualenvs, other torch) get other default names."""
    names = {
        hw_machine.default_cpu_machine_name("box.example.com", hw_machine.environment_digest(p, t))
        for p, t in [("/v/a", "2.13.0+cpu"), ("/v/b", "2.13.0+cpu"), ("/v/a", "2.14.1")]
    }
    assert len(names) == 3 and all(n.startswith("box-cpu-") for n in names)
    same = hw_machine.environment_digest("/v/a", "2.13.0+cpu")
    assert hw_machine.default_cpu_machine_name("box", same) in names


def test_cli_machine_refuses_an_entry_of_another_environment_unless_replace(
    monkeypatch: pytest.MonkeyPatch, state_file: Path, tmp_path: Path
):
    FakeNvml([]).install(monkeypatch)
    path = tmp_path / "m.json"
    other = {"machine": "shared", "host": platform.node(), "torch": "2.14.1", "gpu": "none"}
    path.write_text(json.dumps({"shared": other, "version": 1}))
    before = path.read_text()

    refused = invoke("machine", "--name", "shared", "--machine-file", str(path))
    assert refused.exit_code != 0
    line = one_error_line(refused)
    assert "machine 'shared'" in line and "another environment (torch 2.14.1 (this one: " in line
    assert "another --name" in line and "--replace" in line
    assert path.read_text() == before  # the other project's entry is left as it was

    replaced = invoke("machine", "--name", "shared", "--machine-file", str(path), "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(path.read_text())["shared"]["torch"] != "2.14.1"


def test_cli_machine_for_named_gpus_without_a_driver_is_still_exit_4(
    monkeypatch: pytest.MonkeyPatch, state_file: Path, tmp_path: Path
):
    FakeNvml.h200().install(monkeypatch).init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    result = invoke("machine", "--machine-file", str(tmp_path / "m.json"), "--gpus", "0")
    assert result.exit_code == 4
    assert "drop --gpus for a CPU machine entry" in one_error_line(result)
    assert not (tmp_path / "m.json").exists()


def test_every_option_has_help():
    from fwdasv.hw.cli import hw

    for command in hw.commands.values():
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert param.help, f"{command.name} {param.name}"


@needs_no_driver
def test_operator_script_runs_for_real_without_a_driver():
    script = [sys.executable, str(ROOT / "scripts" / "setup_hardware.py")]
    helped = subprocess.run([*script, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    for command in ("check", "setup", "reset", "machine"):
        assert command in helped.stdout
    checked = subprocess.run([*script, "check"], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 4
    assert checked.stdout == ""
    assert checked.stderr.startswith("Error: no NVIDIA driver")
    assert len(checked.stderr.splitlines()) == 1
