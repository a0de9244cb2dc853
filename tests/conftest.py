"""Shared pytest setup: GPU and vLLM markers skip cleanly where they cannot run."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "tests" / "data"


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    devices = _cuda_devices()
    has_vllm = importlib.util.find_spec("vllm") is not None
    for item in items:
        if "gpu" in item.keywords and devices < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if "multigpu" in item.keywords and devices < 2:
            item.add_marker(pytest.mark.skip(reason="needs two CUDA devices"))
        if "vllm" in item.keywords and not has_vllm:
            item.add_marker(
                pytest.mark.skip(reason="needs the vllm package (pip install -e '.[vllm]')")
            )


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the one fwdasv is installed in)."""
    return sys.executable


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment without a parent torchrun's variables."""
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


@pytest.fixture(scope="session")
def asv_machine_home(tmp_path_factory: pytest.TempPathFactory):
    """HOME with an asv machine file for machine "testbox" (asv reads ~/.asv-machine.json)."""
    import json

    home = tmp_path_factory.mktemp("home")
    (home / ".asv-machine.json").write_text(
        json.dumps(
            {
                "testbox": {
                    "machine": "testbox",
                    "os": "Linux",
                    "arch": "x86_64",
                    "cpu": "test cpu",
                    "num_cpu": "2",
                    "ram": "24GB",
                },
                "version": 1,
            }
        )
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        # Keep pip's cache where it was: the per-commit envs install from it.
        patch.setenv(
            "PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip"))
        )
        yield home


@pytest.fixture(scope="session")
def shared_asv_env(tmp_path_factory: pytest.TempPathFactory, asv_machine_home: Path) -> Path:
    """One asv env directory for every asv test: the virtualenv is built once."""
    return tmp_path_factory.mktemp("asv-env")
