"""`fwdasv shard`: one asv run per GPU at once, each on its GPU, the commits interleaved.

On this CPU box the GPUs are the fake libnvidia-ml's two H200s (tests/fake_nvml.py) and
CUDA_VISIBLE_DEVICES is what it is to asv: an environment variable its benchmarks see.
The slow test runs real asv, fwdasv's environment type, over the vLLM-shaped history
(tests/vllm_shaped.py: each commit's vllm/ over a compiled base), two shards at once; the
fast ones put a stand-in for `python -m asv` at the launch boundary.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import vllm_shaped
from click.testing import CliRunner
from fake_nvml import H200_UUIDS, FakeNvml
from helpers import gone
from vllm_shaped import CSRC, write_project

from fwdasv.asv.locked_machine import MODULE as LOCKED_ASV
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.asv.shard_run import SHARD_ENVS, range_commits, run_shards
from fwdasv.cli import main
from fwdasv.hw.shard import GpuMachine, plan_shards
from fwdasv.hw.statefile import STATE_FILE_ENV

# `python -m asv run ...` as the launcher starts it: says what it got, takes `FAKE_ASV_S`
# seconds, and exits with status 1 on the GPU named by FAKE_ASV_FAIL.
FAKE_PYTHON = f"""#!{sys.executable}
import json, os, sys, time
args = sys.argv[1:]
started = time.time()
config = json.load(open(args[args.index("--config") + 1]))
hashfile = next(a for a in args if a.startswith("HASHFILE:"))[len("HASHFILE:"):]
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
failing = visible == os.environ.get("FAKE_ASV_FAIL")
print(f"pid {{os.getpid()}}", flush=True)
time.sleep(0.2 if failing else float(os.environ.get("FAKE_ASV_S", "1")))
print(json.dumps({{
    "argv": args, "visible": visible, "env_dir": config["env_dir"],
    "commits": open(hashfile).read().split(), "start": started, "end": time.time(),
}}))
sys.exit(1 if failing else 0)
"""


def _gpu(index: int) -> GpuMachine:
    entry = {
        "machine": f"box-1xh200-{index:06d}",
        "gpu": "NVIDIA H200",
        "gpu_uuids": H200_UUIDS[index],
        "driver": "580.159.04",
        "cuda": "13.0",
        "clock_policy": "default",
    }
    return GpuMachine(index, H200_UUIDS[index], entry)


@pytest.fixture
def fake_asv(tmp_path: Path) -> tuple[AsvProject, str]:
    project = write_torch_project(tmp_path / "asv", tmp_path, "tiny", [])
    python = tmp_path / "fake-python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return project, str(python)


def _said(run) -> dict:
    return json.loads(
        next(line for line in run.log.read_text().splitlines() if line.startswith("{"))
    )


COMMITS = [f"{i:040x}" for i in range(1, 6)]


def test_each_gpus_run_starts_at_once_on_its_gpu_with_its_commits(fake_asv, monkeypatch):
    project, python = fake_asv
    monkeypatch.setenv("FAKE_ASV_S", "1")
    plan = plan_shards([_gpu(0), _gpu(1)], COMMITS)
    lines: list[str] = []
    outcome = run_shards(project, plan, "a..b", python=python, echo=lines.append)

    assert [r.status for r in outcome.runs] == [0, 0] and outcome.first_failure() is None
    first, second = (_said(r) for r in outcome.runs)
    assert first["start"] < second["end"] and second["start"] < first["end"], "at once"
    assert outcome.seconds < 1.9, "two 1 s runs side by side, not one after the other"
    for said, shard in zip((first, second), plan.shards, strict=True):
        assert said["visible"] == shard.gpu.uuid
        assert said["commits"] == list(shard.commits)
        assert said["env_dir"] == f"{SHARD_ENVS}/{shard.machine}"
        assert said["argv"][:3] == ["-m", LOCKED_ASV, "run"]
        assert said["argv"][said["argv"].index("--machine") + 1] == shard.machine
        assert "--record-samples" in said["argv"] and "--skip-existing-successful" in said["argv"]
    assert any(line.startswith("[GPU 1] {") for line in lines), "each line marked with its GPU"
    assert not list(project.config_path.parent.glob(".fwdasv-shard-*.json")), "copies removed"
    record = json.loads(outcome.record.read_text())
    assert record["range"] == "a..b" and [r["status"] for r in record["runs"]] == [0, 0]
    assert [row["gpu_uuid"] for row in record["measured_by"]] == [
        H200_UUIDS[i % 2] for i in range(len(COMMITS))
    ]


def test_the_first_run_to_fail_is_named_and_the_others_run_to_their_end(fake_asv, monkeypatch):
    project, python = fake_asv
    monkeypatch.setenv("FAKE_ASV_S", "1")
    monkeypatch.setenv("FAKE_ASV_FAIL", H200_UUIDS[1])
    outcome = run_shards(project, plan_shards([_gpu(0), _gpu(1)], COMMITS), "a..b", python=python)
    failed = outcome.first_failure()
    assert failed is not None and failed.shard.gpu.index == 1 and failed.status == 1
    assert "asv exited with status 1" in failed.line() and str(failed.log) in failed.line()
    assert outcome.runs[0].status == 0, "GPU 0's run was not cut short"
    assert failed.log.is_file() and outcome.runs[0].log.is_file(), "every log kept"


def test_ctrl_c_stops_every_run(fake_asv, monkeypatch):
    import os
    import signal
    import threading

    project, python = fake_asv
    monkeypatch.setenv("FAKE_ASV_S", "60")
    plan = plan_shards([_gpu(0), _gpu(1)], COMMITS)
    # Python's own Ctrl-C handler: a shell starts a background job (scripts/test.sh's
    # second pytest) with SIGINT ignored, and Python then installs none.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_shards(project, plan, "a..b", python=python, echo=None)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 20, "the 60 s runs were killed"
    assert not list(project.config_path.parent.glob(".fwdasv-shard-*.json"))


class _Handed(Exception):
    """What the handler SIGTERM had before the runs raises: the signal was handed on."""


def test_sigterm_stops_every_run_before_the_signal_acts_as_before(fake_asv, monkeypatch):
    """`timeout` or a scheduler ending a sharded run (under locked clocks, hw setup's undo
    guard handles SIGTERM and then ends the process): each GPU's asv run is a session of
    its own, out of reach of the signal to the caller's group. They are ended first, then
    the handler the signal had runs (here the test's: it notes what was still running)."""
    import os
    import signal
    import threading

    from fwdasv.asv.shard_run import SHARDS_DIR
    from fwdasv.process_tree import ENDING_SIGNALS

    project, python = fake_asv
    monkeypatch.setenv("FAKE_ASV_S", "60")
    plan = plan_shards([_gpu(0), _gpu(1)], COMMITS)
    folder = project.config_path.parent / SHARDS_DIR

    def pids() -> list[int]:
        lines = (line for log in folder.glob("*/*.log") for line in log.read_text().splitlines())
        return [int(line.split()[1]) for line in lines if line.startswith("pid ")]

    running_when_handed: list[int] = []

    def handed(signum, frame):
        running_when_handed.extend(pid for pid in pids() if not gone(pid))
        raise _Handed(signum)

    def signal_once_both_run() -> None:  # however long a loaded box takes to start them
        deadline = time.monotonic() + 60
        while len(pids()) < 2 and time.monotonic() < deadline and not done.is_set():
            time.sleep(0.1)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    previous = {signum: signal.signal(signum, handed) for signum in ENDING_SIGNALS}
    done = threading.Event()
    sender = threading.Thread(target=signal_once_both_run)
    sender.start()
    try:
        with pytest.raises(_Handed):
            run_shards(project, plan, "a..b", python=python, echo=None)
        assert all(signal.getsignal(s) is handed for s in ENDING_SIGNALS), "handlers put back"
    finally:
        done.set()
        sender.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert len(pids()) == 2, "both runs had started before the signal"
    assert running_when_handed == [], "the runs outlived the signal's first handler"


def test_a_range_is_taken_as_asv_takes_it_or_refused_in_one_line(tmp_path):
    history = vllm_shaped.build(tmp_path)
    project = AsvProject.load(write_project(tmp_path, history))
    assert range_commits(project, f"{history.commits[0]}..{history.commits[3]}") == list(
        history.commits[1:4]
    )
    hashfile = tmp_path / "hashes.txt"
    hashfile.write_text(f"{history.commits[5][:10]}\n\n{history.commits[2]}\n")
    assert range_commits(project, f"HASHFILE:{hashfile}") == [
        history.commits[5],
        history.commits[2],
    ]
    for bad in ("ALL", "main", "..x", "a...b"):
        with pytest.raises(AsvError, match=r"give A\.\.B"):
            range_commits(project, bad)
    # A FIFO with no writer held the run until killed (read_text waits).
    fifo = tmp_path / "hashes.fifo"
    os.mkfifo(fifo)
    with pytest.raises(AsvError, match=r"it is a FIFO, not a regular file; give a file of one"):
        range_commits(project, f"HASHFILE:{fifo}")


@pytest.mark.slow
def test_two_shards_measure_an_interleaved_split_of_a_real_history(
    tmp_path, offline, asv_machine_home, monkeypatch
):
    """Real asv, two runs at once, fwdasv's environment type over a compiled vLLM base:
    each GPU's machine holds exactly its commits, measured with its GPU visible."""
    monkeypatch.setenv(STATE_FILE_ENV, str(tmp_path / "hw-state.json"))
    fake = FakeNvml.h200(count=2).install(monkeypatch)
    history = vllm_shaped.build(tmp_path)
    config = write_project(tmp_path, history)
    (config.parent / "benchmarks" / "gpu_probe.py").write_text(PROBE)
    probe = tmp_path / "probe.txt"
    monkeypatch.setenv("FWDASV_TEST_PROBE", str(probe))
    span = f"{history.commits[0]}..{history.commits[6]}"  # 6 commits, the csrc one among them

    done = CliRunner().invoke(main, ["shard", "--config", str(config), span])

    assert done.exit_code == 0, done.output
    assert fake.errors == []
    record = json.loads(next((config.parent / ".fwdasv-shards").glob("*/plan.json")).read_text())
    shards = record["shards"]
    assert [s["gpu_uuid"] for s in shards] == list(H200_UUIDS)
    measured = history.commits[1:7]
    assert [s["commits"] for s in shards] == [list(measured[0::2]), list(measured[1::2])]
    csrc = history.commits[history.index(CSRC)]
    statuses = {s["machine"]: r["status"] for s, r in zip(shards, record["runs"], strict=True)}
    project = AsvProject.load(config)
    seen = [line.split() for line in probe.read_text().splitlines()]
    for shard in shards:
        machine = shard["machine"]
        info = json.loads((project.results_dir / machine / "machine.json").read_text())
        assert info["gpu_uuids"] == shard["gpu_uuid"] and info["gpu_count"] == "1"
        stored = {p.name[:8] for p in (project.results_dir / machine).glob("*-*.json")}
        assert stored == {c[:8] for c in shard["commits"]}, machine
        # The refused csrc commit fails its benchmarks in its GPU's run: asv's status 2.
        assert statuses[machine] == (2 if csrc in shard["commits"] else 0)
        probed = {commit for commit, visible in seen if visible == shard["gpu_uuid"]}
        assert probed == set(shard["commits"]) - {csrc}, "each commit seen on its own GPU"
        assert (config.parent / SHARD_ENVS / machine).is_dir()
    assert "the first run to fail" not in done.output
    assert f"{len(measured)} commit(s) over 2 GPU(s), interleaved:" in done.output


# Records, from inside the benchmark process, the commit whose vllm/ it imported (its
# tree's folder is named after it) and the CUDA_VISIBLE_DEVICES asv passed on.
PROBE = """import os
from pathlib import Path

import vllm


class Probe:
    def track_seen(self):
        tree = Path(vllm.__file__).resolve().parent.parent.name
        with open(os.environ["FWDASV_TEST_PROBE"], "a") as log:
            log.write(f"{tree} {os.environ.get('CUDA_VISIBLE_DEVICES')}\\n")
        return 1
"""


def test_plan_only_records_the_split_and_other_gpus_are_one_error_line(tmp_path, monkeypatch):
    from fake_nvml import FakeGpu

    from fwdasv.core.errors import EXIT_HARDWARE

    monkeypatch.setenv(STATE_FILE_ENV, str(tmp_path / "hw-state.json"))
    history = vllm_shaped.build(tmp_path)
    config = write_project(tmp_path, history)
    span = f"{history.commits[0]}..{history.commits[4]}"
    FakeNvml.h200(count=2).install(monkeypatch)
    done = CliRunner().invoke(main, ["shard", "--config", str(config), "--plan-only", span])
    assert done.exit_code == 0, done.output
    assert "4 commit(s) over 2 GPU(s), interleaved:" in done.output
    (record,) = (config.parent / ".fwdasv-shards").glob("*/plan.json")
    plan = json.loads(record.read_text())
    assert [s["commits"] for s in plan["shards"]] == [
        list(history.commits[1:5:2]),
        list(history.commits[2:5:2]),
    ]
    assert plan["runs"] == [] and not (config.parent / "results").exists(), "nothing measured"
    other = FakeGpu(H200_UUIDS[1], name="NVIDIA H100 80GB HBM3")
    FakeNvml([FakeGpu(H200_UUIDS[0]), other]).install(monkeypatch)
    refused = CliRunner().invoke(main, ["shard", "--config", str(config), span])
    assert refused.exit_code == EXIT_HARDWARE
    (line,) = [line for line in refused.output.splitlines() if line.strip()]
    assert line.startswith("Error: GPU 0 (NVIDIA H200") and "differ in model" in line
