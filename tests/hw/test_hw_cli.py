"""`fwdasv hw` (fwdasv.hw.cli) over a fake libnvidia-ml (tests/fake_nvml.py): check, setup and
reset, machine, and every option's help.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import click
import pynvml
import pytest
from fake_nvml import MIB, FakeNvml
from helpers import one_error_line
from hw_helpers import invoke

from fwdasv.hw import machine as hw_machine

# --------------------------------------------------------------------------- CLI


def test_cli_check_json_and_exit_status(fake: FakeNvml):
    result = invoke("check", "--format", "json", "--clock-policy", "default")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and len(report["inventory"]["gpus"]) == 2

    fake.gpus[1].processes = [(4_000_000, 10 * MIB)]
    assert invoke("check", "--format", "json").exit_code == 4  # hardware not ready
    assert invoke("check", "--gpus", "0").exit_code == 0
    assert invoke("check", "--gpus", "1", "--allow-pid", "4000000").exit_code == 0
    table = invoke("check", "--gpus", "1")
    assert table.exit_code == 4
    assert "no-other-processes    1  FAIL" in table.stdout
    assert "pre-flight FAILED: 1 required check(s) failed" in table.stdout
    assert one_error_line(table.stderr, ignoring=()) == (
        "Error: pre-flight failed: no-other-processes on GPU 1 (details above)"
    )


def test_cli_bad_gpu_is_one_line(fake: FakeNvml):
    result = invoke("check", "--gpus", "7")
    assert result.exit_code == 2
    assert "GPU index 7 does not exist" in one_error_line(result.stderr, ignoring=())


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
    assert again.exit_code == 2 and "nothing to reset" in one_error_line(again.stderr, ignoring=())


def test_cli_reset_refuses_a_fifo_state_file_at_once(fake: FakeNvml, as_root, tmp_path: Path):
    """A FIFO with no writer at --state-file held reset (read_text waits) until killed."""
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    before = fake.settings()
    result = invoke("reset", "--state-file", str(fifo))
    assert result.exit_code == 2, result.output
    assert one_error_line(result.stderr, ignoring=()) == (
        f"Error: the saved GPU state {fifo} is a FIFO, not a regular file; give the "
        "--state-file setup wrote"
    )
    assert fake.setter_calls == [] and fake.settings() == before and fifo.exists()


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
    line = one_error_line(refused.stderr, ignoring=())
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
    assert "drop --gpus for a CPU machine entry" in one_error_line(result.stderr, ignoring=())
    assert not (tmp_path / "m.json").exists()


def test_a_bad_clock_value_is_bad_input_before_the_driver_is_asked(
    monkeypatch: pytest.MonkeyPatch, state_file: Path
):
    """`--lock-clocks fast` on a box without a driver once said "no NVIDIA driver", exit 4:
    the value, bad anywhere, was read only after NVML answered."""
    fake = FakeNvml.h200().install(monkeypatch)
    fake.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    for option, said in (
        ("--lock-clocks", "--lock-clocks 'fast': give a frequency in MHz"),
        ("--lock-memory-clocks", "--lock-memory-clocks 'fast': give a frequency in MHz"),
    ):
        result = invoke("setup", "--dry-run", option, "fast")
        assert result.exit_code == 2, result.output
        assert said in one_error_line(result.stderr, ignoring=())
    assert fake.setter_calls == []


def test_every_option_has_help():
    from fwdasv.hw.cli import hw

    for command in hw.commands.values():
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert param.help, f"{command.name} {param.name}"
