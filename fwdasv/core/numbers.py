"""NaN and infinity, one rule each: what asv stores, what JSON and CSV may hold, how a
missing sample sorts.

asv writes NaN for a skipped or failed value; JSON has no NaN or infinity; a sample that
is not a number is never a latency. Each function says which of those it serves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def nan_to_none(value: T) -> T | None:
    """`value`, or None where it is a float NaN ("skipped" to asv). Infinities stay: asv
    stores them for a failed benchmark, and a reader shows them as they are."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def finite_or_none(value: float | None) -> float | None:
    """`value` where it is a finite number, else None (NaN, +-inf, None)."""
    return value if value is not None and math.isfinite(value) else None


def numbers(values: Iterable[float | None]) -> list[float]:
    """The values that are numbers: None and NaN dropped (asv's skipped samples)."""
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def finite_json(value: object) -> object:
    """`value` with every NaN or infinity (in dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def nan_as_worst(value: float) -> float:
    """Sort key of an error where NaN counts as worse than any number."""
    return math.inf if math.isnan(value) else value
