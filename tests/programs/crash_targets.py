"""A target whose process dies on cases named `crash*` (put this folder on PYTHONPATH).

Stands in for a bench that exits on one bad case and takes the others' unwritten
results with it, as vLLM's bench does (it writes its JSON only at the end).
"""

from __future__ import annotations

import os
from typing import Any

from fwdasv.core.cases import BenchCase
from fwdasv.targets.base import PreparedForward
from fwdasv.targets.decoder import DecoderTarget, tiny


class CrashOnCase:
    def __init__(self, inner: DecoderTarget):
        self.inner = inner
        self.name = f"crash-on-case-{inner.name}"

    def prepare(self, case: BenchCase, seed: int) -> PreparedForward:
        if case.name.startswith("crash"):
            os._exit(7)
        return self.inner.prepare(case, seed)


def target(**kwargs: Any) -> CrashOnCase:
    return CrashOnCase(tiny(**kwargs))
