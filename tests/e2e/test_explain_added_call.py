"""explain names the line a commit changed when it adds a call to a helper it did not change.

The real repository's shape (issue: `Attention.forward` gained a call that rebuilt a table
in every layer; explain named the helper's line, and `changed here` marked every row of the
file): a script repository (tests/script_model.py's model with a helper `Model.squash`,
`return torch.tanh(x)`, in both commits), whose second commit adds `x = self.squash(x)` in
`Model.forward`. Through `fwdasv init` and `fwdasv explain` as a user runs them: the new
`aten::tanh` row names the added line in `Model.forward` (the first frame of its stack the
commit changed), not the helper's, marked `changed here`; no row whose stack holds no
changed line is marked; the headline's figure has the step's sign. About a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git
from script_model import _MODEL, FAST_BODY, TARGET, write_target
from test_explain_source_lines import BENCH, CASE, shown

pytestmark = [pytest.mark.slow, pytest.mark.long]

HELPER = "    def squash(self, x):\n        return torch.tanh(x)\n\n"
CALL = "x = self.squash(x)"


def run(home: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """A command as a user runs it (its own process, no index), with this checkout's fwdasv
    first on the path: the environment's link would give the installed one."""
    env = {k: v for k, v in os.environ.items() if k != "FWDASV_SOURCE_ROOTS"}
    env.update(HOME=str(home), PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def build(repo: Path) -> tuple[str, str, int, int]:
    """GOOD (the helper, never called), BAD (forward calls it); the call's and the helper's
    lines."""
    model = _MODEL.replace(
        "    def forward(self, tokens):", HELPER + "    def forward(self, tokens):"
    )
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "model.py").write_text(model.format(body=FAST_BODY))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial model, with a squash helper")
    good = git(repo, "rev-parse", "HEAD")
    text = model.format(body=f"{CALL}\n        {FAST_BODY}")
    (repo / "model.py").write_text(text)
    git(repo, "commit", "-qam", "Squash the embeddings")
    lines = text.splitlines()
    return (
        good,
        git(repo, "rev-parse", "HEAD"),
        lines.index(f"        {CALL}") + 1,
        (lines.index("        return torch.tanh(x)") + 1),
    )


def test_explain_names_the_added_call_not_the_unchanged_helper(tmp_path: Path, measuring) -> None:
    home = tmp_path / "home"
    good, bad, call, helper = build(home / "src" / "ngmodel")
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
    with measuring():
        machine = run(home, project, "fwdasv", "hw", "machine", "--name", "box")
        assert machine.returncode == 0, shown(machine)
        explain = run(
            home, project, "fwdasv", "explain", good, bad, BENCH, "--case", CASE, "--rounds", "2"
        )
    assert explain.returncode == 1, shown(explain)  # BAD is slower: the added op stands out
    lines = explain.stdout.splitlines()
    rows = [r for r in lines if r[:1] in "+-" and "aten::tanh" in r.split()]
    assert rows, shown(explain)
    assert f"model.py:{call} Model.forward [changed here]" in rows[0], shown(explain)
    assert f"model.py:{helper}" not in rows[0], shown(explain)
    # Per changed line: every marked row is one the added call made.
    for row in lines:
        if "[changed here]" in row:
            assert f"model.py:{call} " in row, shown(explain)
    headline = lines[0]
    assert "slower: +" in headline and "% of GOOD's time" in headline, headline
