"""`python -m fwdasv.targets.check --target T --case C ...`: can the engine time this target?

Imports the factory, builds the target (device and dtype as the engine's
`auto` picks them) and prepares every case, without timing anything: the
cheap half of a bench run, which fails the same way a bench run would when
the target string, the package or a case is wrong. `fwdasv init` runs it on
the repository's HEAD before writing a project. Prints `ok: ...` and exits 0,
or one `fwdasv: ...` line and exits 1.
"""

from __future__ import annotations

import argparse
import sys

from fwdasv.core.cases import parse_case, unique_cases
from fwdasv.core.errors import describe_error, helper_main
from fwdasv.targets.base import PreparedForward, TargetSpec
from fwdasv.targets.device import resolve_device, resolve_dtype


def check(target: str, cases: list[str], device: str = "auto", dtype: str = "auto") -> str:
    """Build `target` and prepare each case; returns a one-line summary."""
    import torch

    parsed = unique_cases(parse_case(text) for text in cases)
    spec = TargetSpec.parse(target)
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    with torch.inference_mode():
        built = spec.build(device, dtype)
        for case in parsed:
            try:
                prepared = built.prepare(case, 0)
            except Exception as error:
                raise ValueError(
                    f"{target} cannot prepare case {case.name} ({case.body()}): "
                    f"{describe_error(error)}"
                ) from None
            if not isinstance(prepared, PreparedForward):
                raise ValueError(
                    f"{target}.prepare returned {type(prepared).__name__} for case "
                    f"{case.name}, not fwdasv.targets.base.PreparedForward"
                )
    names = ", ".join(case.name for case in parsed)
    return f"{target} imports, builds on {device} ({dtype}) and prepares {names}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fwdasv.targets.check", description=__doc__)
    parser.add_argument("--target", required=True)
    parser.add_argument("--case", action="append", required=True, dest="cases")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args(argv)
    # Every exception ends as one line: a ValueError is the input's (check words it), any other
    # is named by its type.
    return helper_main(
        lambda: f"ok: {check(args.target, args.cases, args.device, args.dtype)}",
        (Exception,),
        named=(ValueError,),
    )


if __name__ == "__main__":
    sys.exit(main())
