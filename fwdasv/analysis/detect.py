"""Upward steps in one series, with a threshold from that series' own noise.

asv's publish fits a weighted-L1 piecewise-constant function (`asv.step_detect`)
and reports upward steps above a fixed fraction (5% by default) of the level.
A fixed fraction is wrong both ways on GPU series whose run-to-run noise spans
0.05-5%: it misses every 1% step of a quiet decode and flags the noise of a
power-capped prefill. Here the threshold is a z-score on the series' noise
(`fwdasv.analysis.noise`), plus a minimum effect in percent.

The method, on x_i = ln(median of commit i) (failed commits skipped; sigma =
noise_pct / 100 is the sd of x_i):

1. Outliers are winsorized around a step-preserving smoother: r_i = the median
   of the 5 values around i (the window clamped inside the series, so the ends
   see 5 values too), and x_i is clipped to r_i +- WINSOR_K sigma. A running
   median keeps a step's edge (Tukey 1977) while removing any run of at most 2
   outliers, so one slow commit (a bad clock state) pulls no more than
   WINSOR_K sigma, and a real step is untouched.
2. Segmentation: the exact least-squares piecewise-constant fit of the
   winsorized values with a penalty beta = z_threshold^2 per change and every
   segment at least MIN_SEGMENT commits long (optimal partitioning, Jackson et
   al. 2005, the cost used by PELT, Killick et al. 2012; O(n^2)). With sigma
   known, removing a change merges two neighbour segments and raises the cost
   by exactly z^2, z = (mean_after - mean_before) / (sigma sqrt(1/n1 + 1/n2)),
   so in the optimal fit every change has |z| >= z_threshold: the fit is the
   significance test, and several steps (or a step and a later improvement)
   are separated before their levels are compared.
3. Findings: the upward changes whose effect, 100 (exp(mean_after -
   mean_before) - 1), is at least `min_effect_pct`.

Persistence: every segment has MIN_SEGMENT = 3 commits, so a new level is
reported only once it has held for 3 commits (a run of 1-2 slow commits is an
outlier, not a step; a step in the last two commits waits for the next run).
That is asv's `min_size=2` made stricter, and Otava's minimum segment length
(PR #150) for the same reason.

The threshold. Z_THRESHOLD is a normal quantile calibrated with
`fwdasv.analysis.simulate` so that a 60-commit history without a step gets a
finding in well under 1% of series (at any noise level; the minimum effect only
helps quiet series), then Studentized: the noise is itself estimated (with
`Noise.dof` degrees of freedom), so the z threshold becomes the t quantile of
the same tail probability with those degrees of freedom (4.6 at 60 commits,
much larger for short histories). For longer histories the threshold grows
with the scan's length as the maximum of a standardized CUSUM does
(P(max > c) ~ c phi(c) ln(n / L), Siegmund 1985): c^2 grows by
2 ln(ln(n / L) / ln(60 / L)).

Drift: an environment change (a driver, a power cap, another host) moves every
series of a machine at once, the canary suite included. `mark_drift` labels a
finding `drift` when the machine's canary steps up at the same place (+-1
commit). The canary is tested at that place, not scanned: its own finding
would need the scan's threshold and its own edge estimate, and missing the
canary's step on one machine would turn all its series into regressions.
Drift findings are kept out of regression verdicts.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from fwdasv.analysis.noise import Noise, t_isf

MIN_EFFECT_PCT = 0.3  # smallest step reported, whatever its significance
Z_THRESHOLD = 3.6  # normal quantile before Studentization, for 60 commits
SPIKE_K = 2.0  # spikes are clipped to +- this many sigma beyond their neighbourhood
SPIKE_CONTEXT = 5  # commits each side whose median is a value's neighbourhood
MIN_SEGMENT = 4  # commits at a level, the new one included, before it counts
CALIBRATION_COMMITS = 60  # the history length Z_THRESHOLD was calibrated at
DRIFT_TOLERANCE = 1  # commits between a finding and the canary's step
DRIFT_Z = 3.0  # the canary's one-sided z there
DRIFT_FRACTION = 0.5  # and at least this fraction of the finding's step
DRIFT_WINDOW = 10  # commits each side the canary's step is measured over

REGRESSION, DRIFT = "regression", "drift"


@dataclass(frozen=True)
class Segment:
    """Commits [start, stop) of the series (history indices) at one level."""

    start: int
    stop: int  # one past the last commit with data
    commits: int  # commits with data in it
    level: float  # exp(mean of winsorized ln medians): a robust geometric mean


@dataclass(frozen=True)
class Step:
    """An upward step: the level moved between `before_index` and `after_index`.

    Indices are positions in the history given to `detect` (failed commits
    count). `before_index` is the last commit at the old level, `after_index`
    the first at the new one; commits between them (failed) are in the range.
    """

    before_index: int
    after_index: int
    before: float  # old level (the series' unit)
    after: float  # new level
    percent: float  # 100 * (after / before - 1)
    z: float  # (ln after - ln before) / (sigma * sqrt(1/n_before + 1/n_after))
    z_threshold: float  # what z had to reach (Studentized)
    noise_pct: float
    commits_before: int
    commits_after: int
    status: str = REGRESSION

    def to_json(self) -> dict[str, float | int | str]:
        return {
            "before_index": self.before_index,
            "after_index": self.after_index,
            "before": self.before,
            "after": self.after,
            "percent": self.percent,
            "z": self.z,
            "z_threshold": self.z_threshold,
            "noise_pct": self.noise_pct,
            "commits_before": self.commits_before,
            "commits_after": self.commits_after,
            "status": self.status,
        }


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

    Slow commits are what interference makes (a clock dip, a noisy
    neighbour), so upward spikes are looked for twice: a value more than k
    sigma above the medians of both its neighbourhoods (SPIKE_CONTEXT values
    each side: one slow commit, or two close together), or more than k sigma
    above both immediate neighbours and above one neighbourhood (an isolated
    slow commit right before a step, whose far neighbourhood is already at the
    new level). It is moved to the lowest of those references + k sigma, so it
    stays with its own neighbours: a slow commit before a step stays at the
    old level, and a step's first commit, above its left side only, is kept.
    A fast commit must be k sigma below both neighbourhoods. Each value moves
    only as far as makes it no spike, so Gaussian noise is barely touched.
    """
    n = values.size
    if n < 2:
        return values.copy()
    left_median, right_median = _neighbourhood_medians(values, SPIKE_CONTEXT)
    previous = np.concatenate(([np.nan], values[:-1]))
    following = np.concatenate((values[1:], [np.nan]))
    peak = np.fmax(previous, following)
    side_high = np.fmax(left_median, right_median)
    side_low = np.fmin(left_median, right_median)
    margin = k * sigma
    isolated = (values > peak + margin) & (values > side_low + margin)
    above_sides = values > side_high + margin
    high = np.fmin(np.where(isolated, peak, np.nan), np.where(above_sides, side_high, np.nan))
    out = values.copy()
    up = ~np.isnan(high)
    out[up] = high[up] + margin
    down = values < side_low - margin
    out[down] = side_low[down] - margin
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
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=np.int64)
    for j in range(min_segment, n + 1):
        starts = np.arange(0, j - min_segment + 1)
        lengths = j - starts
        sse = (s2[j] - s2[starts]) - (s1[j] - s1[starts]) ** 2 / lengths
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


