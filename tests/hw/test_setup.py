"""`fwdasv.hw.setup`: setup and reset over a fake libnvidia-ml (tests/fake_nvml.py): changes
saved before they are made, undone by reset and on interruption, refused without root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest
from fake_nvml import FakeNvml
from helpers import PROGRAMS, ROOT, TESTS, gone, one_error_line
from hw_helpers import invoke, quiet

from fwdasv.hw import clocks as hw_clocks
from fwdasv.hw import errors as hw_errors
from fwdasv.hw import setup as hw_setup


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)


@pytest.fixture
def default_sigint():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


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
    if len(sys.argv) > 4:  # a bench under the locked clocks, as a nightly's asv run
        from fwdasv.launch import LaunchSpec, launch
        bench, pids = sys.argv[4], sys.argv[5]
        spec = LaunchSpec([bench, "--output-json", pids + "/out.json", "--cases", "a",
                           "--mode", "orphan", "--pid-dir", pids], timeout_s=300, kill_grace_s=1)
        launch(spec, pids + "/out.json", pids + "/bench.log")
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


def test_sigterm_while_a_bench_runs_under_locked_clocks_ends_it_then_resets(tmp_path: Path):
    """A nightly's bench runs in a session of its own under the locked clocks: SIGTERM
    ends the bench and its children first, then the undo guard resets the GPUs and the
    signal ends the run as before."""
    dump, state, pids = tmp_path / "fake.json", tmp_path / "hw-state.json", tmp_path / "pids"
    pids.mkdir()
    bench = str(PROGRAMS / "fake_bench.py")
    argv = [sys.executable, "-c", CHILD, str(TESTS), str(dump), str(state), bench, str(pids)]
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while not (pids / "sleeper.pid").exists() and child.poll() is None:
            assert time.monotonic() < deadline, "the bench did not start within 60 s"
            time.sleep(0.1)
        started = [int((pids / name).read_text()) for name in ("rank0.pid", "sleeper.pid")]
        assert json.loads(dump.read_text())["gpus"][0]["gpu_locked_clocks"] == [1365, 1365]
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == -signal.SIGTERM, child.stderr.read()
        for pid in started:
            assert gone(pid), f"{pid} outlived the run"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for name in ("rank0.pid", "sleeper.pid"):
            path = pids / name
            if path.exists() and not gone(int(path.read_text())):
                os.kill(int(path.read_text()), signal.SIGKILL)
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
    assert result.exit_code == 4  # hardware not ready: root needed
    assert "needs root" in one_error_line(result.stderr, ignoring=())


def test_nvml_refusing_a_setter_says_so_and_leaves_nothing(
    fake: FakeNvml, as_root, state_file: Path
):
    fake.root = False  # e.g. root in a container without the capability
    before = fake.settings()
    result = invoke("setup", "--lock-clocks", "base")
    assert result.exit_code == 4  # hardware not ready: root needed
    assert "Insufficient Permissions" in one_error_line(result.stderr, ignoring=())
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
