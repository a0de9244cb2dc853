"""`fwdasv.hw.shard`: a range's commits split over a host's GPUs, and the GPUs it refuses.

The GPUs are read through NVML from the fake libnvidia-ml (tests/fake_nvml.py, an
H200's readings): the plan is built from what `fwdasv hw machine` would record.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from fake_nvml import H200_UUIDS, FakeGpu, FakeNvml

from fwdasv.core.errors import EXIT_HARDWARE
from fwdasv.hw import nvml as hw_nvml
from fwdasv.hw.shard import GpuMachine, ShardPlan, ShardRefused, gpu_machines, plan_shards

COMMITS = tuple(f"{i:x}" * 40 for i in range(1, 8))  # 7 commits, oldest first
DEFAULTS = {"machine": "box", "os": "Linux", "arch": "x86_64", "cpu": "c", "num_cpu": "16"}


def _machines(fake: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> list[GpuMachine]:
    fake.install(monkeypatch)
    return gpu_machines(hw_nvml.read_inventory(), defaults=dict(DEFAULTS))


def test_two_h200s_measure_every_other_commit_each_as_a_machine_of_its_own(fake: FakeNvml):
    gpus = gpu_machines(hw_nvml.read_inventory(), defaults=dict(DEFAULTS))
    plan = plan_shards(gpus, COMMITS)

    first, second = plan.shards
    assert first.commits == COMMITS[0::2] and second.commits == COMMITS[1::2]
    assert (first.gpu, second.gpu) == tuple(gpus)
    assert (first.gpu.uuid, second.gpu.uuid) == H200_UUIDS
    assert (first.gpu.index, second.gpu.index) == (0, 1)
    # Each GPU is the machine `fwdasv hw machine --gpus K` names: its UUID's digest.
    assert first.machine != second.machine
    assert all(s.machine.startswith("box-1xh200-") for s in plan.shards)
    assert gpus[0].entry["gpu_uuids"] == H200_UUIDS[0] and gpus[0].entry["gpu_count"] == "1"
    assert {c: s.machine for c, s in plan.measured_by().items()} == {
        c: plan.shards[i % 2].machine for i, c in enumerate(COMMITS)
    }


def test_every_gpus_series_spans_the_range_so_a_step_anywhere_shows_on_each():
    """Interleaved: for a step at any commit, every GPU measured commits on both sides of
    it, at most N commits away; blocks would put a step at their boundary on no series."""
    gpus = [_gpu(k) for k in range(3)]
    commits = [f"{i:040x}" for i in range(1, 13)]
    plan = plan_shards(gpus, commits)
    position = {c: i for i, c in enumerate(commits)}
    for step in range(len(gpus), len(commits) - len(gpus) + 1):  # first commit at the new level
        for shard in plan.shards:
            before = max(position[c] for c in shard.commits if position[c] < step)
            after = min(position[c] for c in shard.commits if position[c] >= step)
            assert step - before <= len(gpus) and after - step < len(gpus), (step, shard)
    blocks = [commits[0:4], commits[4:8], commits[8:12]]
    step = 4  # at a block boundary: the first block never sees the new level
    assert all(position[c] < step for c in blocks[0])
    assert all(position[c] >= step for c in blocks[1])


def test_the_plan_is_json_both_ways_with_which_gpu_measured_which_commit(fake: FakeNvml):
    plan = plan_shards(gpu_machines(hw_nvml.read_inventory(), defaults=dict(DEFAULTS)), COMMITS)
    data = json.loads(json.dumps(plan.to_json()))
    assert ShardPlan.from_json(data) == plan
    assert [row["commit"] for row in data["measured_by"]] == list(COMMITS)
    assert [row["gpu_uuid"] for row in data["measured_by"]] == [
        H200_UUIDS[i % 2] for i in range(len(COMMITS))
    ]
    # Each shard names what its GPU is, as the machine file has it.
    for shard, gpu in zip(data["shards"], plan.shards, strict=True):
        assert shard["machine_entry"] == dict(gpu.gpu.entry)
        assert shard["machine_entry"]["gpu_uuids"] == shard["gpu_uuid"]
        assert "H200" in shard["machine_entry"]["gpu"]
    # A plan of the first format (no machine entries) is refused by its version.
    with pytest.raises(ValueError, match="shard plan version 1, not 2"):
        ShardPlan.from_json({**data, "version": 1})
    assert data["shards"][1]["commits"] == list(COMMITS[1::2])
    with pytest.raises(ValueError, match="version"):
        ShardPlan.from_json({**data, "version": 99})


def test_gpus_of_another_model_are_refused_in_one_line(monkeypatch, state_file):
    fake = FakeNvml([FakeGpu(H200_UUIDS[0]), FakeGpu(H200_UUIDS[1], name="NVIDIA H100 80GB HBM3")])
    gpus = _machines(fake, monkeypatch)
    with pytest.raises(ShardRefused) as refused:
        plan_shards(gpus, COMMITS)
    text = str(refused.value)
    assert "\n" not in text and refused.value.exit_code == EXIT_HARDWARE
    assert "GPU 0 (NVIDIA H200" in text and "GPU 1 (NVIDIA H100 80GB HBM3" in text
    assert "differ in model (NVIDIA H200 vs NVIDIA H100 80GB HBM3)" in text
    assert "could not be compared" in text
    # The GPUs of one model among them still shard.
    assert plan_shards(gpus[:1], COMMITS).shards[0].commits == COMMITS


def test_gpus_under_another_driver_are_refused(monkeypatch, state_file):
    """One host has one driver; the plan compares what each GPU's machine entry records, so
    entries read under two drivers (a host upgraded between two readings) do not mix."""
    old = _machines(FakeNvml([FakeGpu(H200_UUIDS[0])], driver_version="570.86.15"), monkeypatch)
    new = _machines(FakeNvml([FakeGpu(H200_UUIDS[1])]), monkeypatch)
    gpus = [old[0], dataclasses.replace(new[0], index=1)]
    with pytest.raises(ShardRefused, match=r"differ in driver \(570\.86\.15 vs 580\.159\.04\)"):
        plan_shards(gpus, COMMITS)


def test_a_gpu_with_locked_clocks_beside_one_without_is_refused():
    locked = _gpu(1, clock_policy="locked-base")
    with pytest.raises(ShardRefused, match=r"differ in clock policy \(default vs locked-base\)"):
        plan_shards([_gpu(0), locked], COMMITS)


@pytest.mark.parametrize(
    ("commits", "gpus", "said"),
    [
        ((), 2, "the range holds no commit"),
        ((COMMITS[0], COMMITS[0]), 2, "names a commit twice"),
        (COMMITS, 0, "no GPU to shard over"),
    ],
)
def test_an_empty_range_or_no_gpu_is_refused(commits, gpus, said):
    with pytest.raises(ShardRefused, match=said):
        plan_shards([_gpu(k) for k in range(gpus)], commits)


def test_more_gpus_than_commits_leaves_the_last_ones_idle():
    plan = plan_shards([_gpu(k) for k in range(3)], COMMITS[:2])
    assert [s.commits for s in plan.shards] == [COMMITS[:1], COMMITS[1:2], ()]
    assert "(none)" in plan.lines()[-1]


def _gpu(index: int, **entry: str) -> GpuMachine:
    """A GPU's machine entry as `gpu_machines` writes it, without NVML."""
    uuid = f"GPU-{index:08d}-0000-0000-0000-000000000000"
    base = {
        "machine": f"box-1xh200-{index:06d}",
        "gpu": "NVIDIA H200",
        "gpu_count": "1",
        "gpu_uuids": uuid,
        "driver": "580.159.04",
        "cuda": "13.0",
        "clock_policy": "default",
    }
    return GpuMachine(index, uuid, {**base, **entry})
