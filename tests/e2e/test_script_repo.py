"""A repository that is not a package, its target outside it: every command, offline.

A real git repository of a script-style model (tests/script_model.py:
`model.py` at the root, no setup.py or pyproject.toml, 8 commits, the 5th
runs the MLP stack four times) at ~/src/ngmodel of a temporary HOME, and its target
`ngbench:target` in ~/ngbench, outside it. Each command runs as a user runs
it, its own process (`python -m fwdasv` / `python -m asv` of this
interpreter), with PIP_NO_INDEX=1, no pip configuration and no PYTHONPATH:
init (its check at HEAD imports the target from --target-path and `model`
from HEAD's tree), hw machine, asv run over every commit, regressions,
compare, confirm, explain and bisect. Nobody writes an install_command.
Then the environment each benchmark process recorded (`fwdasv.asv.ranenv`)
is checked, and, after another job rewrites the machine entry's torch, that
`regressions` warns about the result stored under it. About 8 minutes on the
shared 2-core box (4-5 when it is quiet).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from script_model import SLOW_SUBJECT, TARGET, build_repo, write_target

from fwdasv.asv import ranenv
from fwdasv.asv.suitespec import paced_by_default

pytestmark = [pytest.mark.slow, pytest.mark.long]

COMMITS, SLOW_INDEX = 8, 4
CASE = "prefill_128"
LATENCY = "forward.Ngbench.track_latency"
# What the verdicts judge: `init` paces a suite that times on the CPU (no GPU here).
BENCH = "forward.Ngbench.track_relative" if paced_by_default() else LATENCY


def run(home: Path, cwd: Path, *argv: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        HOME=str(home),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS="",
        PIP_CONFIG_FILE=os.devnull,
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def shown(proc: subprocess.CompletedProcess) -> str:
    return (
        f"$ {' '.join(map(str, proc.args[2:]))} (exit {proc.returncode})\n"
        + (proc.stdout + proc.stderr)[-5000:]
    )


def test_script_repository_with_an_outside_target_runs_every_command(
    tmp_path: Path, measuring
) -> None:
    home = tmp_path / "home"
    repo = home / "src" / "ngmodel"
    hashes = build_repo(repo, commits=COMMITS, slow_index=SLOW_INDEX)
    target_dir = write_target(home / "ngbench")
    slow, before = hashes[SLOW_INDEX], hashes[SLOW_INDEX - 1]
    project = home / "ng-asv"

    init = run(
        home, home, "fwdasv", "init", "--repo", str(repo), "--target", TARGET,
        "--target-path", str(target_dir), "--case", f"{CASE}=128", "--dir", str(project),
        "--no-canary",  # the canary is not this test's subject, and would double asv run
        "--machine", "box",  # the name `hw machine --name` gives it below, as the README does
    )  # fmt: skip
    assert init.returncode == 0, shown(init)
    assert f"checked at {hashes[-1][:8]}: {TARGET} imports" in init.stdout, shown(init)
    assert "ngmodel has no setup.py or pyproject.toml: each commit's checkout goes on the " \
        "import path" in init.stdout, shown(init)  # fmt: skip
    config = json.loads((project / "asv.conf.json").read_text())
    assert config["install_command"] == [
        "in-dir={env_dir} python -m fwdasv.asv.treeinstall --checkout {build_dir} "
        "--env {env_dir} --path ."
    ]
    suite_file = project / "benchmarks" / "forward.py"
    source = suite_file.read_text()
    assert f"target_path = ({str(target_dir)!r},)" in source
    # As the README says: edit iters and the warm-up in the suite (a CPU test box).
    suite_file.write_text(
        source.replace("iters = 20", "iters = 5").replace("warmup_s = 1.0", "warmup_s = 0.05")
    )

    with measuring():
        steps = [run(home, project, "fwdasv", "hw", "machine", "--name", "box")]
        steps.append(
            run(home, project, "asv", "run", "--record-samples", "--machine", "box", "ALL")
        )
        for step in steps:
            assert step.returncode == 0, shown(step)
        regressions = run(home, project, "fwdasv", "regressions")
        for _ in range(2):  # a busy box: more samples, in new processes (the README's advice)
            if regressions.returncode == 1:
                break
            extra = run(home, project, "asv", "run", "--append-samples", "--machine", "box", "ALL")
            assert extra.returncode == 0, shown(extra)
            regressions = run(home, project, "fwdasv", "regressions")
        compare = run(home, project, "fwdasv", "compare", before, slow)
        # confirm first: bisect adds samples to the history, which the findings then read.
        confirm = run(home, project, "fwdasv", "confirm", "--no-explain")
        explain = run(home, project, "fwdasv", "explain", before, slow, LATENCY, "--case", CASE)
        bisect = run(
            home, project, "fwdasv", "bisect", f"{hashes[0]}..{hashes[-1]}", BENCH, "--case", CASE
        )

    latency = run(home, project, "fwdasv", "export", "--format", "csv", "-o", "-").stdout
    history = "\n".join(line for line in latency.splitlines() if "track_latency" in line)
    assert regressions.returncode == 1, shown(regressions) + "\n" + history
    flagged = [
        line
        for line in regressions.stdout.splitlines()
        if line.split()[:1] == ["regression"] and BENCH in line and slow[:8] in line
    ]
    assert flagged and SLOW_SUBJECT in flagged[0], shown(regressions)

    assert compare.returncode == 1, shown(compare)
    # The judged series' row: worse by the pair, or the history's finding between the two
    # commits deciding it (its word, the pair's own verdict in the note), as compare shows it.
    row = re.search(rf"^(\S+) .*{re.escape(BENCH)}\({CASE}\).*$", compare.stdout, re.M)
    assert row, shown(compare)
    assert row.group(1) == "worse" or (
        row.group(1) == "regression" and "the pair alone: worse" in row.group(0)
    ), shown(compare)

    # Exit 1: named, but some probe was decided by the closer median (the shared box's
    # neighbours can double a process's times); either way the commit must be the right one.
    assert bisect.returncode in (0, 1), shown(bisect)
    assert f"first bad commit: {slow[:8]} {SLOW_SUBJECT}" in bisect.stdout, shown(bisect)

    assert confirm.returncode == 1, shown(confirm)
    assert re.search(rf"^confirmed .*{slow[:8]}", confirm.stdout, re.M), shown(confirm)

    assert explain.returncode == 1, shown(explain)  # B is slower
    assert "aten::mm" in explain.stdout, shown(explain)

    # No pip install of the repository: the environment holds virtualenv's seed wheels
    # only, and the commit's checkout beside them.
    (env,) = [p for p in (project / "env").iterdir() if p.is_dir()]
    (site_packages,) = env.glob("lib/python*/site-packages")
    assert {p.name.split("-")[0].lower() for p in site_packages.glob("*.dist-info")} == {
        "pip",
        "setuptools",
    }
    assert (site_packages / "fwdasv-tree.pth").read_text().strip() == str(env / "fwdasv-tree")

    # What each benchmark process ran with is recorded beside the results, and agrees
    # with the machine entry ...
    torch = metadata.version("torch")
    records = ranenv.load_records(project / "results")
    assert {r.commit for r in records} == set(hashes)
    assert {(r.environment.torch, r.environment.executable) for r in records} == {
        (torch, str(env / "bin" / "python"))
    }
    assert "Warning" not in regressions.stderr, shown(regressions)
    # ... until another job on this box rewrites the entry (the per-user machine file):
    # the next result is stored as torch 2.14.1, and regressions says what ran.
    machine_file = home / ".asv-machine.json"
    machines = json.loads(machine_file.read_text())
    machines["box"]["torch"] = "2.14.1"
    machine_file.write_text(json.dumps(machines))
    with measuring():
        again = run(
            home, project, "asv", "run", "--append-samples", "--machine", "box",
            f"{hashes[-1]}^!",
        )  # fmt: skip
    assert again.returncode == 0, shown(again)
    relabelled = run(home, project, "fwdasv", "regressions")
    assert "Warning: 1 result(s) of machine 'box' are labelled with another environment" in (
        relabelled.stderr
    ), shown(relabelled)
    assert f"the machine entry says torch 2.14.1, the benchmark ran torch {torch}" in (
        relabelled.stderr
    ), shown(relabelled)
