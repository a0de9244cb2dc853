"""`fwdasv.hw.checks`: pre-flight checks over a fake libnvidia-ml (tests/fake_nvml.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_nvml import MIB, FakeNvml
from hw_helpers import quiet

from fwdasv.hw import checks as hw_checks
from fwdasv.hw import nvml as hw_nvml
from fwdasv.hw import setup as hw_setup

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
