"""Plain-text and Markdown tables, and asv-style human values, for the analysis commands.

`fwdasv regressions`, `compare` and `bisect` print the same kinds of tables
(to a terminal, into a CI log, into a pull-request comment); the formatting
lives here once so their output reads alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# asv's unit ladder for seconds (asv.util.human_time); other units print as numbers.
_TIME_UNITS = (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0))


def human_value(value: float | None, unit: str | None = "seconds") -> str:
    """A value as a person reads it: `4.13ms` for seconds, `12.5` otherwise, `n/a` for None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if unit == "seconds":
        magnitude = abs(value)
        suffix, scale = next(
            ((s, f) for s, f in _TIME_UNITS if magnitude < f * 1000), _TIME_UNITS[-1]
        )
        return f"{value / scale:.3g}{suffix}"
    return f"{value:.4g}"


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def markdown_cell(text: str) -> str:
    """A table cell: pipes escaped, line breaks flattened (commit subjects may hold either)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(markdown_cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
