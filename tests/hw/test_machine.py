"""`fwdasv.hw.machine`: asv's machine file, named after the exact GPUs (or the CPU), merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_nvml import FakeNvml
from hw_helpers import quiet

from fwdasv.hw import errors as hw_errors
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import setup as hw_setup

# --------------------------------------------------------------------------- machine file


def test_machine_file_is_merged_and_read_back_by_asv(fake: FakeNvml, tmp_path: Path):
    from asv.machine import Machine, MachineCollection

    path = tmp_path / ".asv-machine.json"
    other = {"machine": "cpu-box", "os": "Linux", "arch": "x86_64", "cpu": "c", "num_cpu": "2"}
    path.write_text(json.dumps({"cpu-box": other, "version": 1}))

    recorded = hw_machine.record_machine(machine_file=path)
    entry, written = recorded.entry, recorded.path

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
    first = hw_machine.record_machine(gpus=["0"], machine_file=path).entry
    second = hw_machine.record_machine(gpus=["1"], machine_file=path).entry
    assert first["machine"] != second["machine"]
    assert first["gpu_uuids"] != second["gpu_uuids"]
    again = hw_machine.record_machine(gpus=["0"], machine_file=path).entry
    assert first["machine"] == again["machine"]
    fake.gpus[0].uuid = "GPU-00000000-swapped"  # the same slot, another chip
    swapped = hw_machine.record_machine(gpus=["0"], machine_file=path).entry
    assert swapped["machine"] != first["machine"]
    assert set(json.loads(path.read_text())) == {
        first["machine"],
        second["machine"],
        swapped["machine"],
        "version",
    }


def test_machine_records_the_lock(fake: FakeNvml, as_root, state_file: Path, tmp_path: Path):
    hw_setup.setup(lock_clocks="base", echo=quiet)
    entry = hw_machine.record_machine(machine_file=tmp_path / "m.json", name="box").entry
    assert entry["machine"] == "box" and entry["clock_policy"] == "locked-base"


def test_a_broken_machine_file_is_not_overwritten(fake: FakeNvml, tmp_path: Path):
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(hw_errors.HardwareError, match="will not overwrite it"):
        hw_machine.record_machine(machine_file=path)
    assert path.read_text() == "{not json"


def test_cpu_machine_names_differ_per_environment_and_torch():
    """Two projects on one box (other virtualenvs, other torch) get other default names."""
    names = {
        hw_machine.default_cpu_machine_name("box.example.com", hw_machine.environment_digest(p, t))
        for p, t in [("/v/a", "2.13.0+cpu"), ("/v/b", "2.13.0+cpu"), ("/v/a", "2.14.1")]
    }
    assert len(names) == 3 and all(n.startswith("box-cpu-") for n in names)
    same = hw_machine.environment_digest("/v/a", "2.13.0+cpu")
    assert hw_machine.default_cpu_machine_name("box", same) in names
