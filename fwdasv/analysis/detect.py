"""Upward steps in one series, with a threshold from that series' own noise.

asv's publish fits a weighted-L1 piecewise-constant function (`asv.step_detect`)
and reports upward steps above a fixed fraction (5% by default) of the level.
A fixed fraction is wrong both ways on GPU series whose run-to-run noise spans
0.05-5%: it misses every 1% step of a quiet decode and flags the noise of a
power-capped prefill. Here the threshold is a z-score on the series' noise
(`fwdasv.analysis.noise`), plus a minimum effect in percent.

The method, on x_i = ln(median of commit i) (failed commits skipped; sigma =
noise_pct / 100 is the sd of x_i):

1. Spikes are clipped (`despike`): a value more than SPIKE_K = 2 sigma above
   what surrounds it (the medians of the SPIKE_CONTEXT = 5 values each side,
   or its two immediate neighbours) is pulled back to that + 2 sigma; the same
   downwards. A step's first commit is above its left side only, so steps are
   untouched, while one slow commit (a bad clock state), or two close
   together, weigh no more than 2 sigma each. Clipping rather than dropping is
   Huber's winsorization (Huber 1981, sect. 7.7): noise is barely touched.
2. Segmentation: the exact least-squares piecewise-constant fit of the
   cleaned values with a penalty beta = z_threshold^2 per change and every
   segment at least MIN_SEGMENT commits long (optimal partitioning, Jackson et
   al. 2005, the cost PELT prunes, Killick et al. 2012; O(n^2)). With sigma
   known, removing a change merges two neighbour segments and raises the cost
   by exactly z^2, z = (mean_after - mean_before) / (sigma sqrt(1/n1 + 1/n2)),
   so in the optimal fit every change has |z| >= z_threshold: the fit is the
   significance test, and several steps (or a step and a later improvement)
   are separated before their levels are compared.
3. Findings: the upward changes whose effect, 100 (exp(mean_after -
   mean_before) - 1), is at least `min_effect_pct` (MIN_EFFECT_PCT = 0.3%: a
   0.5% step must pass it nearly always, or half of the 0.5% steps would be
   lost to their own estimation error; below it a step is real but too small
   to chase on a GPU whose machine-to-machine offsets are 1.5%).

Persistence: every level holds MIN_SEGMENT = 4 commits, and the edge between
two levels, refitted without that limit, must not move where one of them
would hold fewer (`_settled`): a new level still forming at the end of the
history would otherwise be reported as a smaller step a few commits early.
So a step is reported once 4 commits show it, and runs of up to 3 slow
commits are outliers. That is asv's `min_size=2` made stricter, as Otava's
minimum segment length (PR #150), for the same reason.

The threshold. Z_THRESHOLD = 3.6 is a normal quantile calibrated with
`fwdasv.analysis.simulate` (scripts/verdict_quality.py): a 60-commit history
without a step gets a finding in about 0.3% of series at any noise level (the
minimum effect only helps quiet series). It is Studentized: the noise is itself
estimated (`Noise.dof` degrees of freedom), so the z threshold becomes the t
quantile of the same tail probability with those degrees of freedom: 4.0 at
60 commits, 4.5 at 30, 5.0 at 20, 7.6 at 10. For longer histories it grows with
the scan's length as the maximum of a standardized CUSUM does
(P(max > c) ~ c phi(c) ln(n / L), Siegmund 1985): c^2 grows by
2 ln(ln(n / L) / ln(60 / L)), while the t quantile shrinks with the dof (3.8 at
200 commits).

Edges (`edges`): the fit above says nothing until a step has MIN_SEGMENT
commits on each side, so a step among the newest 1-3 commits (the head), or
after only 2-3 commits at a series' start, would wait for later nights. Each
edge is tested at its known place, not scanned: the k = 1..EDGE_MAX newest
commits (raw ln medians: despiking would clip exactly them) against the last
level of the despiked fit of the commits before them (at least
EDGE_MIN_REFERENCE), longest edge first; at the start, the first k = 2..3
commits against the first level after them. An edge is reported when

- every one of its k commits stands EDGE_EACH_Z sigma beyond the reference
  (each commit shows it; `commits_after` says how many), and they are one
  level: their gaps differ by at most EDGE_LEVEL_Z sd of a difference, or
  each is at least EDGE_LEVEL_FRACTION of the largest (a slow commit on top
  of a large step); a +1% outlier right before a 2x step, or a commit 1.5
  sigma up before a 10-sigma step, is not the step's first commit, and
- the mean of the k commits has z >= the edge's threshold, which rises as the
  edge shortens (EDGE_Z: 4.5 for one commit, 4.0 for two, 3.6 for three,
  Studentized as the scan's is), and the effect is >= `min_effect_pct`.

Its status says whether the new level can still be outliers. One commit
always can: `suspected`. For k >= 2 the series' own history says how often a
commit stands that far out: m of its n commits before the edge lie at least as
far beyond their own level as the edge's least-standing commit, a rate
r = (m + 1/2) / (n + 1). k outliers in a row have probability about r^k; when
that is <= EDGE_OUTLIER_P the level excludes outliers and is a `regression`,
else `suspected`. (Slow outliers are what interference makes; a history with
many of them needs more commits before its head counts.) When the level later
holds MIN_SEGMENT commits, the fit reports it at the same first commit: the
same finding, as `findings` identifies it (series and first new commit).

An edge the noise estimate cannot decide (`undecided=True`, as for settled
steps below): on a busy box the noise of a short history is large and
uncertain (8.9% on 4.6 degrees of freedom after 8 commits), and a 3-commit
edge's Studentized threshold (9.6 there) can leave a doubled forward (z 7.5)
unreported. An edge against a reference level that holds (MIN_SEGMENT
commits) with an effect of at least the undecided floor (UNDECIDED_MIN_PCT,
UNDECIDED_EFFECT_NOISE times the noise) is judged by EDGE_Z as if the noise
were known. Its status then rests on the outlier rate above, which counts the
history's own commits and does not use the noise estimate; and only EDGE_MAX
commits can make it a `regression` (two slow commits in a row are one burst
of a busy neighbour often enough), fewer are `suspected`. Measured on
simulated 8- and 12-commit busy histories (scripts/busy_verdicts.py,
docs/measurements.md): a +60% level of 3 commits is a regression in 89-95%
of histories, where it was 33-67%; no-step histories with a regression,
0.3-0.6% (0.0-0.2% before).

Undecided large steps (`undecided=True`): on a busy box a short history's noise is
both large and uncertain (10-15% from a dozen commits, few degrees of freedom), so
the Studentized threshold (7.6 at 10 dof) can leave a +45% step of two settled
levels unreported, though it stands out plainly. The fit is repeated with the
noise taken as known (the normal quantile, Z_THRESHOLD lengthened as above); an
upward change it finds that the Studentized fit did not, with an effect of at
least UNDECIDED_EFFECT_NOISE times the noise, UNDECIDED_MIN_PCT = 5% (what asv's
publish reports by default) and `min_effect_pct`, and no other
finding within EDGE_MAX commits, is reported `suspected` (no edge): the history
cannot decide it, the interleaved A/B re-measure (`confirm`, `nightly`,
`regressions --confirm`) can, on its own processes. With many commits the two
thresholds nearly agree (4.0 against 3.6 at 60), so this adds little there.
These steps are found before the edges: an edge within EDGE_MAX commits of one
is its new level seen again, as near a fitted step (the newest 3 commits of a
level that started at the 7th of 12 stand above the mean of the 9 before them).

Improvements (`improvements=True`): the same fit's downward changes, with
the same z and effect rules, status `improvement` (settled levels only: an
improvement is not urgent, it is reported once it holds).

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
from fwdasv.analysis.status import Status
from fwdasv.core.verdicts import MIN_EFFECT_PCT

Z_THRESHOLD = 3.6  # normal quantile before Studentization, for 60 commits
SPIKE_K = 2.0  # spikes are clipped to +- this many sigma beyond their neighbourhood
SPIKE_CONTEXT = 5  # commits each side whose median is a value's neighbourhood
MIN_SEGMENT = 4  # commits at a level, the new one included, before it counts
CALIBRATION_COMMITS = 60  # the history length Z_THRESHOLD was calibrated at
DRIFT_TOLERANCE = 1  # commits between a finding and the canary's step
DRIFT_Z = 3.0  # the canary's one-sided z there
DRIFT_FRACTION = 0.5  # and at least this fraction of the finding's step
DRIFT_WINDOW = 10  # commits each side the canary's step is measured over
DRIFT_RESIDUAL_Z = 3.0  # what the canary's step leaves of a finding at this z is the code's
EDGE_MAX = MIN_SEGMENT - 1  # the longest edge tested: 4 commits are a level of the fit
EDGE_START = (3, 2)  # commits before a step at a series' start, tested longest first
EDGE_MIN_REFERENCE = 2  # commits at the reference level an edge is judged against
EDGE_Z = {1: 4.5, 2: 4.0, 3: 3.6}  # the mean's normal quantile, by commits at the edge
EDGE_EACH_Z = 1.5  # sigma each edge commit must stand beyond the reference
EDGE_LEVEL_Z = 3.0  # the edge's commits are one level: their gaps within this many sd apart,
EDGE_LEVEL_FRACTION = 1 / 3  # or each at least this fraction of the largest
EDGE_HOLD_Z = 2.0  # sigma a fitted level's commits must stand up to be more than a head spike
EDGE_SPIKE_RATIO = 3.0  # and the head must be this many times the fitted step to be its spike
EDGE_OUTLIER_P = 0.005  # chance of k outliers in a row below which a level excludes them
# A settled step the history's noise estimate is too uncertain to decide (`undecided`):
# z at least the normal quantile, the effect at least this many times the noise and at
# least UNDECIDED_MIN_PCT (asv's own default threshold: a step asv's publish reports).
UNDECIDED_EFFECT_NOISE = 2.0
UNDECIDED_MIN_PCT = 5.0
HEAD, START = "head", "start"


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
    status: Status = Status.REGRESSION  # or SUSPECTED, IMPROVEMENT, DRIFT (mark_drift)
    edge: str | None = None  # HEAD or START: found by `edges` before a level held

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
            "edge": self.edge,
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
        return values.copy()
    left_median, right_median = _neighbourhood_medians(values, SPIKE_CONTEXT)
    previous = np.concatenate(([np.nan], values[:-1]))
    following = np.concatenate((values[1:], [np.nan]))
    peak = np.fmax(previous, following)
    side_high = np.fmax(left_median, right_median)
    side_low = np.fmin(left_median, right_median)
    isolated = (values > peak + margin) & (values > side_low + margin)
    above_sides = values > side_high + margin
    high = np.fmin(np.where(isolated, peak, np.nan), np.where(above_sides, side_high, np.nan))
    out = values.copy()
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


@dataclass(frozen=True)
class _Fit:
    """The fit behind `segments`: positions are among the commits with data."""

    index: np.ndarray  # history index of each commit with data
    clean: np.ndarray  # its despiked ln median
    bounds: list[int]  # segment starts, then the number of commits with data
    threshold: float


def _fit(medians: Sequence[float | None], noise: Noise, z0: float) -> _Fit:
    index, logs = _valid(medians)
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


def detect(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    z0: float = Z_THRESHOLD,
    edge: bool = True,
    improvements: bool = False,
    undecided: bool = True,
) -> list[Step]:
    """Upward steps of one series (commit order; None/NaN for failed commits), oldest first.

    Each reported step has z >= the Studentized threshold (see `z_threshold`)
    and an effect >= `min_effect_pct`; both levels held for >= MIN_SEGMENT
    commits, and the edge between them does not want to move where one would
    hold fewer (then the new level is still forming: the step is reported
    once it has held MIN_SEGMENT commits). With `edge`, the steps at the
    series' head and start that no level holds yet (`edges`, status
    `suspected` or `regression`); with `improvements`, the downward steps
    too (status `improvement`, negative percent); with `undecided`, the large
    settled steps the noise estimate is too uncertain to decide (`suspected`).
    """
    if min_effect_pct < 0:
        raise ValueError(f"min_effect_pct {min_effect_pct} must be >= 0")
    fit = _fit(medians, noise, z0)
    out = []
    for a, b, c in zip(fit.bounds, fit.bounds[1:], fit.bounds[2:], strict=False):
        before, after = float(np.mean(fit.clean[a:b])), float(np.mean(fit.clean[b:c]))
        log_step = after - before
        percent = 100 * math.expm1(log_step)
        down = log_step < 0
        if down and not improvements:
            continue
        effect = 100 * math.expm1(abs(log_step))  # old / new - 1 for an improvement
        if log_step == 0 or effect < min_effect_pct or not _settled(fit.clean[a:c]):
            continue
        z = abs(log_step) / (noise.sigma * math.sqrt(1 / (b - a) + 1 / (c - b)))
        assert z >= fit.threshold * (1 - 1e-9), f"a change with z {z} < {fit.threshold} survived"
        out.append(
            Step(
                before_index=int(fit.index[b - 1]),
                after_index=int(fit.index[b]),
                before=math.exp(before),
                after=math.exp(after),
                percent=percent,
                z=z,
                z_threshold=fit.threshold,
                noise_pct=noise.noise_pct,
                commits_before=b - a,
                commits_after=c - b,
                status=Status.IMPROVEMENT if down else Status.REGRESSION,
            )
        )
    # The large settled steps the noise estimate cannot decide, before the edges: an edge
    # near one is its new level seen again, as near a fitted step.
    settled = _undecided(medians, noise, out, min_effect_pct) if undecided else []
    out = sorted([*out, *settled], key=_order)
    if edge:
        # An edge within EDGE_MAX commits of a step the fit reports is that step's own
        # new level seen again (its first commits sit in the edge's reference level).
        fitted = [s for s in out if s.status != Status.IMPROVEMENT]
        kept = []
        for found in edges(medians, noise, min_effect_pct=min_effect_pct, undecided=undecided):
            close = [f for f in fitted if abs(found.after_index - f.after_index) <= EDGE_MAX]
            if not close:
                kept.append(found)
            elif (
                found.edge == HEAD
                and found.percent > EDGE_SPIKE_RATIO * max(f.percent for f in close)
                and not any(_holds(medians, f, found.after_index, noise.sigma) for f in close)
            ):
                # The fit's step is the head's spike, clipped (`despike`) into a small
                # level: the commits between are at the old level. The edge is the step.
                # (Only a head far larger than the fitted step: a real 1% step whose
                # commits do not each stand 2 sigma up, beside a +2% outlier at the head,
                # is the fit's, at its own commit.)
                out = [s for s in out if s not in close]
                kept.append(found)
            elif found.edge == HEAD and all(
                _beyond(medians, f, found, noise, min_effect_pct) for f in close
            ):
                # The head stands out of the fitted step's new level too: a second step
                # on top of the first (a 2x commit after a +2.5% level), not the first's
                # new level seen again.
                kept.append(found)
        out = sorted([*out, *kept], key=_order)
    return out


def _undecided(
    medians: Sequence[float | None],
    noise: Noise,
    found: Sequence[Step],
    min_effect_pct: float,
) -> list[Step]:
    """The upward changes of the fit with the noise taken as known that `found` (the
    Studentized fit's findings) lacks: large, settled, `suspected`."""
    if not math.isfinite(noise.dof):
        return []  # the noise is known: the Studentized fit was this one
    fit = _fit(medians, replace(noise, dof=math.inf), Z_THRESHOLD)
    floor = _undecided_floor(noise, min_effect_pct)
    out = []
    for a, b, c in zip(fit.bounds, fit.bounds[1:], fit.bounds[2:], strict=False):
        before, after = float(np.mean(fit.clean[a:b])), float(np.mean(fit.clean[b:c]))
        log_step = after - before
        percent = 100 * math.expm1(log_step)
        after_index = int(fit.index[b])
        if log_step <= 0 or percent < floor or not _settled(fit.clean[a:c]):
            continue
        if any(abs(after_index - s.after_index) <= EDGE_MAX for s in found):
            continue
        out.append(
            Step(
                before_index=int(fit.index[b - 1]),
                after_index=after_index,
                before=math.exp(before),
                after=math.exp(after),
                percent=percent,
                z=log_step / (noise.sigma * math.sqrt(1 / (b - a) + 1 / (c - b))),
                z_threshold=fit.threshold,
                noise_pct=noise.noise_pct,
                commits_before=b - a,
                commits_after=c - b,
                status=Status.SUSPECTED,
            )
        )
    return out


def _undecided_floor(noise: Noise, min_effect_pct: float) -> float:
    """The least effect (%) a step the noise estimate cannot decide is reported at: a
    large step (UNDECIDED_MIN_PCT, UNDECIDED_EFFECT_NOISE times the noise)."""
    return max(min_effect_pct, UNDECIDED_MIN_PCT, UNDECIDED_EFFECT_NOISE * noise.noise_pct)


def _holds(medians: Sequence[float | None], step: Step, stop: int, sigma: float) -> bool:
    """Whether the commits of `step`'s new level before `stop` (raw medians) stand
    EDGE_HOLD_Z sigma above its old level: a level of its own, not the head's spike."""
    values = [
        math.log(m)
        for m in medians[step.after_index : stop]
        if m is not None and math.isfinite(m) and m > 0
    ]
    floor = math.log(step.before) + EDGE_HOLD_Z * sigma
    return bool(values) and all(v >= floor for v in values)


def _beyond(
    medians: Sequence[float | None], step: Step, edge: Step, noise: Noise, min_effect_pct: float
) -> bool:
    """Whether `edge`'s commits at the head stand out of `step`'s new level (its commits
    before the edge, raw medians) by the edge's own evidence (`edge_threshold`)."""
    held = [
        math.log(m)
        for m in medians[step.after_index : edge.after_index]
        if m is not None and math.isfinite(m) and m > 0
    ]
    if not held:
        return False
    k = edge.commits_after
    log_step = math.log(edge.after) - float(np.mean(held))
    if 100 * math.expm1(log_step) < min_effect_pct:
        return False
    z = log_step / (noise.sigma * math.sqrt(1 / k + 1 / len(held)))
    return z >= edge_threshold(k, noise.dof)


def _order(step: Step) -> int:
    return step.after_index


def edge_threshold(commits: int, dof: float) -> float:
    """The z an edge of `commits` commits must reach: EDGE_Z's quantile, Studentized."""
    return t_isf(NormalDist().cdf(-EDGE_Z[min(commits, EDGE_MAX)]), dof)


def _outlier_rate(values: np.ndarray, bounds: list[int], excursion: float, sign: float) -> float:
    """How often a commit before the edge stands `excursion` (ln) beyond its own level,
    on the side `sign` (+1 slower): (m + 1/2) / (n + 1)."""
    m = 0
    for a, b in itertools.pairwise(bounds):
        level = float(np.median(values[a:b]))
        m += int(np.sum(sign * (values[a:b] - level) >= excursion))
    return (m + 0.5) / (values.size + 1)


def edges(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    undecided: bool = True,
) -> list[Step]:
    """Upward steps no level holds yet: at the head (the newest 1-3 commits) or after
    only 2-3 commits at the start; at most one of each, oldest first (see the module).
    With `undecided`, also the large ones the noise estimate alone cannot decide."""
    index, logs = _valid(medians)
    sigma = noise.sigma
    limit = _undecided_floor(noise, min_effect_pct) if undecided else math.inf
    out = []
    stop = logs.size  # the start's edge is judged on the commits before the head's
    for k in range(EDGE_MAX, 0, -1):  # the head: its newest k commits
        step = _edge(index, logs, logs.size - k, k, sigma, noise, min_effect_pct, limit, HEAD)
        if step is not None and k == EDGE_MAX:
            # The commit before the edge at the edge's level too: the new level has one
            # commit more than an edge, which the fit did not hold (a short, noisy
            # history). The step is at that commit (an 8-commit history's 5th commit
            # doubled the forward; the edge of its newest 3 named the 6th).
            longer = _edge(
                index, logs, logs.size - k - 1, k + 1, sigma, noise, min_effect_pct, limit, HEAD
            )
            # Only when that commit sits nearer the edge's level than the old one: a
            # commit measured slow before a 3-commit level (1.4 1.5 1.5 2.0 2.1 | 3.6 3.4
            # 3.1 ms on a busy box) stands beyond the old level, and is not the step.
            extra = logs[logs.size - k - 1]
            if longer is not None and abs(extra - math.log(step.after)) < abs(
                extra - math.log(longer.before)
            ):
                step, k = longer, k + 1
        if step is not None:
            out.append(step)
            stop = logs.size - k
            break
    index, logs = index[:stop], logs[:stop]
    # The start: its first k commits are the old level; then, where none is, the same
    # with one slow commit among them set aside.
    tries = [(k, drop) for drop in (False, True) for k in EDGE_START]
    for k, drop in tries:
        step = _edge(index, logs, k, k, sigma, noise, min_effect_pct, limit, START, drop_slow=drop)
        if step is not None:
            out.insert(0, step)
            break
    return out


def _edge(
    index: np.ndarray,
    logs: np.ndarray,
    split: int,
    k: int,
    sigma: float,
    noise: Noise,
    min_effect_pct: float,
    undecided_pct: float,
    where: str,
    drop_slow: bool = False,
) -> Step | None:
    """The step at `split` (first commit with data at the new level, a position among
    the commits with data), the k commits of the short side tested against the
    nearest level of the other side's fit; None when it does not stand out."""
    head = where == HEAD
    short = logs[split:] if head else logs[:split]
    rest = logs[:split] if head else logs[split:]
    if rest.size < EDGE_MIN_REFERENCE or short.size != k:
        return None
    clean = despike(rest, sigma)
    threshold = z_threshold(int(rest.size), noise.dof)
    bounds = [*partition(clean / sigma, threshold * threshold), int(rest.size)]
    a, b = (bounds[-2], bounds[-1]) if head else (bounds[0], bounds[1])
    reference = float(np.mean(clean[a:b]))
    n_ref = b - a
    if n_ref < EDGE_MIN_REFERENCE:
        return None
    # ln(new level) - ln(old level): the head is the new level, the start the old one.
    gaps = short - reference if head else reference - short
    if not drop_slow:
        judged = _judge_gaps(gaps, n_ref, sigma, noise, min_effect_pct, undecided_pct)
    else:
        # A slow commit among the first few (a slow clock state, a busy neighbour) is no
        # old level: the rest of them, without it, can still show the step; suspected,
        # since fewer commits show it than the edge has. Of three, the one next to the
        # step is not set aside (it may be the new level's first: then two is the edge).
        slow = int(np.argmin(gaps))
        if head or k < 2 or (k > 2 and slow == k - 1):
            return None
        judged = _judge_gaps(
            np.delete(gaps, slow), n_ref, sigma, noise, min_effect_pct, undecided_pct
        )
        if judged is not None:
            judged = (Status.SUSPECTED, *judged[1:])
            short = np.delete(short, slow)
    if judged is None:
        return None
    status, percent, z, needed, low = judged
    if status == Status.REGRESSION:
        # How often this history shows a commit that far out on the edge's side (slower
        # at the head, faster at the start): k of them in a row are outliers, not a level.
        rate = _outlier_rate(rest, bounds, low, 1.0 if head else -1.0)
        if rate**k > EDGE_OUTLIER_P:
            status = Status.SUSPECTED
    old, new = (reference, float(np.mean(short))) if head else (float(np.mean(short)), reference)
    return Step(
        before_index=int(index[split - 1]),
        after_index=int(index[split]),
        before=math.exp(old),
        after=math.exp(new),
        percent=percent,
        z=z,
        z_threshold=needed,
        noise_pct=noise.noise_pct,
        commits_before=n_ref if head else k,
        commits_after=k if head else n_ref,
        status=status,
        edge=where,
    )


def _judge_gaps(
    gaps: np.ndarray,
    n_ref: int,
    sigma: float,
    noise: Noise,
    min_effect_pct: float,
    undecided_pct: float,
) -> tuple[Status, float, float, float, float] | None:
    """An edge's k gaps (ln, each commit's step from the reference): None when they do
    not stand out as one level; else (status before the outlier rate, percent, z,
    z needed, the smallest gap). k >= 2 commits are a `regression` candidate (EDGE_MAX
    when only the noise taken as known decides, for an effect >= `undecided_pct`)."""
    k = int(gaps.size)
    log_step = float(np.mean(gaps))
    percent = 100 * math.expm1(log_step)
    z = log_step / (sigma * math.sqrt(1 / k + 1 / n_ref))
    needed = edge_threshold(k, noise.dof)
    undecided = z < needed and n_ref >= MIN_SEGMENT
    if undecided and percent >= undecided_pct:
        # A large edge that only the noise estimate's own uncertainty (few degrees of
        # freedom: a short, busy history) keeps below its threshold, against a level that
        # holds: judged as if the noise were known (against 2-3 commits, a busy box's
        # load moving them is the step). Only EDGE_MAX commits can then be a
        # `regression`, and only by the history's outlier rate (`_edge`), which the
        # estimate's error does not enter; two slow commits in a row are one burst of a
        # busy neighbour often enough.
        needed = edge_threshold(k, math.inf)
    each = sigma * EDGE_EACH_Z * math.sqrt(1 + 1 / n_ref)
    low, high = float(np.min(gaps)), float(np.max(gaps))
    if percent < min_effect_pct or z < needed or low < each:
        return None
    spread_ok = high - low <= EDGE_LEVEL_Z * sigma * math.sqrt(2)
    if not spread_ok and low < EDGE_LEVEL_FRACTION * high:
        return None  # not one level: a slow commit before a larger step, or an outlier
    least = EDGE_MAX if undecided else 2
    return (Status.REGRESSION if k >= least else Status.SUSPECTED), percent, z, needed, low


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


def _residual_z(step: Step, canary: CanaryStep) -> float:
    """The z of what is left of `step` with the canary's step taken out of it (ln terms):
    the difference of the two steps over both their standard errors (each step's size
    over its own z), so a canary measured a little short of an environment's shift does
    not leave a "regression" of the difference."""
    log_step = math.log1p(step.percent / 100)
    log_canary = math.log1p(canary.percent / 100)
    if log_step <= 0 or step.z <= 0 or canary.z <= 0:
        return 0.0
    se = math.hypot(log_step / step.z, log_canary / canary.z)
    return (log_step - log_canary) / se


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
    by 0.2% does not explain a 2% step. And what the canary's step leaves of
    the finding must be below DRIFT_RESIDUAL_Z (over both steps' standard
    errors): the machine explains the canary's size, and a step clearly beyond
    it is the code's too. Missing a drift costs a confirmation
    run (on one machine A and B see the same environment and the finding is
    not reproduced); calling a regression drift would hide it, so the rule
    leans to regression.
    """
    out = []
    for step in findings:
        if step.status == Status.IMPROVEMENT:
            out.append(step)  # the canary tells a slower machine; a faster step stays
            continue
        needed = DRIFT_FRACTION * math.log1p(step.percent / 100)
        drift = False
        for offset in range(-tolerance, tolerance + 1):
            moved = canary_step(canary_medians, canary_noise, step.after_index + offset)
            # The machine explains the canary's size of the step, not more: what is left
            # stands on the finding's own evidence (a +105% step beside a busy box's +45%
            # canary is still the code's). Any offset within the tolerance may explain it.
            if (
                moved
                and moved.z >= DRIFT_Z
                and math.log1p(moved.percent / 100) >= needed
                and _residual_z(step, moved) < DRIFT_RESIDUAL_Z
            ):
                drift = True
                break
        out.append(replace(step, status=Status.DRIFT) if drift else step)
    return out
