"""Ray, imported on its first use: `from fwdasv.fleet import _ray`, then `_ray.ray.get(...)`.

Ray is an optional extra (`fwdasv[fleet]`): the fleet's modules are imported by
`fwdasv --help` and by every command, and must load without it. The module attribute
`ray` (PEP 562) imports it, with the submodules the fleet names, the first time it is read;
without Ray installed, reading it is a `UserError` naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fwdasv.core.errors import UserError

_SUBMODULES = ("ray.exceptions", "ray.util.scheduling_strategies")


def __getattr__(name: str) -> ModuleType:
    if name != "ray":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("ray")
    except ModuleNotFoundError as error:
        if error.name != "ray":
            raise
        raise UserError(
            "the fleet's commands need Ray, not installed in this environment: "
            "pip install 'fwdasv[fleet]' (or the ray version of pyproject.toml's fleet extra)"
        ) from None
    for submodule in _SUBMODULES:
        importlib.import_module(submodule)
    globals()["ray"] = module
    return module
