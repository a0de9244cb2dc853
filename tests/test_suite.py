"""`fwdasv.asv.suite`: a suite's target_path reaches every bench it configures."""

from __future__ import annotations

import os
from typing import ClassVar

from fwdasv.asv.suite import TorchSuite


class Outside(TorchSuite):
    model = "ngbench:target"
    target_path: ClassVar[tuple[str, ...]] = ("/opt/ngbench",)
    env: ClassVar[dict[str, str]] = {"PYTHONPATH": "/extra", "OMP_NUM_THREADS": "1"}
    cases = ("p=8",)


class Inside(TorchSuite):
    model = "mymodel.bench:target"
    cases = ("p=8",)


def test_target_path_goes_first_on_the_bench_pythonpath() -> None:
    env = Outside().run_config().env
    assert env["PYTHONPATH"] == os.pathsep.join(["/opt/ngbench", "/extra"])
    assert env["OMP_NUM_THREADS"] == "1"
    assert "PYTHONPATH" not in Inside().run_config().env
