"""A script-style model repository, and its fwdasv target kept outside it.

The repository is what many research repositories are: `model.py` at the
root, no setup.py or pyproject.toml, nothing to pip-install. Its history has
`commits` commits; the one at `slow_index` ("Apply the MLP stack four times
per token") runs the layers four times, which makes the forward about 4x slower
(a step that stands out of a busy 2-core box's noise); the others
touch the README and comments. Old commits cannot get a bench file, so the
target lives in a directory of its own (`ngbench.py` in `target_dir`), which
imports `model` from whichever commit is installed: what `fwdasv init
--target-path` is for. One thread: host timings of a 2-core box stay steady.
`explain_as_user` runs `fwdasv init` and `fwdasv explain` over two commits of it
(`commit_pair`) as a user runs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from helpers import git

TARGET = "ngbench:target"
SLOW_SUBJECT = "Apply the MLP stack four times per token"

_MODEL = '''"""A tiny MLP language model, one file."""

import torch


class Model:
    def __init__(self, hidden=256, inner=1024, layers=2, vocab=256, seed=0):
        g = torch.Generator().manual_seed(seed)

        def weight(*shape):
            return torch.randn(*shape, generator=g) * 0.05

        self.embed = weight(vocab, hidden)
        self.layers = [(weight(inner, hidden), weight(hidden, inner)) for _ in range(layers)]

    def mlp(self, x):
        for up, down in self.layers:
            x = x + torch.relu(x @ up.t()) @ down.t()
        return x

    def forward(self, tokens):
        x = self.embed[tokens]
        {body}
'''
FAST_BODY = "return self.mlp(x)"
TWICE_BODY = "return self.mlp(self.mlp(x))"
SLOW_BODY = "return self.mlp(self.mlp(self.mlp(self.mlp(x))))"
# The subject of a commit that changes the forward to that body (`build_repo(bodies=...)`).
BODY_SUBJECTS = {
    FAST_BODY: "Apply the MLP stack once per token",
    TWICE_BODY: "Apply the MLP stack twice per token",
    SLOW_BODY: SLOW_SUBJECT,
}

_TARGET = '''"""fwdasv target for the script-style repository: `ngbench:target` (outside it)."""

import torch

from fwdasv.targets.base import PreparedForward
from model import Model


class Target:
    name = "ngmodel"

    def __init__(self, device="cpu", dtype="float32", seed=0):
        torch.set_num_threads(1)
        self.model = Model(seed=seed)

    def prepare(self, case, seed):
        tokens = sum(request.query_len * count for request, count in case.groups())
        ids = torch.randint(0, 256, (tokens,), generator=torch.Generator().manual_seed(seed))

        def forward():
            return {"logits": self.model.forward(ids)}

        return PreparedForward(forward=forward, state=[], num_tokens=tokens)


def target(device="cpu", dtype="float32", seed=0):
    return Target(device=device, dtype=dtype, seed=seed)
'''


def write_target(target_dir: str | os.PathLike[str]) -> Path:
    """`ngbench.py` in `target_dir` (made); returns the directory."""
    target_dir = Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / "ngbench.py").write_text(_TARGET)
    return target_dir


def build_repo(
    path: str | os.PathLike[str],
    commits: int = 7,
    slow_index: int = 3,
    bodies: Sequence[str] | None = None,
) -> list[str]:
    """The repository at `path` (made); returns its hashes, oldest first. `bodies` (one
    forward body a commit, e.g. FAST_BODY, TWICE_BODY) replaces `commits` and
    `slow_index`: a commit that changes the body says so (BODY_SUBJECTS)."""
    if bodies is None:
        if not 0 < slow_index < commits:
            raise ValueError(f"slow_index {slow_index} must be in 1..{commits - 1}")
        bodies = [SLOW_BODY if index >= slow_index else FAST_BODY for index in range(commits)]
    path = Path(path)
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    hashes = []
    for index, body in enumerate(bodies):
        (path / "model.py").write_text(_MODEL.format(body=body))
        if index > 0 and body != bodies[index - 1]:
            subject = BODY_SUBJECTS[body]
        else:
            subject = "Initial model" if index == 0 else f"Describe the model, take {index}"
            (path / "README.md").write_text(f"# ngmodel\n\nA tiny MLP model (revision {index}).\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", subject)
        hashes.append(git(path, "rev-parse", "HEAD"))
    return hashes


# A setup.py as some research repositories have one: it names no package or module (an
# explicit empty list: no auto-discovery), so pip installs a package without `model`.
EMPTY_SETUP = """from setuptools import find_packages, setup

