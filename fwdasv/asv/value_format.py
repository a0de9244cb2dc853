"""asv's display of a value whose unit is neither seconds nor bytes, as short as its times.

asv's `util.human_value` shows such a value with `json.dumps`, so a median of ratios
(`track_relative`, unit "ratio") prints as `2.3450800000000003±0.044` in the tables of
`asv run`, `show` and `compare`. `install` wraps it: a finite float shows with asv's own
`human_float` (SIGNIFICANT digits, the error's 2 as asv's sizes show theirs); every other
value and unit goes to asv's function unchanged. Only the display changes; results keep
every digit. The environment plugin (`fwdasv.asv.envplugin`, the module asv imports in its
own process) calls it; idempotent.
"""

from __future__ import annotations

import math
import sys

from asv import util
from asv_runner.util import human_float

# One more digit than asv's times: a 0.1% step of a ratio near 1 still shows.
SIGNIFICANT = 4
ASV_UNITS = ("seconds", "bytes")


def brief(value: object, unit: object, err: object = None) -> str | None:
    """A finite float in a unit asv does not scale, with SIGNIFICANT digits (the error's
    2); None where asv's own display applies."""
    if unit in ASV_UNITS or not isinstance(value, float) or not math.isfinite(value):
        return None
    shown = str(human_float(value, SIGNIFICANT))
    if isinstance(err, (int, float)) and math.isfinite(err):
        shown += "±" + str(human_float(err, 2))
    return shown


def install() -> None:
    """asv's `util.human_value` (and the name asv's compare command imported) wrapped."""
    if hasattr(util.human_value, "asv_original"):
        return
    original = util.human_value

    def wrapped(value: object, unit: object, err: object = None) -> str:
        shown = brief(value, unit, err)
        return str(original(value, unit, err=err)) if shown is None else shown

    wrapped.asv_original = original  # type: ignore[attr-defined]
    util.human_value = wrapped
    compare = sys.modules.get("asv.commands.compare")
    if compare is not None and getattr(compare, "human_value", None) is original:
        setattr(compare, "human_value", wrapped)  # noqa: B010 (a module asv imported)
