"""Reading a bench JSON file's values: one `ResultsError` naming the file, case and key.

The validators of `fwdasv.core.results`: each takes a JSON value as parsed
(`object`, a `Mapping[str, object]`) and returns it typed, or raises. A number
is returned as written (an int stays an int), so a file read and written again
is byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from fwdasv.core.errors import UserError

T = TypeVar("T")


class ResultsError(UserError, ValueError):
    """A forward-bench JSON file that is missing, truncated or malformed."""


# --- reading JSON values: one ResultsError naming the file, case and key ------------------


def json_object(data: object, where: str) -> Mapping[str, object]:
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected an object, got {type(data).__name__}")
    return data


def require(data: Mapping[str, object], key: str, where: str) -> object:
    if key not in data:
        raise ResultsError(f"{where}: missing key {key!r}")
    return data[key]


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number(data: Mapping[str, object], key: str, where: str) -> float:
    """The number as written: an int stays an int, so the file is written back as read."""
    value = require(data, key, where)
    if not is_number(value):
        raise ResultsError(f"{where}: {key!r} must be a number, got {value!r}")
    return value  # type: ignore[return-value]


def integer(data: Mapping[str, object], key: str, where: str) -> int:
    value = require(data, key, where)
    if not is_int(value):
        raise ResultsError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value  # type: ignore[return-value]


def string(data: Mapping[str, object], key: str, where: str) -> str:
    value = require(data, key, where)
    if not isinstance(value, str):
        raise ResultsError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def optional(
    data: Mapping[str, object], key: str, where: str, check: Callable[[object], bool], expected: str
) -> object:
    """The value as written (an int stays an int: the file is written back as read), or None."""
    value = data.get(key)
    if value is not None and not check(value):
        raise ResultsError(f"{where}: {key!r} must be {expected} or null, got {value!r}")
    return value


def optional_number(data: Mapping[str, object], key: str, where: str) -> float | None:
    return optional(data, key, where, is_number, "a number")  # type: ignore[return-value]


def optional_int(data: Mapping[str, object], key: str, where: str) -> int | None:
    return optional(data, key, where, is_int, "an integer")  # type: ignore[return-value]


def optional_str(data: Mapping[str, object], key: str, where: str) -> str | None:
    return optional(data, key, where, lambda v: isinstance(v, str), "a string")  # type: ignore[return-value]


def measured(data: Mapping[str, object], key: str, where: str) -> float:
    """A number, or null for a non-finite one (fwdasv writes NaN as null): NaN."""
    if require(data, key, where) is None:
        return math.nan
    return number(data, key, where)


def numbers(data: Mapping[str, object], key: str, where: str) -> tuple[float, ...]:
    values = data.get(key, [])
    if not isinstance(values, list) or not all(is_number(v) for v in values):
        raise ResultsError(f"{where}: {key!r} must be a list of numbers")
    return tuple(values)


def pairs(data: object, where: str, check: Callable[[object], bool]) -> tuple[tuple[str, T], ...]:
    """A JSON object of names to values, in its order, as (name, value) pairs."""
    if data is None:
        return ()
    values = json_object(data, where)
    for name, value in values.items():
        if not check(value):
            raise ResultsError(f"{where}: {name!r} has a bad value {value!r}")
    return tuple(values.items())  # type: ignore[arg-type]
