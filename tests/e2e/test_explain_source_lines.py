"""explain names the line of the code under test that a commit changed: a script repository
(no packaging, `model.py` at the root) with its target kept outside it (`init
--target-path`), no FWDASV_SOURCE_ROOTS anywhere.

A real git repository (tests/script_model.py's model), whose second commit adds one op on a
line of `model.py` (`x = torch.tanh(x)` in `Model.forward`); `fwdasv init` and `fwdasv
explain` run as a user runs them (their own processes, no PYTHONPATH, no index), asv
installing each commit's checkout into its environment. The row of the added op names
`model.py` at that line, not the target's `ngbench.py`, marked changed here (the project has
a commit URL, so the mark links to the commit), in the headline too; explain prints the time
each part took. About a minute on the 2-core box.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git
from script_model import _MODEL, FAST_BODY, TARGET, write_target

pytestmark = [pytest.mark.slow, pytest.mark.long]

CASE = "prefill_128"
BENCH = "forward.Ngbench.track_latency"
ADDED = "x = torch.tanh(x)  # squash the embeddings"
URL = "https://example.org/ngmodel/commit/"


def run(home: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FWDASV_SOURCE_ROOTS")}
    env.update(HOME=str(home), PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def shown(proc: subprocess.CompletedProcess) -> str:
    return (
        f"$ {' '.join(map(str, proc.args[2:]))} (exit {proc.returncode})\n"
        + (proc.stdout + proc.stderr)[-6000:]
    )


def build(repo: Path) -> tuple[str, str, int]:
    """Two commits; the second adds ADDED in Model.forward. (GOOD, BAD, the added line)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "model.py").write_text(_MODEL.format(body=FAST_BODY))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial model")
    good = git(repo, "rev-parse", "HEAD")
    text = _MODEL.format(body=f"{ADDED}\n        {FAST_BODY}")
    (repo / "model.py").write_text(text)
    git(repo, "commit", "-qam", "Squash the embeddings")
    line = text.splitlines().index(f"        {ADDED}") + 1
    return good, git(repo, "rev-parse", "HEAD"), line


def test_explain_names_the_changed_line_of_a_script_repository_with_its_target_outside(
    tmp_path: Path, measuring
) -> None:
    home = tmp_path / "home"
    good, bad, line = build(home / "src" / "ngmodel")
    target_dir = write_target(home / "ngbench")
    project = home / "ng-asv"
    init = run(
        home, home, "fwdasv", "init", "--repo", str(home / "src" / "ngmodel"), "--target",
        TARGET, "--target-path", str(target_dir), "--case", f"{CASE}=128", "--dir",
        str(project), "--no-canary",
    )  # fmt: skip
    assert init.returncode == 0, shown(init)
    suite = project / "benchmarks" / "forward.py"
    suite.write_text(
        suite.read_text()
        .replace("iters = 20", "iters = 3")
        .replace("samples = 10", "samples = 3")
        .replace("warmup_s = 1.0", "warmup_s = 0.0")
    )
    config = project / "asv.conf.json"
    if '"show_commit_url"' not in config.read_text():
        config.write_text(config.read_text().replace("{", f'{{"show_commit_url": "{URL}",', 1))
    with measuring():
        machine = run(home, project, "fwdasv", "hw", "machine", "--name", "box")
        assert machine.returncode == 0, shown(machine)
        explain = run(
            home, project, "fwdasv", "explain", good, bad, BENCH, "--case", CASE, "--rounds", "2"
        )
    assert explain.returncode == 1, shown(explain)  # BAD is slower: the added op stands out
    where = f"model.py:{line} Model.forward"
    rows = [r for r in explain.stdout.splitlines() if r[:1] in "+-" and "aten::tanh" in r.split()]
    assert rows and where in rows[0] and "[changed here]" in rows[0], shown(explain)
    assert "new" in rows[0] and "ngbench.py" not in rows[0], shown(explain)
    headline = explain.stdout.splitlines()[0]
    assert f"largest structural change: aten::tanh <- {where}, changed here (new" in headline
    link = next(r for r in explain.stdout.splitlines() if r.startswith("changed here: "))
    assert bad in link, shown(explain)
    assert "time: profiled runs" in explain.stderr and "eager pass" in explain.stderr
