"""`fwdasv.engine.runner`: each case written as soon as it finishes, and the host timer's
threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from helpers import FAST, engine

from fwdasv.core import results

GATED_TARGET = '''
"""The tiny decoder, except that case "last" waits until a gate file exists."""

import os
import time
from pathlib import Path

from fwdasv.targets.decoder import tiny


class Gated:
    name = "gated"

    def __init__(self, **kwargs):
        self.inner = tiny(**kwargs)

    def prepare(self, case, seed):
        if case.name == "last":
            gate = Path(os.environ["GATE_FILE"])
            deadline = time.monotonic() + 60
            while not gate.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the test never opened the gate")
                time.sleep(0.01)
        return self.inner.prepare(case, seed)


def target(device="cpu", dtype="float32", stage=0, num_stages=1):
    return Gated(device=device, dtype=dtype, stage=stage, num_stages=num_stages)
'''


def test_each_case_is_written_as_soon_as_it_finishes(tmp_path, env):
    (tmp_path / "gated_target.py").write_text(textwrap.dedent(GATED_TARGET))
    gate = tmp_path / "gate"
    out = tmp_path / "out.json"
    env = {**env, "PYTHONPATH": str(tmp_path), "GATE_FILE": str(gate)}
    args = ["--target", "gated_target:target", "--case", "first=2*1@32", "--case", "last=8"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fwdasv.engine", *args, *FAST, "--output-json", str(out)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = proc.stdout.readline()
        assert first_line.startswith("[forward] first: 2 reqs, 2 tokens, median "), first_line
        # The second case is blocked on the gate: the file holds the first alone.
        (only,) = results.load(out)
        assert only.case == "first" and only.ok
        assert proc.poll() is None
        gate.touch()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert stdout.startswith("[forward] last: 1 reqs, 8 tokens, median ")
    assert [r.case for r in results.load(out)] == ["first", "last"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []


@pytest.mark.parametrize(("args", "threads"), [([], 1), (["--threads", "2"], 2)])
def test_the_host_timer_times_on_one_thread_unless_told(tmp_path, clean_env, args, threads):
    # No OMP_NUM_THREADS: the engine picks the threads itself, as the asv suites do.
    out = tmp_path / "out.json"
    done = engine([*FAST, "--case", "p=4", *args, "--output-json", str(out)], clean_env, tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())
    engine_info = case["ranks"][0]["engine"]
    assert (engine_info["timer"], engine_info["threads"]) == ("host", threads)