def _valid(medians: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    index = [i for i, m in enumerate(medians) if m is not None and math.isfinite(m) and m > 0]
    return np.asarray(index, dtype=np.int64), np.log([medians[i] for i in index])


def segments(
    medians: Sequence[float | None], noise: Noise, *, z0: float = Z_THRESHOLD
) -> list[Segment]:
    """The series' levels: the penalized fit of its winsorized ln medians (see the module)."""
    index, logs = _valid(medians)
    if logs.size == 0:
        return []
    sigma = noise.sigma
    clipped = despike(logs, sigma)
    threshold = z_threshold(int(logs.size), noise.dof, z0)
    cuts = partition(clipped / sigma, threshold * threshold)
    bounds = [*cuts, int(logs.size)]
    out = []
    for a, b in itertools.pairwise(bounds):
        out.append(
            Segment(
                start=int(index[a]),
                stop=int(index[b - 1]) + 1,
                commits=b - a,
                level=math.exp(float(np.mean(clipped[a:b]))),
            )
        )
    return out


def detect(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    z0: float = Z_THRESHOLD,
) -> list[Step]:
    """Upward steps of one series (commit order; None/NaN for failed commits), oldest first.

    Each reported step has z >= the Studentized threshold (see `z_threshold`)
    and an effect >= `min_effect_pct`; both levels held for >= MIN_SEGMENT commits.
    """
    if min_effect_pct < 0:
        raise ValueError(f"min_effect_pct {min_effect_pct} must be >= 0")
    levels = segments(medians, noise, z0=z0)
    commits = sum(s.commits for s in levels)
    threshold = z_threshold(commits, noise.dof, z0) if commits else math.inf
    out = []
    for old, new in itertools.pairwise(levels):
        log_step = math.log(new.level / old.level)
        z = log_step / (noise.sigma * math.sqrt(1 / old.commits + 1 / new.commits))
        percent = 100 * (new.level / old.level - 1)
        if log_step <= 0 or percent < min_effect_pct:
            continue
        assert z >= threshold * (1 - 1e-9), f"a change with z {z} < {threshold} survived the fit"
        out.append(
            Step(
                before_index=old.stop - 1,
                after_index=new.start,
                before=old.level,
                after=new.level,
                percent=percent,
                z=z,
                z_threshold=threshold,
                noise_pct=noise.noise_pct,
                commits_before=old.commits,
                commits_after=new.commits,
            )
        )
    return out


@dataclass(frozen=True)
class CanaryStep:
    """The canary's own change at a commit: z and percent over DRIFT_WINDOW commits each side."""

    after_index: int
    percent: float
    z: float


def canary_step(
    canary_medians: Sequence[float | None],
    canary_noise: Noise,
    after_index: int,
    window: int = DRIFT_WINDOW,
) -> CanaryStep | None:
    """The canary's step at `after_index`: its despiked ln medians, up to `window` commits
    with data before `after_index` against as many from it on. None: fewer than 2 a side."""
    index, logs = _valid(canary_medians)
    if logs.size < 4:
        return None
    sigma = canary_noise.sigma
    clean = despike(logs, sigma)
    split = int(np.searchsorted(index, after_index))
    before, after = clean[max(0, split - window) : split], clean[split : split + window]
    if before.size < 2 or after.size < 2:
        return None
    log_step = float(after.mean() - before.mean())
    z = log_step / (sigma * math.sqrt(1 / before.size + 1 / after.size))
    return CanaryStep(after_index, 100 * math.expm1(log_step), z)


def mark_drift(
    findings: Sequence[Step],
    canary_medians: Sequence[float | None],
    canary_noise: Noise,
    *,
    tolerance: int = DRIFT_TOLERANCE,
) -> list[Step]:
    """`findings` with status `drift` where the machine's canary stepped up with them.

    The canary (same machine, same commits, None where it failed) stepped up
    with a finding when, at the finding's first new commit +-`tolerance`, its
    own step has z >= DRIFT_Z (one-sided, at a known place: no scan) and is at
    least DRIFT_FRACTION of the finding's size (in ln terms): a canary moving
    by 0.2% does not explain a 2% step. Missing a drift costs a confirmation
    run (on one machine A and B see the same environment and the finding is
    not reproduced); calling a regression drift would hide it, so the rule
    leans to regression.
    """
    out = []
    for step in findings:
        needed = DRIFT_FRACTION * math.log1p(step.percent / 100)
        drift = False
        for offset in range(-tolerance, tolerance + 1):
            moved = canary_step(canary_medians, canary_noise, step.after_index + offset)
            if moved and moved.z >= DRIFT_Z and math.log1p(moved.percent / 100) >= needed:
                drift = True
                break
        out.append(replace(step, status=DRIFT) if drift else step)
    return out
