"""Targets that misbehave the ways issue 11 names (put this folder on PYTHONPATH).

Each wraps the tiny decoder: its output is NaN; it computes something else on
every run (eager repeat differs); its factory raises; each run is
slower than the last (unstable timing); its second pipeline stage dies
in the stream; it hangs while preparing (for Ctrl-C); it has no `max_stages`.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from fwdasv.core.cases import BenchCase
from fwdasv.targets.base import PreparedForward
from fwdasv.targets.decoder import tiny


class Wrapped:
    def __init__(self, mode: str, stage: int = 0, **kwargs: Any):
        self.inner = tiny(stage=stage, **kwargs)
        self.mode = mode
        self.stage = stage
        self.name = f"{mode}-{self.inner.name}"

    def prepare(self, case: BenchCase, seed: int) -> PreparedForward:
        if self.mode == "hangs":
            marker = os.environ.get("FWDASV_TEST_HANG_DIR")
            if marker:  # say "this rank is now hanging" to the test that will interrupt it
                with open(os.path.join(marker, f"stage{self.stage}"), "w"):
                    pass
            time.sleep(600)
        prepared = self.inner.prepare(case, seed)
        forward = prepared.forward
        calls = [0]

        def misbehaving() -> dict:
            calls[0] += 1
            out = forward()
            if self.mode == "nan":
                return {name: tensor * math.nan for name, tensor in out.items()}
            if self.mode == "drifts":
                return {name: tensor + calls[0] for name, tensor in out.items()}
            if self.mode == "slows_down":
                # Each run 5 ms slower than the last: later blocks are always slower.
                time.sleep(0.005 * calls[0])
            if self.mode == "dies" and self.stage == 1 and calls[0] > 1:
                os._exit(7)  # in the stream, after the eager pass every rank agreed on
            return out

        prepared.forward = misbehaving
        return prepared


def nan_output(**kwargs: Any) -> Wrapped:
    return Wrapped("nan", **kwargs)


def drifts(**kwargs: Any) -> Wrapped:
    return Wrapped("drifts", **kwargs)


def slows_down(**kwargs: Any) -> Wrapped:
    return Wrapped("slows_down", **kwargs)


def dies_in_stream(**kwargs: Any) -> Wrapped:
    return Wrapped("dies", **kwargs)


def hangs(**kwargs: Any) -> Wrapped:
    return Wrapped("hangs", **kwargs)


def no_stage_limit(**kwargs: Any) -> Wrapped:
    """A target whose factory does not say how many stages it splits into."""
    return Wrapped("plain", **kwargs)


def raises(device: str = "cpu", dtype: str = "float32") -> Wrapped:
    return {}["no such weights"]
