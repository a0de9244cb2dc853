"""The one rule that compares two commits' samples, shared by compare and bisect.

Both ask the same question of two lists of samples: how far apart are the
medians (the ratio after / before), and do the samples say they differ
(asv's test: two-sided Mann-Whitney U, different when p < alpha; None when
there are too few samples for the test to reach alpha at all). What each does
with the answer differs (compare adds asv's CI fallback and reports a verdict;
bisect looks in the direction of the step): that stays with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fwdasv.core import stats
from fwdasv.core.errors import UserError

DEFAULT_ALPHA = stats.SIGNIFICANCE


class RuleError(UserError, ValueError):
    """A factor or significance level that cannot be used."""


def check_rule(factor: float, alpha: float) -> None:
    """One clear error for a factor below 1 or an alpha outside (0, 1)."""
    if not factor >= 1:
        raise RuleError(f"--factor {factor}: must be >= 1 (1.05 = 5%)")
    if not 0 < alpha < 1:
        raise RuleError(f"--alpha {alpha}: must be between 0 and 1")


def finite(values: Sequence[float | None]) -> list[float]:
    """The samples that are numbers (asv stores NaN for a skipped sample)."""
    return [float(v) for v in values if v is not None and not math.isnan(v)]


@dataclass(frozen=True)
class SampleTest:
    """before -> after on the samples: the median ratio and what Mann-Whitney says."""

    ratio: float | None  # median(after) / median(before); None without samples
    different: bool | None  # p < alpha; None: too few samples to test (or none)
    p_value: float | None = None

    def beyond(self, factor: float, direction: int) -> bool:
        """Whether the ratio moved beyond `factor` in `direction` (+1 slower, -1 faster)."""
        if self.ratio is None:
            return False
        return self.ratio > factor if direction > 0 else self.ratio < 1 / factor


def sample_test(
    before: Sequence[float], after: Sequence[float], alpha: float = DEFAULT_ALPHA
) -> SampleTest:
    xs, ys = finite(before), finite(after)
    if not xs or not ys:
        return SampleTest(None, None)
    before_median = stats.median(xs)
    ratio = stats.median(ys) / before_median if before_median else math.inf
    different = stats.is_different(xs, ys, alpha)
    p_value = None if different is None else stats.mann_whitney_u(xs, ys)[1]
    return SampleTest(ratio, different, p_value)
