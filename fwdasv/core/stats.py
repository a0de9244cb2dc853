"""Latency statistics shared by the engine, the asv layer and the analyses.

One `Latency` value holds a run's replay times and every statistic derived from
them, computed the way vLLM's forward bench computes them, so a number means
the same thing whichever backend produced it. The significance test is asv's
(Mann-Whitney U, two-sided, asv's tie handling and p-values), so fwdasv's
compare agrees with `asv compare`.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fwdasv.core.numbers import numbers

# vLLM logs "unstable timing" above this sample spread; fwdasv marks the point.
UNSTABLE_SPREAD_PCT = 0.5
# A `latency_us` block's statistics (floats), in vLLM's single-GPU order.
STATISTICS = ("median", "sample_spread_pct", "mean", "std", "min", "p90")


@dataclass(frozen=True)
class Latency:
    """A forward's replay times (µs) with their statistics.

    `samples_us` are the raw replay times, `samples` blocks of `iters`
    consecutive replays; `sample_spread_pct` is the spread of the block medians
    relative to the overall median (0 with one block). `to_json` writes the
    values as held: `rounded` gives vLLM's 0.01 µs samples.
    """

    timer: str
    median: float
    sample_spread_pct: float
    mean: float
    std: float
    min: float
    p90: float
    count: int
    samples_us: tuple[float, ...]
    # The key order of the JSON block this came from: vLLM's pipeline bench writes
    # another order than its single-GPU bench, and a file read and written again
    # stays byte-identical. Empty: vLLM's single-GPU order.
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_replays(cls, times_us: Sequence[float], samples: int, timer: str) -> Latency:
        times = np.asarray(times_us, dtype=np.float64)
        if samples < 1 or times.size == 0 or times.size % samples:
            raise ValueError(
                f"{times.size} replay times do not split into {samples} samples of equal size"
            )
        block_medians = np.median(times.reshape(samples, -1), axis=1)
        median = float(np.median(times))
        return cls(
            timer=timer,
            median=median,
            sample_spread_pct=spread_pct(block_medians, median),
            mean=float(times.mean()),
            std=float(times.std()),
            min=float(times.min()),
            p90=float(np.percentile(times, 90)),
            count=int(times.size),
            samples_us=tuple(float(t) for t in times),
        )

    @property
    def unstable(self) -> bool:
        return self.sample_spread_pct > UNSTABLE_SPREAD_PCT

    @property
    def cv(self) -> float:
        """Coefficient of variation of the replay times."""
        return self.std / self.mean if self.mean else math.nan

    def block_medians(self, samples: int) -> list[float]:
        """Median of each block of consecutive replays: the samples asv gets."""
        return block_medians(self.samples_us, samples)

    def rounded(self, digits: int = 2) -> Latency:
        """The replay times as vLLM's single-GPU bench writes them (to 0.01 µs); statistics kept."""
        return dataclasses.replace(
            self, samples_us=tuple(round(t, digits) for t in self.samples_us)
        )

    def to_json(self) -> dict[str, object]:
        """vLLM's `latency_us` block, in the order it was read (`layout`) or vLLM's single-GPU one."""
        data: dict[str, object] = {"timer": self.timer}
        data.update((key, getattr(self, key)) for key in STATISTICS)
        data.update(count=self.count, samples_us=list(self.samples_us))
        if not self.layout:
            return data
        return {key: data[key] for key in (*self.layout, *data) if key in data}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Latency:
        """The block as written (validated by `fwdasv.core.results`, which reads whole files)."""
        samples = data.get("samples_us", ())
        return cls(
            timer=str(data["timer"]),
            **{key: _float(data[key]) for key in STATISTICS},
            count=int(_float(data["count"])),
            samples_us=tuple(_float(t) for t in samples) if isinstance(samples, Sequence) else (),
            layout=tuple(data),
        )

    def summary(self) -> str:
        return (
            f"median {self.median:.1f} us, sample spread {self.sample_spread_pct:.2f}%, "
            f"cv {100 * self.cv:.2f}%, n={self.count} ({self.timer})"
        )


