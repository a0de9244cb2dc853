"""A series' levels: its ln medians, despiked, fitted piecewise constant; the steps between.

On x_i = ln(median of commit i) (failed commits skipped; sigma = noise_pct / 100):
spikes are clipped (`despike`), then the exact least-squares piecewise-constant fit
with a penalty z^2 per change and levels of at least MIN_SEGMENT commits
(`partition`) is the significance test: every change it keeps has |z| >= the
threshold (`z_threshold`, Studentized by the noise's degrees of freedom).
`level_steps` are its changes whose levels hold and whose effect is at least
`min_effect_pct`; `undecided_steps` the large upward ones only the same fit with the
noise taken as known finds. Inputs: medians in commit order (None for a failed
commit) and the series' `Noise`; outputs: `Segment`s and `Step`s. The method and its
figures: docs/verdicts.md, "Levels" and "Undecided steps".
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import Segment, Step
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core.verdicts import MIN_EFFECT_PCT

# The normal quantile before Studentization, for 60 commits: a step-free history of 60
# commits gets a finding in about 0.3% of series at any noise (simulated, docs/verdicts.md).
Z_THRESHOLD = 3.6
CALIBRATION_COMMITS = 60  # the history length Z_THRESHOLD was calibrated at
SPIKE_K = 2.0  # spikes are clipped to +- this many sigma beyond their neighbourhood
SPIKE_CONTEXT = 5  # commits each side whose median is a value's neighbourhood
MIN_SEGMENT = 4  # commits at a level, the new one included, before it counts
EDGE_MAX = MIN_SEGMENT - 1  # the most commits a new level has before the fit can hold it
# A settled step the history's noise estimate is too uncertain to decide (`undecided`):
# z at least the normal quantile, the effect at least this many times the noise and at
# least UNDECIDED_MIN_PCT (asv's own default threshold: a step asv's publish reports).
UNDECIDED_EFFECT_NOISE = 2.0
UNDECIDED_MIN_PCT = 5.0


def z_threshold(commits: int, dof: float, z0: float = Z_THRESHOLD) -> float:
    """The threshold a change's z must reach in a history of `commits`, noise with `dof`.

    z0 is lengthened for scans longer than CALIBRATION_COMMITS, then converted
    to the t quantile of the same one-sided tail probability with `dof`.
    """
    c = z0
    if commits > CALIBRATION_COMMITS:
        ratio = math.log(commits / MIN_SEGMENT) / math.log(CALIBRATION_COMMITS / MIN_SEGMENT)
        c = math.sqrt(z0 * z0 + 2 * math.log(ratio))
    tail = NormalDist().cdf(-c)
    return t_isf(tail, dof)


def _neighbourhood_medians(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per value, the median of the `width` values before it and of those after (NaN: none)."""
    n = values.size
    padded = np.concatenate((np.full(width, np.nan), values, np.full(width, np.nan)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows past the ends
        medians = np.nanmedian(windows, axis=1)
    return medians[:n], medians[width + 1 : width + 1 + n]


def despike(values: np.ndarray, sigma: float, k: float = SPIKE_K) -> np.ndarray:
    """`values` with spikes pulled back to k sigma beyond what surrounds them.

    A value is an upward spike when it is more than k sigma above the medians
    of both its neighbourhoods (SPIKE_CONTEXT values each side: one slow
    commit, or two close together), or more than k sigma above both immediate
    neighbours and above one neighbourhood (an isolated slow commit right
    before a step, whose far neighbourhood is already at the new level). It is
    moved to the lowest of those references + k sigma, so it stays with its
    own neighbours: a slow commit before a step stays at the old level, and a
    step's first commit, above its left side only, is kept. Slow commits are
    what interference makes (a clock dip, a noisy neighbour), so they are
    removed first; fast ones are then found the same way, mirrored, on what is
    left (an inlier between two slow commits is not a fast spike). Each value
    moves only as far as makes it no spike, so Gaussian noise is barely touched.
    """
    return -_despike_up(-_despike_up(values, k * sigma), k * sigma)


def _despike_up(values: np.ndarray, margin: float) -> np.ndarray:
    n = values.size
    if n < 2:
        return np.copy(values)
    left_median, right_median = _neighbourhood_medians(values, SPIKE_CONTEXT)
    previous = np.concatenate(([np.nan], values[:-1]))
    following = np.concatenate((values[1:], [np.nan]))
    peak = np.fmax(previous, following)
    side_high = np.fmax(left_median, right_median)
    side_low = np.fmin(left_median, right_median)
    isolated = (values > peak + margin) & (values > side_low + margin)
    above_sides = values > side_high + margin
    high = np.fmin(np.where(isolated, peak, np.nan), np.where(above_sides, side_high, np.nan))
    out = np.copy(values)
    up = ~np.isnan(high)
    out[up] = high[up] + margin
    return out


def partition(values: np.ndarray, penalty: float, min_segment: int = MIN_SEGMENT) -> list[int]:
    """Start positions of the segments of the least-squares fit with `penalty` per change.

    Optimal partitioning: F(j) = min_i F(i) + SSE(i, j) + penalty over
    i <= j - min_segment, F(0) = -penalty; SSE from cumulative sums. `values`
    must already be in units of sigma.
    """
    n = values.size
    if n < 2 * min_segment:
        return [0]
    s1 = np.concatenate(([0.0], np.cumsum(values)))
    s2 = np.concatenate(([0.0], np.cumsum(values * values)))

    def candidates(j: int) -> tuple[np.ndarray, np.ndarray]:
        starts = np.arange(0, j - min_segment + 1)
        lengths = j - starts
        return starts, (s2[j] - s2[starts]) - (s1[j] - s1[starts]) ** 2 / lengths

    return optimal_partition(n, penalty, candidates)


def optimal_partition(
    n: int, penalty: float, candidates: Callable[[int], tuple[np.ndarray, np.ndarray]]
) -> list[int]:
    """Start positions of the optimal partitioning of n points: F(j) = min F(i) + SSE(i, j)
    + penalty over the segments ending at j that `candidates(j)` allows (their starts i
    and SSEs), F(0) = -penalty; a j with none ends no segment."""
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        starts, sse = candidates(j)
        if starts.size == 0:
            continue
        total = best[starts] + sse + penalty
        i = int(np.argmin(total))
        best[j] = total[i]
        last[j] = starts[i]
    cuts = []
    j = n
    while j > 0:
        j = int(last[j])
        cuts.append(j)
    return sorted(cuts)


def valid_logs(medians: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """(history index, ln median) of each commit with a finite positive median."""
    kept = [(i, m) for i, m in enumerate(medians) if m is not None and math.isfinite(m) and m > 0]
    index = np.asarray([i for i, _ in kept], dtype=np.int64)
    return index, np.log(np.asarray([m for _, m in kept], dtype=np.float64))


@dataclass(frozen=True)
class _Fit:
    """The fit behind `segments`: positions are among the commits with data."""

    index: np.ndarray  # history index of each commit with data
    clean: np.ndarray  # its despiked ln median
    bounds: list[int]  # segment starts, then the number of commits with data
    threshold: float


def _fit(medians: Sequence[float | None], noise: Noise, z0: float) -> _Fit:
    index, logs = valid_logs(medians)
    if logs.size == 0:
        return _Fit(index, logs, [0], math.inf)
    clean = despike(logs, noise.sigma)
    threshold = z_threshold(int(logs.size), noise.dof, z0)
    cuts = partition(clean / noise.sigma, threshold * threshold)
    return _Fit(index, clean, [*cuts, int(logs.size)], threshold)


def _settled(values: np.ndarray, min_segment: int = MIN_SEGMENT) -> bool:
    """Whether the least-squares edge of two levels in `values`, found without a length
    limit, leaves `min_segment` values on each side (else a level is still forming)."""
    n = values.size
    sizes = np.arange(1, n)
    sums = np.cumsum(values)[:-1]
    gain = sizes * (n - sizes) / n * (sums / sizes - (values.sum() - sums) / (n - sizes)) ** 2
    edge = int(np.argmax(gain)) + 1
    return min_segment <= edge <= n - min_segment


def segments(
    medians: Sequence[float | None], noise: Noise, *, z0: float = Z_THRESHOLD
) -> list[Segment]:
    """The series' levels: the penalized fit of its despiked ln medians (see the module)."""
    fit = _fit(medians, noise, z0)
    if fit.clean.size == 0:
        return []
    return [
        Segment(
            start=int(fit.index[a]),
            stop=int(fit.index[b - 1]) + 1,
            commits=b - a,
            level=math.exp(float(np.mean(fit.clean[a:b]))),
        )
        for a, b in itertools.pairwise(fit.bounds)
    ]


def level_steps(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    z0: float = Z_THRESHOLD,
    improvements: bool = False,
) -> list[Step]:
    """The fit's upward changes (and with `improvements` its downward ones, status
    `improvement`) whose effect is at least `min_effect_pct` and whose two levels hold
    (the edge between them, refitted without a length limit, does not move where one
    would hold fewer than MIN_SEGMENT commits), oldest first."""
    fit = _fit(medians, noise, z0)
    out = []
    for a, b, c in zip(fit.bounds, fit.bounds[1:], fit.bounds[2:], strict=False):
        before, after = float(np.mean(fit.clean[a:b])), float(np.mean(fit.clean[b:c]))
        log_step = after - before
        down = log_step < 0
        if down and not improvements:
            continue
        effect = 100 * math.expm1(abs(log_step))  # old / new - 1 for an improvement
        if log_step == 0 or effect < min_effect_pct or not _settled(fit.clean[a:c]):
            continue
        step = _step(fit, (a, b, c), noise, Status.IMPROVEMENT if down else Status.REGRESSION)
        assert step.z >= fit.threshold * (1 - 1e-9), (
            f"a change with z {step.z} < {fit.threshold} survived"
        )
        out.append(step)
    return out


def undecided_steps(
    medians: Sequence[float | None],
    noise: Noise,
    found: Sequence[Step],
    min_effect_pct: float,
    *,
    improvements: bool = False,
) -> list[Step]:
    """The upward changes of the fit with the noise taken as known that `found` (the
    Studentized fit's findings) lacks within EDGE_MAX commits: large (`undecided_floor`),
    settled, `suspected`; with `improvements` the downward ones too, `improvement`."""
    if not math.isfinite(noise.dof):
        return []  # the noise is known: the Studentized fit was this one
    fit = _fit(medians, replace(noise, dof=math.inf), Z_THRESHOLD)
    floor = undecided_floor(noise, min_effect_pct)
    out = []
    for a, b, c in zip(fit.bounds, fit.bounds[1:], fit.bounds[2:], strict=False):
        before, after = float(np.mean(fit.clean[a:b])), float(np.mean(fit.clean[b:c]))
        log_step = after - before
        after_index = int(fit.index[b])
        down = log_step < 0
        effect = 100 * math.expm1(abs(log_step))
        if (down and not improvements) or log_step == 0:
            continue
        if effect < floor or not _settled(fit.clean[a:c]):
            continue
        if any(abs(after_index - s.after_index) <= EDGE_MAX for s in found):
            continue
        out.append(_step(fit, (a, b, c), noise, Status.IMPROVEMENT if down else Status.SUSPECTED))
    return out


def _step(fit: _Fit, bounds: tuple[int, int, int], noise: Noise, status: Status) -> Step:
    """The fit's change at bounds[1]: from the level of its commits [a, b) to that of
    [b, c) (means of the despiked ln medians), z by the noise."""
    a, b, c = bounds
    before, after = float(np.mean(fit.clean[a:b])), float(np.mean(fit.clean[b:c]))
    log_step = after - before
    return Step(
        before_index=int(fit.index[b - 1]),
        after_index=int(fit.index[b]),
        before=math.exp(before),
        after=math.exp(after),
        percent=100 * math.expm1(log_step),
        z=abs(log_step) / (noise.sigma * math.sqrt(1 / (b - a) + 1 / (c - b))),
        z_threshold=fit.threshold,
        noise_pct=noise.noise_pct,
        commits_before=b - a,
        commits_after=c - b,
        status=status,
    )


def undecided_floor(noise: Noise, min_effect_pct: float) -> float:
    """The least effect (%) a step the noise estimate cannot decide is reported at: a
    large step (UNDECIDED_MIN_PCT, UNDECIDED_EFFECT_NOISE times the noise)."""
    return max(min_effect_pct, UNDECIDED_MIN_PCT, UNDECIDED_EFFECT_NOISE * noise.noise_pct)
