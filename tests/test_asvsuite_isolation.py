"""A bench process that dies on one case costs that case only: the suite re-runs each case alone."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from fwdasv.asv.suite import TorchSuite

SCRIPTS = str(Path(__file__).parent / "scripts")


class Crashy(TorchSuite):
    model = "crash_targets:target"
    iters = 2
    samples = 8
    warmup_s = 0.0
    env: ClassVar[dict[str, str]] = {"PYTHONPATH": SCRIPTS}
    timeout = 300.0
    cases = ("first=2*1@32", "crash=8", "last=16")


def test_a_dying_case_is_isolated_and_the_others_are_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FWDASV_LOG_DIR", str(tmp_path))
    suite = Crashy()
    cache = suite.setup_cache()
    out = capsys.readouterr().out
    assert "running each case on its own" in out
    for name in ("first", "last"):
        assert cache.summary(name).error is None, cache.summary(name)
        assert len(cache.summary(name).samples_s) == 8
        suite.setup(cache, name)
        assert suite.track_latency(cache, name)["number"] == 1
    assert "exited with status 7" in cache.summary("crash").error
    suite.setup(cache, "crash")  # a failure, not a skip: setup lets it through ...
    with pytest.raises(RuntimeError, match="the bench failed"):
        suite.track_latency(cache, "crash")  # ... and the benchmark fails
