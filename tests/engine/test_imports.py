"""`fwdasv.engine.imports`: the modules of the code under test a bench imported, named in its
JSON (what a commit must change to reach the forward), and nothing of Python, torch or
fwdasv."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

from helpers import FAST, engine, one_thread_env
from toy_model import TARGET, build_repo

from fwdasv.engine.imports import project_modules


def _module(name: str, file: str | None) -> tuple[str, types.ModuleType]:
    module = types.ModuleType(name)
    if file is not None:
        module.__file__ = file
    return name, module


def test_only_modules_outside_python_torch_and_fwdasv_are_the_projects(tmp_path: Path) -> None:
    import torch

    import fwdasv

    project = tmp_path / "repo" / "mymodel"
    modules = [
        _module("mymodel.bench", str(project / "bench.py")),
        _module("mymodel.layers", str(project / "layers.py")),
        _module("json", json.__file__),
        _module("torch.nn", os.path.join(os.path.dirname(torch.__file__), "nn", "__init__.py")),
        _module("fwdasv.engine", os.path.join(os.path.dirname(fwdasv.__file__), "engine.py")),
        _module("torch.ops", "torch.ops"),  # a made-up name, not a path
        _module("sys", None),  # built in: no file
        # virtualenv's seed beside the project in asv's environment: not the project's.
        _module("_distutils_hack", str(tmp_path / "env" / "_distutils_hack" / "__init__.py")),
    ]
    assert project_modules(TARGET, modules) == ("mymodel.bench", "mymodel.layers")
    # The target's own module missing: the project cannot be told from the rest.
    assert project_modules("other.bench:target", modules) is None


def test_the_engine_names_what_it_imported_of_the_project(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    build_repo(repo, commits=2, slow_index=None)
    out = tmp_path / "out.json"
    env = one_thread_env(PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))
    done = engine(
        ["--target", TARGET, "--case", "p=8", *FAST, "--output-json", str(out)], env, tmp_path
    )
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())
    imported = case["ranks"][0]["engine"]["imported"]
    assert "mymodel.bench" in imported and all(n.startswith("mymodel") for n in imported), imported
    # fwdasv's own decoder (the canary) is no project's code: nothing is recorded.
    canary = tmp_path / "canary.json"
    done = engine(
        [
            "--target",
            "fwdasv.targets.decoder:tiny",
            "--case",
            "p=8",
            *FAST,
            "--output-json",
            str(canary),
        ],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "imported" not in json.loads(canary.read_text())[0]["ranks"][0]["engine"]
