"""The device and dtype a target is built on: `auto` resolved on this machine, dtype names
checked without torch, and the device's memory freed between cases.

Inputs are the engine's `--device` / `--dtype` spellings (`auto`, `cpu`, `cuda:N`;
`bf16`, `float32`, ...); outputs are the names a target factory takes: `auto` is CUDA
when one is visible, and bfloat16 on CUDA, float32 on CPU. Only `resolve_device`,
`torch_dtype` and `free_device_memory` import torch.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from fwdasv.core.errors import UserError
from fwdasv.targets.base import TargetError

if TYPE_CHECKING:
    import torch


class DeviceError(UserError, ValueError):
    """A device this machine cannot give (CUDA asked for, none visible)."""


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceError(f"--device {device}: no CUDA device is visible; use --device cpu")
    return device


def resolve_dtype(dtype: str, device: str) -> str:
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return dtype


# dtype names the command line accepts, checked without importing torch.
DTYPE_NAMES: dict[str, str] = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}


def check_dtype_name(name: str) -> str:
    """The canonical name of a dtype name, or a TargetError listing the known ones."""
    try:
        return DTYPE_NAMES[name]
    except KeyError:
        raise TargetError(f"Unknown dtype {name!r}; use one of {sorted(DTYPE_NAMES)}") from None


def torch_dtype(name: str) -> torch.dtype:
    import torch

    dtype: torch.dtype = getattr(torch, check_dtype_name(name))
    return dtype


def free_device_memory(device: torch.device) -> None:
    """Collect the last case's tensors and hand the CUDA cache back before the next case."""
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
