"""asv's command line with its machine file locked (`fwdasv shard` starts asv so).

asv rewrites ~/.asv-machine.json (truncate, then write) whenever a run loads its machine;
CI once saw `fwdasv shard`'s second run stop at "Error parsing JSON" in that file while
the first rewrote it. Here real asv processes load their machines from one file at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fwdasv.asv.locked_machine import MODULE

# Loads its machine `count` times from one machine file, as every `asv run` does once.
LOADER = """
import sys
from asv.machine import Machine
from fwdasv.asv.locked_machine import lock_machine_loads
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock_machine_loads()
lock_machine_loads()  # twice: still one lock, not a lock taken within itself
for _ in range(count):
    assert Machine.load(machine_name=name, _path=path).machine == name
"""

NAMES = [f"gpu-{i}" for i in range(3)]


def test_runs_loading_their_machines_at_once_each_read_a_whole_file(tmp_path: Path):
    machine_file = tmp_path / "machines.json"
    entries = {name: {"machine": name, "os": "Linux"} for name in NAMES}
    machine_file.write_text(json.dumps({"version": 1, **entries}))
    loaders = [
        subprocess.Popen(
            [sys.executable, "-c", LOADER, str(machine_file), name, "300"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in NAMES
    ]
    outputs = [loader.communicate(timeout=240)[0] for loader in loaders]

    assert [loader.returncode for loader in loaders] == [0, 0, 0], outputs
    assert not any("Error parsing JSON" in output for output in outputs), outputs
    kept = json.loads(machine_file.read_text())
    assert set(kept) == {"version", *NAMES}, "every machine's entry kept"


def test_the_module_is_asvs_command_line(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", MODULE, "machine", "--yes", "--machine", "locked-box"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((home / ".asv-machine.json").read_text())
    assert written["locked-box"]["machine"] == "locked-box"
    assert (home / ".asv-machine.json.lock").exists(), "asv's load went through the lock"