setup(name="ngmodel", version="0.1", packages=find_packages())
"""


def add_empty_setup(path: str | os.PathLike[str]) -> str:
    """Commit EMPTY_SETUP at the repository's root; returns the new HEAD."""
    path = Path(path)
    (path / "setup.py").write_text(EMPTY_SETUP)
    git(path, "add", "setup.py")
    git(path, "commit", "-q", "-m", "Add a setup.py")
    return git(path, "rev-parse", "HEAD")


# `explain_as_user`'s case and benchmark.
EXPLAIN_CASE = "prefill_128"
EXPLAIN_BENCH = "forward.Ngbench.track_latency"
_CHECKOUT = Path(__file__).resolve().parents[1]


def commit_pair(repo: Path, model: str, added: str, first_subject: str) -> tuple[str, str, str]:
    """The repository at `repo` (made) with two commits of `model` (`_MODEL` or one like it,
    its forward's `{body}` FAST_BODY): then the line `added` before FAST_BODY ("Squash the
    embeddings"). (GOOD, BAD, BAD's model.py)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "model.py").write_text(model.format(body=FAST_BODY))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", first_subject)
    good = git(repo, "rev-parse", "HEAD")
    text = model.format(body=f"{added}\n        {FAST_BODY}")
    (repo / "model.py").write_text(text)
    git(repo, "commit", "-qam", "Squash the embeddings")
    return good, git(repo, "rev-parse", "HEAD"), text


def run_as_user(home: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """A command as a user runs it (its own process, HOME `home`, no index, no
    FWDASV_SOURCE_ROOTS), with this checkout's fwdasv first on the path: the environment's
    link would give the installed one."""
    env = {k: v for k, v in os.environ.items() if k != "FWDASV_SOURCE_ROOTS"}
    env.update(HOME=str(home), PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(_CHECKOUT)
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def shown(proc: subprocess.CompletedProcess) -> str:
    """The command and the tail of its output, for an assertion's message."""
    return (
        f"$ {' '.join(map(str, proc.args[2:]))} (exit {proc.returncode})\n"
        + (proc.stdout + proc.stderr)[-6000:]
    )


def explain_as_user(
    home: Path,
    good: str,
    bad: str,
    measuring: Callable[[], AbstractContextManager[None]],
    commit_url: str | None = None,
) -> subprocess.CompletedProcess:
    """`fwdasv init` over `home/src/ngmodel` (the target written to `home/ngbench`, the
    project at `home/ng-asv`, no canary, its suite cut to 3 samples of 3 replays without
    warm-up; `commit_url`: the project's show_commit_url where init wrote none), then, under
    `measuring` (the fixture: it marks the test `measure`), `fwdasv hw machine --name box` and `fwdasv explain GOOD BAD
    EXPLAIN_BENCH --case EXPLAIN_CASE --rounds 2`: explain's process, each step asserted."""
    target_dir = write_target(home / "ngbench")
    project = home / "ng-asv"
    init = run_as_user(
        home, home, "fwdasv", "init", "--repo", str(home / "src" / "ngmodel"), "--target",
        TARGET, "--target-path", str(target_dir), "--case", f"{EXPLAIN_CASE}=128", "--dir",
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
    if commit_url is not None and '"show_commit_url"' not in config.read_text():
        config.write_text(
            config.read_text().replace("{", f'{{"show_commit_url": "{commit_url}",', 1)
        )
    with measuring():
        machine = run_as_user(home, project, "fwdasv", "hw", "machine", "--name", "box")
        assert machine.returncode == 0, shown(machine)
        return run_as_user(
            home, project, "fwdasv", "explain", good, bad, EXPLAIN_BENCH,
            "--case", EXPLAIN_CASE, "--rounds", "2",
        )  # fmt: skip
