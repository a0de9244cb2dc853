"""Confirm and explain without reinstalling (issue 19 item 3): one environment per commit.

Real asv installs (fwdasv's environment type, no index) of a real git history:
an interleaved A B A B A B re-measure installs A and B once each, a later
re-measure (explain after confirm) finds both installed, and the old way (the
configuration's one environment) reinstalls at every switch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from toy_model import SLOW_PASS, build_repo

from fwdasv.analysis.remeasure import Remeasurer
from fwdasv.asv.install import env_dir_for
from fwdasv.asv.scaffold import write_torch_project


def _slow_in(python: str) -> bool:
    code = f"import mymodel.model as m; print({SLOW_PASS!r} in open(m.__file__).read())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.slow
def test_an_interleaved_ab_installs_each_commit_once_and_keeps_it(tmp_path: Path, offline) -> None:
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    a, b = hashes[0], hashes[2]
    measurer = Remeasurer(project, None, tmp_path / "work")  # type: ignore[arg-type]
    pythons = {}
    for _ in range(3):
        for commit in (a, b):
            pythons.setdefault(commit, set()).add(measurer.install(commit).python)
    assert measurer.installs == 2
    assert all(len(found) == 1 for found in pythons.values())
    (python_a,), (python_b,) = pythons[a], pythons[b]
    assert python_a != python_b
    assert python_a.startswith(str(env_dir_for(project, a)))
    assert not _slow_in(python_a) and _slow_in(python_b), "each environment holds its commit"
    # What confirm installed, explain finds installed.
    later = Remeasurer(project, None, tmp_path / "work")  # type: ignore[arg-type]
    later.install(b)
    later.install(a)
    assert later.installs == 0


@pytest.mark.slow
def test_the_shared_environment_reinstalls_at_every_switch(tmp_path: Path, offline) -> None:
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    measurer = Remeasurer(project, None, tmp_path / "work", per_commit_envs=False)  # type: ignore[arg-type]
    for _ in range(2):
        for commit in (hashes[0], hashes[2]):
            measurer.install(commit)
    assert measurer.installs == 4


@pytest.mark.slow
@pytest.mark.measure
def test_a_paced_finding_is_re_measured_as_the_forward_over_the_workload(
    tmp_path: Path, offline
) -> None:
    """A `track_relative` finding (a paced suite, `reference = True`): each re-measured
    process gives the median of its forward-over-workload ratios, not its latency. The
    commit that runs the layer stack twice reads about twice the ratio; the machine's
    own speed, the same for both, cancels. A suite without the workload is refused in
    one line."""
    from toy_model import TARGET

    from fwdasv.analysis.remeasure import RemeasureError, resolve
    from fwdasv.asv.scaffold import init_project
    from fwdasv.asv.suitespec import SuiteSpec

    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    spec = dict(iters=3, samples=6, warmup_s=0.02, env={"OMP_NUM_THREADS": "1"}, launches=1)
    suite = SuiteSpec(TARGET, ("p=256",), class_name="Paced", device="cpu", reference=True, **spec)
    project = init_project(
        tmp_path / "asv", tmp_path / "mymodel", suite, project="mymodel", canary=False
    ).project
    target = resolve(project, "forward.Paced.track_relative", "p")
    measurer = Remeasurer(project, target, tmp_path / "work", relative=True)
    a = measurer.process_median(hashes[0], "a1")
    b = measurer.process_median(hashes[2], "b1")
    # Ratios of two CPU timings of similar size, not seconds.
    assert 0.01 < a < 100 and 0.01 < b < 100, (a, b)
    assert 1.3 < b / a < 3.0, (a, b)
    latency = Remeasurer(project, target, tmp_path / "work").process_median(hashes[0], "a2")
    assert latency < 0.01 < a  # seconds of a tiny forward: the other path
    plain = SuiteSpec(TARGET, ("p=256",), class_name="Plain", device="cpu", timer="host", **spec)
    other = init_project(
        tmp_path / "asv2", tmp_path / "mymodel", plain, project="mymodel", canary=False
    ).project
    unpaced = Remeasurer(
        other, resolve(other, "forward.Plain.track_latency", "p"), tmp_path / "w2", relative=True
    )
    with pytest.raises(RemeasureError, match="no reference workload times"):
        unpaced.process_median(hashes[0], "a1")
