"""A small PyTorch model package with a git history, as a user's own repository would be.

`mymodel` is an MLP stack over token embeddings; `mymodel.bench:target` is a
target of fwdasv's engine (see fwdasv/targets/base.py). Its history has
`commits` commits; the one at `slow_index` ("Refine every hidden state with a
second pass") runs the layer stack twice, which doubles the forward's time.
The others change docs, tests, metadata and refactors. One thread: host
timings of a 2-core shared box stay steady enough for asv's detector.
`paced_project` builds the repository and its asv project with a paced CPU suite.
"""

from __future__ import annotations

import os
from pathlib import Path

from helpers import git

from fwdasv.asv.project import AsvProject
from fwdasv.asv.scaffold import init_project
from fwdasv.asv.suitespec import SuiteSpec

PACKAGE = "mymodel"
TARGET = "mymodel.bench:target"
SLOW_SUBJECT = "Refine every hidden state with a second pass"
FAST_SUBJECT = "Drop the second pass over the layer stack"

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mymodel"
version = "{version}"
requires-python = ">=3.10"
dependencies = []

[tool.setuptools]
packages = ["mymodel"]
"""

_MODEL = '''"""An MLP stack over token embeddings."""

import torch


class MyModel:
    def __init__(self, hidden=128, inner=256, layers=2, vocab=512, seed=0, device="cpu"):
        g = torch.Generator(device=device).manual_seed(seed)

        def weight(*shape):
            return torch.randn(*shape, generator=g, device=device) * 0.05

        self.embed = weight(vocab, hidden)
        self.layers = [(weight(inner, hidden), weight(hidden, inner)) for _ in range(layers)]

    def block(self, x):
        for up, down in self.layers:
            x = x + torch.nn.functional.gelu(x @ up.t()) @ down.t()
        return x

    def forward(self, tokens):
        x = self.embed[tokens]
        {passes}
'''

_ONE_PASS = "return self.block(x)"
SLOW_PASS = "return self.block(self.block(x))"


def _passes(count: int) -> str:
    """The forward's last line running the layer stack `count` times (2: SLOW_PASS)."""
    return "return " + "self.block(" * count + "x" + ")" * count


_BENCH = '''"""fwdasv target: `mymodel.bench:target`."""

import torch

from fwdasv.targets.base import PreparedForward
from mymodel.model import MyModel


class Target:
    name = "mymodel"

    def __init__(self, device="cpu", dtype="float32", seed=0):
        torch.set_num_threads(1)
        self.device = device
        self.model = MyModel(seed=seed, device=device)

    def prepare(self, case, seed):
        if any(request.num_draft_tokens for request, _ in case.groups()):
            raise ValueError(f"{case.name}: mymodel times decode and prefill steps only")
        tokens = sum(request.query_len * count for request, count in case.groups())
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 512, (tokens,), generator=g).to(self.device)

        def forward():
            return {"hidden_states": self.model.forward(ids)}

        return PreparedForward(forward=forward, state=[], num_tokens=tokens)


def target(device="cpu", dtype="float32", seed=0):
    return Target(device=device, dtype=dtype, seed=seed)
'''


def build_repo(
    path: str | os.PathLike[str],
    commits: int = 8,
    slow_index: int | None = 5,
    slow_passes: int = 2,
    fast_index: int | None = None,
) -> list[str]:
    """Create the repository at `path`; returns its hashes, oldest first. `slow_index` None:
    no commit changes the forward. Past 8 commits the others are notes in the README.
    `slow_passes`: how many times the slow commit runs the layer stack (2: twice as slow).
    `fast_index` (before `slow_index`): the commits before it run `slow_passes` passes too,
    so the history speeds up at `fast_index` and slows down again at `slow_index`."""
    path = Path(path)
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    subjects = [
        "Initial MLP model and its fwdasv target",
        "Add a README",
        "Add a license",
        "Describe the model in the package docstring",
        "Bump version to 0.1.1",
        "Add a changelog",
        "Note the hidden size in the README",
        "Bump version to 0.2.0",
    ]
    subjects += [f"README: note {n}" for n in range(len(subjects), commits)]
    if slow_index is None:
        slow_index = commits
    elif not 0 < slow_index < commits:
        raise ValueError(f"slow_index {slow_index} must be in 1..{commits - 1}")
    else:
        subjects[slow_index] = SLOW_SUBJECT
    if fast_index is not None:
        if not 0 < fast_index < slow_index:
            raise ValueError(f"fast_index {fast_index} must be in 1..{slow_index - 1}")
        subjects[fast_index] = FAST_SUBJECT
    subjects = subjects[:commits]
    hashes = []
    for index, subject in enumerate(subjects):
        version = "0.1.0" if index < 4 else "0.1.1"
        files = {
            "pyproject.toml": _PYPROJECT.format(version=version),
            "mymodel/__init__.py": f'"""mymodel {index}."""\n',
            "mymodel/model.py": _MODEL.format(
                passes=_passes(slow_passes)
                if index >= slow_index or (fast_index is not None and index < fast_index)
                else _ONE_PASS
            ),
            "mymodel/bench.py": _BENCH,
            "README.md": f"# mymodel\n\nRevision {index}.\n",
        }
        for name, text in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text)
        stamp = f"2026-10-{index + 1:02d}T12:00:00+00:00"
        env = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        git(path, "add", "-A", env=env)
        git(path, "commit", "-q", "--no-gpg-sign", "-m", subject, env=env)
        hashes.append(git(path, "rev-parse", "HEAD"))
    return hashes


def paced_project(
    root: Path, env_dir: Path, case: str, **repo: int
) -> tuple[AsvProject, list[str]]:
    """`build_repo(root / "mymodel", **repo)` and its asv project at `root / "asv"` (environments
    in `env_dir`, no canary, the target not checked): one paced CPU suite of `case`, as
    `fwdasv init` writes on a CPU. Returns the project and the repository's hashes."""
    hashes = build_repo(root / "mymodel", **repo)
    # Paced (the forward over fwdasv's fixed workload, `track_relative`): on this shared box
    # a commit's latency read 55% slow in one run beside the other tests; the ratio holds.
    suite = SuiteSpec(
        TARGET,
        (case,),
        iters=5,
        samples=5,
        warmup_s=0.05,
        launches=2,
        env={"OMP_NUM_THREADS": "1"},
        device="cpu",
        reference=True,
    )
    made = init_project(
        root / "asv", root / "mymodel", suite, env_dir=env_dir, check=False, canary=False
    )
    return made.project, hashes
