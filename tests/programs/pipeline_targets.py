"""Targets for the pipeline tests (imported by every rank; put this folder on PYTHONPATH).

`failing_stage1` is the tiny decoder whose stage 1 raises in its forward on
cases named `boom*`: a failure on one rank only, after stage 0 has already
run and wants to send on.
"""

from __future__ import annotations

from typing import Any

from fwdasv.core.cases import BenchCase
from fwdasv.targets.base import PreparedForward
from fwdasv.targets.decoder import DecoderTarget, tiny


class FailingStage1:
    def __init__(self, inner: DecoderTarget):
        self.inner = inner
        self.name = f"failing-stage1-{inner.name}"

    def prepare(self, case: BenchCase, seed: int) -> PreparedForward:
        prepared = self.inner.prepare(case, seed)
        if case.name.startswith("boom") and self.inner.stage == 1:

            def forward() -> Any:
                raise RuntimeError(f"stage 1 cannot run {case.name}")

            prepared.forward = forward
        return prepared


def failing_stage1(**kwargs: Any) -> FailingStage1:
    return FailingStage1(tiny(**kwargs))
