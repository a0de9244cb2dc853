"""`fwdasv.hw.devices`: a finding's A and B re-measured on the GPU its series was measured on.

The machine entries are the ones `fwdasv hw machine` / `fwdasv shard` write (one GPU's
UUID each), as asv copies them to results/<machine>/machine.json; this host's GPUs come
from the fake libnvidia-ml (tests/fake_nvml.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from fake_nvml import H200_UUIDS, FakeNvml

from fwdasv.analysis.confirm.processes import ProcessPool, SeriesRef
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.asv.suitespec import torch_suite_source
from fwdasv.hw import nvml as hw_nvml
from fwdasv.hw.devices import VISIBLE_DEVICES, choose_devices, machine_devices
from fwdasv.hw.shard import gpu_machines

DEFAULTS = {"machine": "box", "os": "Linux", "arch": "x86_64", "cpu": "c", "num_cpu": "16"}


def test_a_machine_of_one_gpu_pins_that_gpu_by_its_uuid():
    choice = choose_devices("box-1xh200-aaaaaa", {"gpu_uuids": H200_UUIDS[1]}, set(H200_UUIDS))
    assert choice.visible == H200_UUIDS[1]
    assert choice.env() == {VISIBLE_DEVICES: H200_UUIDS[1]}
    assert choice.reason == (
        f"A and B on machine box-1xh200-aaaaaa's GPU(s): {VISIBLE_DEVICES}={H200_UUIDS[1]}"
    )


def test_a_pipeline_machine_pins_both_its_gpus_in_its_order():
    entry = {"gpu_uuids": f"{H200_UUIDS[1]},{H200_UUIDS[0]}"}
    choice = choose_devices("box-2xh200-bbbbbb", entry, set(H200_UUIDS))
    assert choice.visible == f"{H200_UUIDS[1]},{H200_UUIDS[0]}"


def test_gpus_not_on_this_host_or_no_nvml_pin_nothing_and_say_so():
    elsewhere = choose_devices("other-1xh200-cccccc", {"gpu_uuids": "GPU-elsewhere"}, H200_UUIDS)
    assert elsewhere.visible is None and elsewhere.env() == {}
    assert "GPU-elsewhere, but they are not on this host" in str(elsewhere.reason)
    assert "both on the same" in str(elsewhere.reason)
    no_driver = choose_devices("m", {"gpu_uuids": H200_UUIDS[0]}, None)
    assert no_driver.visible is None and "no GPU is readable here" in str(no_driver.reason)


def test_a_cpu_machine_pins_nothing_and_says_nothing():
    for entry in ({"gpu": "none", "gpu_count": "0"}, {}, {"gpu_uuids": ""}):
        assert choose_devices("box-cpu-dddddd", entry, set(H200_UUIDS)) == (
            choose_devices("box-cpu-dddddd", {}, None)
        )
        choice = choose_devices("box-cpu-dddddd", entry, set(H200_UUIDS))
        assert choice.visible is None and choice.reason is None


def _results_with(tmp_path: Path, entries: list[dict[str, str]]) -> Path:
    """results/<machine>/machine.json as asv copies each machine's entry."""
    results = tmp_path / "results"
    for entry in entries:
        (results / entry["machine"]).mkdir(parents=True)
        (results / entry["machine"] / "machine.json").write_text(
            json.dumps({**entry, "version": 1})
        )
    return results


def test_each_gpus_findings_are_remeasured_on_that_gpu(fake: FakeNvml, tmp_path: Path):
    gpus = gpu_machines(hw_nvml.read_inventory(), defaults=dict(DEFAULTS))
    results = _results_with(tmp_path, [dict(g.entry) for g in gpus])
    for gpu in gpus:
        assert machine_devices(results, gpu.machine).visible == gpu.uuid
    assert machine_devices(results, "never-measured").visible is None


def test_confirm_and_bisect_processes_run_on_the_findings_machine(fake: FakeNvml, tmp_path: Path):
    """The pool confirm and bisect measure through gives every bench process of its
    machine's series that machine's GPU."""
    gpus = gpu_machines(hw_nvml.read_inventory(), defaults=dict(DEFAULTS))
    suite = torch_suite_source("Tiny", "fwdasv.targets.decoder:tiny", ("d=1*1@16",))
    project = write_torch_project(tmp_path / "asv", tmp_path, "tiny", [suite])
    _results_with(project.results_dir.parent, [dict(g.entry) for g in gpus])
    said: list[str] = []
    series = (SeriesRef("forward.Tiny", "d"),)
    pool = ProcessPool(project, series, tmp_path / "w", echo=said.append, machine=gpus[1].machine)
    config = pool.measurers["forward.Tiny"].target.config
    assert config.env[VISIBLE_DEVICES] == H200_UUIDS[1]
    assert said == [
        f"  A and B on machine {gpus[1].machine}'s GPU(s): {VISIBLE_DEVICES}={gpus[1].uuid}"
    ]
    unpinned = ProcessPool(project, series, tmp_path / "w", echo=said.append)
    assert VISIBLE_DEVICES not in unpinned.measurers["forward.Tiny"].target.config.env
