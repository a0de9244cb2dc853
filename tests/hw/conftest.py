"""The hw tests' fixtures: a state file of their own, two fake H200s behind NVML
(tests/fake_nvml.py) that must end with no error and every init shut down, and root."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_nvml import FakeNvml

from fwdasv.hw import statefile as hw_statefile


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / "hw-state.json"
    monkeypatch.setenv(hw_statefile.STATE_FILE_ENV, str(path))
    return path


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, state_file: Path) -> Iterator[FakeNvml]:
    nvml = FakeNvml.h200(count=2).install(monkeypatch)
    yield nvml
    assert nvml.errors == []
    assert nvml.initialised == 0, "an nvmlInit without its nvmlShutdown"


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
