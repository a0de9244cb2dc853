"""Latency statistics shared by the engine, the asv layer and the analyses.

One `Latency` value holds a run's replay times and every statistic derived from
them, computed the way vLLM's forward bench computes them, so a number means
the same thing whichever backend produced it. The significance test is asv's
(Mann-Whitney U, two-sided), so fwdasv's compare agrees with `asv compare`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# vLLM logs "unstable timing" above this sample spread; fwdasv marks the point.
UNSTABLE_SPREAD_PCT = 0.5

TIMERS = {
    "graph_events": "CUDA events inside a CUDA graph",
    "graph_events_rank_max": "CUDA events inside a CUDA graph, max over ranks",
    "pipeline_correlated_gpu_events_rank_max": "pipeline microbatches, GPU events on rank 0's clock",
    "host_perf_counter": "host perf_counter around an eager forward (no GPU timing)",
    "pipeline_host_perf_counter": "pipeline microbatches, host perf_counter on rank 0's clock",
}


@dataclass(frozen=True)
class Latency:
    """A forward's replay times (µs) with their statistics.

    `samples_us` are the raw replay times, `samples` blocks of `iters`
    consecutive replays; `sample_spread_pct` is the spread of the block medians
    relative to the overall median (0 with one block).
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
        times = np.asarray(self.samples_us, dtype=np.float64)
        if samples < 1 or times.size % samples:
            raise ValueError(f"{times.size} replay times do not split into {samples} samples")
        return [float(m) for m in np.median(times.reshape(samples, -1), axis=1)]

    def to_json(self, round_samples: bool = True) -> dict[str, Any]:
        """vLLM's `latency_us` block (samples rounded to 0.01 µs as vLLM does)."""
        return {
            "timer": self.timer,
            "median": self.median,
            "sample_spread_pct": self.sample_spread_pct,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "p90": self.p90,
            "count": self.count,
            "samples_us": [round(t, 2) for t in self.samples_us]
            if round_samples
            else list(self.samples_us),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Latency:
        return cls(
            timer=str(data["timer"]),
            median=float(data["median"]),
            sample_spread_pct=float(data["sample_spread_pct"]),
            mean=float(data["mean"]),
            std=float(data["std"]),
            min=float(data["min"]),
            p90=float(data["p90"]),
            count=int(data["count"]),
            samples_us=tuple(float(t) for t in data.get("samples_us", ())),
        )

    def summary(self) -> str:
        return (
            f"median {self.median:.1f} us, sample spread {self.sample_spread_pct:.2f}%, "
            f"cv {100 * self.cv:.2f}%, n={self.count} ({self.timer})"
        )


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


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test; returns (U of x, p-value).

    Exact distribution (by the recursion on counts) for small samples without
    ties, normal approximation with tie correction otherwise: the approach of
    asv's `_stats.mann_whitney_u` (Mann & Whitney 1947).
    """
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    m, n = len(x), len(y)
    if not m or not n:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    ranks = [0.0] * len(pooled)
    tie_term = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    rank_sum_x = sum(r for r, (_, who) in zip(ranks, pooled, strict=True) if who == 0)
    u = rank_sum_x - m * (m + 1) / 2
    if tie_term == 0 and m <= 20 and n <= 20:
        p = _exact_mwu_p(u, m, n)
    else:
        mu = m * n / 2
        total = m + n
        var = m * n / 12 * ((total + 1) - tie_term / (total * (total - 1)))
        if var <= 0:
            return u, 1.0
        z = (abs(u - mu) - 0.5) / math.sqrt(var)
        p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return u, min(1.0, p)


def _exact_mwu_p(u: float, m: int, n: int) -> float:
    # counts[k] = number of arrangements with U == k, by the standard recursion
    # f(m, n, k) = f(m-1, n, k-n) + f(m, n-1, k).
    table: dict[tuple[int, int], list[int]] = {}

    def counts(a: int, b: int) -> list[int]:
        if a == 0 or b == 0:
            return [1]
        key = (a, b)
        if key not in table:
            left = counts(a - 1, b)
            right = counts(a, b - 1)
            size = a * b + 1
            out = [0] * size
            for k in range(size):
                if 0 <= k - b < len(left):
                    out[k] += left[k - b]
                if k < len(right):
                    out[k] += right[k]
            table[key] = out
        return table[key]

    dist = counts(m, n)
    total = sum(dist)
    k = min(u, m * n - u)
    tail = sum(dist[: math.floor(k) + 1])
    return min(1.0, 2 * tail / total)


def min_samples_for_significance(alpha: float = SIGNIFICANCE) -> int:
    """Smallest equal sample size at which a two-sided exact test can reach `alpha`."""
    size = 1
    while 2 / math.comb(2 * size, size) >= alpha:
        size += 1
    return size


def is_different(
    x: Sequence[float], y: Sequence[float], alpha: float = SIGNIFICANCE
) -> bool | None:
    """True / False when the samples decide it; None when too few to test."""
    m, n = len(x), len(y)
    if not m or not n or 2 / math.comb(m + n, min(m, n)) >= alpha:
        return None
    return mann_whitney_u(x, y)[1] < alpha