def _float(value: object) -> float:
    if not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def block_medians(values: Sequence[float], samples: int) -> list[float]:
    """The median of each of `samples` blocks of consecutive values (replay times, or
    ratios of them)."""
    array = np.asarray(values, dtype=np.float64)
    if samples < 1 or array.size % samples:
        raise ValueError(f"{array.size} replay times do not split into {samples} samples")
    return [float(m) for m in np.median(array.reshape(samples, -1), axis=1)]


def spread_pct(block_medians: Sequence[float], median: float) -> float:
    """100 * (max - min of the block medians) / median."""
    values = np.asarray(block_medians, dtype=np.float64)
    if values.size == 0 or not median:
        return 0.0
    return float(100 * (values.max() - values.min()) / median)


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


# --- significance -----------------------------------------------------------------

SIGNIFICANCE = 0.002  # asv's threshold for `is_different`


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[int, float]:
    """Two-sided Mann-Whitney U test exactly as asv's `_stats.mann_whitney_u`; (U, p).

    U counts the pairs with x > y. Ties are broken conservatively: of all ways
    to break them, the one least significant is used (U moves towards m*n/2).
    The p-value is exact (the distribution of U by the recursion
    r(m, n, u) = r(m, n-1, u) + r(m-1, n, u-n), Mann & Whitney 1947) when
    neither sample has more than 20 values, else the normal approximation
    without continuity or tie correction, as asv does. Matching asv matters:
    `fwdasv compare` must call a step different exactly when `asv compare` does.
    """
    xs = [float(v) for v in x]
    ys = sorted(float(v) for v in y)
    m, n = len(xs), len(ys)
    if not m or not n:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    u = ties = 0
    for value in xs:
        below = bisect.bisect_left(ys, value)
        u += below
        ties += bisect.bisect_right(ys, value) - below
    half = m * n // 2
    if u <= half <= u + ties:
        ties = half - u
    ux_low = min(u, m * n - u)
    ux_high = min(u + ties, m * n - (u + ties))
    if ux_low >= ux_high:
        ux = ux_low
    else:
        u += ties
        ux = ux_high
    if max(m, n) <= 20:
        counts = _mwu_counts(m, n)
        total = math.comb(m + n, m)
        lower = sum(counts[: ux + 1])
        upper = total - sum(counts[: max(half, m * n - ux - 1) + 1])
        p = (lower + upper) / total
    else:
        z = (ux - m * n / 2) / math.sqrt(m * n * (m + n + 1) / 12)
        p = math.erfc(-z / math.sqrt(2))
    return u, p


@functools.lru_cache(maxsize=512)
def _mwu_counts(m: int, n: int) -> tuple[int, ...]:
    """counts[u]: orderings of m x-values and n y-values with U == u (exact integers)."""
    if m == 0 or n == 0:
        return (1,)
    left = _mwu_counts(m - 1, n)  # the largest value is an x: it beats all n y-values
    right = _mwu_counts(m, n - 1)  # the largest value is a y
    out = [0] * (m * n + 1)
    for k, count in enumerate(left):
        out[k + n] += count
    for k, count in enumerate(right):
        out[k] += count
    return tuple(out)


def min_samples_for_significance(alpha: float = SIGNIFICANCE) -> int:
    """Smallest equal sample size at which a two-sided exact test can reach `alpha`."""
    size = 1
    while 2 / math.comb(2 * size, size) >= alpha:
        size += 1
    return size


def is_different(
    x: Sequence[float], y: Sequence[float], alpha: float = SIGNIFICANCE
) -> bool | None:
    """True / False when the samples decide it; None when too few to test.

    As asv's `_stats.is_different` with samples: NaNs are dropped, then the
    Mann-Whitney p-value is compared with `alpha`. Where even the most extreme
    ordering (p = 2 / C(m+n, m)) cannot reach `alpha`, asv falls back to
    comparing confidence intervals; fwdasv says None instead.
    """
    xs, ys = numbers(x), numbers(y)
    if not can_reach(len(xs), len(ys), alpha):
        return None
    return mann_whitney_u(xs, ys)[1] < alpha


def can_reach(m: int, n: int, alpha: float = SIGNIFICANCE) -> bool:
    """Whether the exact two-sided test on m and n values can reach `alpha` at all (its
    most extreme ordering has p = 2 / C(m+n, m))."""
    return bool(m and n) and 2 / math.comb(m + n, min(m, n)) < alpha
