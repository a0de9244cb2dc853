"""What the engine is asked to time: `EngineConfig` and its `BenchOptions`, torch-free.

`auto` device, timer and dtype are resolved here (with torch, imported only
then), so the command line can check everything else before torch loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fwdasv.core.errors import UserError
from fwdasv.core.results import EngineInfo
from fwdasv.engine.protocol import PROTOCOLS, STEADY


class EngineOptionError(UserError, ValueError):
    """Flags of `fwdasv forward` that cannot go together or do not fit this machine."""


@dataclass(frozen=True)
class BenchOptions:
    iters: int = 20
    samples: int = 5
    seed: int = 0
    # Replays before timing, for steady clocks (the seed's ~1 s).
    warmup_s: float = 1.0
    # "graph" (CUDA only) or "host".
    timer: str = "graph"
    # A name of fwdasv.engine.protocol.PROTOCOLS (resolved: not "auto").
    protocol: str = STEADY

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.iters < 1 or self.samples < 1:
            raise ValueError(f"iters ({self.iters}) and samples ({self.samples}) must be >= 1")
        if self.warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")
        if self.timer not in ("graph", "host"):
            raise ValueError(f"timer must be 'graph' or 'host', got {self.timer!r}")


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineOptionError(f"--device {device}: no CUDA device is visible; use --device cpu")
    return device


def resolve_dtype(dtype: str, device: str) -> str:
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return dtype


def resolve_timer(timer: str, device: str) -> str:
    if timer == "auto":
        return "graph" if device.startswith("cuda") else "host"
    if timer == "graph" and not device.startswith("cuda"):
        raise EngineOptionError(
            "--timer graph needs a CUDA device; use --timer host (or auto) on CPU"
        )
    return timer


@dataclass(frozen=True)
class EngineConfig:
    """How to time: the target and its options, device, dtype and the bench options."""

    target: str
    # The target factory's keyword options (JSON values, from --target-option).
    target_options: Mapping[str, object]
    device: str
    dtype: str
    options: BenchOptions

    def describe(self) -> EngineInfo:
        """What produced a result, stored in every rank's result (`engine`)."""
        import platform

        import torch

        options = self.options
        return EngineInfo(
            target=self.target,
            target_options=self.target_options,
            device=self.device,
            dtype=self.dtype,
            iters=options.iters,
            samples=options.samples,
            seed=options.seed,
            warmup_s=options.warmup_s,
            timer=options.timer,
            protocol=options.protocol,
            torch=torch.__version__,
            python=platform.python_version(),
            gpu=torch.cuda.get_device_name(torch.device(self.device))
            if self.device.startswith("cuda")
            else None,
        )
