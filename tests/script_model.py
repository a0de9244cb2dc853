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
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
