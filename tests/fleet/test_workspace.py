"""A node's copy of the project (`fwdasv.fleet.workspace`) and the tether, without Ray:
real git bundle, real asv in fwdasv's environment type, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toy_model import build_repo

from fwdasv.asv.scaffold import project_config, write_project
from fwdasv.fleet.workspace import Payload, Workspace, WorkspaceError, bundle_repository

ENTRY = {
    "machine": "box-1xh200-abc123",
    "gpu": "NVIDIA H200",
    "gpu_uuids": "GPU-0",
    "driver": "580.159.04",
    "cuda": "13.0",
    "clock_policy": "default",
}
SUITE = """from importlib.metadata import version


class Installed:
    unit = "version"

    def track_version(self):
        major, minor, patch = (int(p) for p in version("mymodel").split("."))
        return 100 * major + 10 * minor + patch
"""


def _head(tmp_path: Path, **config):
    hashes = build_repo(tmp_path / "mymodel", commits=5, slow_index=None)
    raw = {**project_config(str(tmp_path / "mymodel"), "mymodel"), **config}
    project = write_project(tmp_path / "head", raw, [])
    (project.benchmark_dir / "installed.py").write_text(SUITE)
    return project, hashes


@pytest.mark.slow
def test_a_node_measures_a_commit_from_the_bundle_and_returns_its_result_files(
    tmp_path, asv_machine_home
):
    project, hashes = _head(tmp_path)
    bundle = bundle_repository(project, tmp_path)
    node = Workspace(tmp_path / "node", ENTRY["machine"], ENTRY["gpu_uuids"])
    local = node.prepare(Payload.of(project), bundle, ENTRY)
    assert local.config_path.parent == tmp_path / "node" / "mymodel" / ENTRY["machine"]
    assert local.repo != project.repo, "its own clone, not the head's repository"
    assert any(local.env_dir.iterdir()), "its environment built by prepare, before any run"
    done = node.measure(local, hashes[4])
    assert done["status"] == 0, done["tail"]
    names = sorted(done["files"])
    assert names == sorted(
        ["benchmarks.json", f"{ENTRY['machine']}/machine.json", next(
            n for n in names if n.startswith(f"{ENTRY['machine']}/{hashes[4][:8]}-")
        )]
    )  # fmt: skip
    result = json.loads(next(t for n, t in done["files"].items() if hashes[4][:8] in n))
    assert result["commit_hash"] == hashes[4]
    assert result["results"]["installed.Installed.track_version"][0] == [11], "0.1.1 installed"
    assert not (project.results_dir).exists(), "nothing written on the head's side by the node"


def test_a_node_whose_environments_cannot_be_built_says_so_in_one_line(tmp_path, asv_machine_home):
    project, _ = _head(tmp_path, pythons=["3.99"])
    node = Workspace(tmp_path / "node", ENTRY["machine"], ENTRY["gpu_uuids"])
    with pytest.raises(WorkspaceError) as raised:
        node.prepare(Payload.of(project), bundle_repository(project, tmp_path), ENTRY)
    said = str(raised.value)
    assert said.startswith("environment build failed (status 1): ") and "\n" not in said
    assert "no environment can be built here for pythons 3.99" in said


def test_the_tether_ends_its_run_when_the_worker_that_started_it_dies(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    script = tmp_path / "worker.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"argv = [sys.executable, '-m', 'fwdasv.fleet.tether', sys.executable, '-c', {run!r}]\n"
        "subprocess.Popen(argv, start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen(
        [sys.executable, str(script)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
    deadline = time.monotonic() + 20
    while not pid_file.is_file() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the tethered run did not start"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    worker.send_signal(signal.SIGKILL)  # the worker dies as a removed node's would
    worker.wait()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and _state(child) != "Z":
        assert time.monotonic() < deadline, "the tethered run outlived its worker"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
