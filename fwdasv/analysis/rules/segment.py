"""Every change of level in a series: one weighted segmentation over all its measured commits.

Each commit i (ln median x_i) varies by its own samples' standard error s_i (the
commit's interval, `commit_errors`) plus a process-to-process component tau shared
by the series: var_i = s_i^2 + tau^2. tau is learned from the history's settled
levels (the spread of commits about the level they sit in), shrunk towards a prior
for the machine class (`class_prior_pct`: a multiple of the in-run spread, which
tells an H200 decode from a busy CPU) when the history is short. The segmentation
is the exact weighted least-squares piecewise-constant fit (optimal partitioning)
with a penalty per change: levels of 2+ commits, the first and the newest of 1+; a
commit alone between two equal levels is one odd process, set aside. Each change is
judged on its own: z of the two levels' weighted means, at least a Studentized
threshold that grows with the commits searched. Status by the evidence (`changes`):
`regression` only when the samples leave no doubt, else `suspected`; a faster level
`improvement`. The method and its figures: docs/verdicts.md, "Segments".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fwdasv.analysis.rules.levels import MIN_SEGMENT, optimal_partition
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import HEAD, START, Step
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core.verdicts import MIN_EFFECT_PCT

MAD_TO_SD = 1.4826
MEDIAN_SE = math.sqrt(math.pi / 2)  # the standard error of a median, per sd / sqrt(n)
# The nominal chance of a false change in a step-free Gaussian series, split over the
# places searched (Bonferroni): the one-sided tail SEGMENT_ALPHA / (n - 1) per place.
SEGMENT_ALPHA = 0.004
# A change beyond doubt: this one-sided tail, Studentized by tau's degrees of freedom.
DOUBT_P = 1e-7
# The machine-class prior of tau: this many times the in-run spread of one sample,
# worth PRIOR_DOF degrees of freedom of the settled levels' spread.
CLASS_RATIO = 1.0
PRIOR_FLOOR_PCT = 0.02  # tau's prior never below this (a resolution floor)
PRIOR_DOF = 3.0
# Odd processes (a slow clock state, a loaded neighbour) move a commit by up to this
# many in-run spreads of one sample (H200: +1-3% at 0.1-0.3%; a busy CPU: +10-40% at
# 2-6%): a step of fewer than two commits, or within this, is not beyond doubt.
ODD_SPREADS = 20.0
EACH_Z = 1.5  # each commit of a level of 2-3 commits stands this many sd beyond its neighbour
MIN_INSIDE = 2  # commits of a level inside the history
TAU_ITERATIONS = 3
ODD_PASSES = 2  # fits that may set odd commits aside


@dataclass(frozen=True)
class Level:
    """Commits [a, b) of the commits with data at one level (weighted mean `mean`, ln)."""

    a: int
    b: int
    mean: float
    weight: float  # sum of 1 / var_i: the mean's variance is 1 / weight


@dataclass(frozen=True)
class Fit:
    """The segmentation of one series and the noise it was judged by."""

    index: np.ndarray  # history index of each commit with data
    logs: np.ndarray
    errors: np.ndarray  # s_i: each commit's own standard error (ln)
    tau: float  # process-to-process sd (ln)
    dof: float  # tau's degrees of freedom, prior included
    spread: float  # in-run sd of one sample (ln), 0 without samples
    levels: list[Level]


def _robust_sd(logs: np.ndarray) -> float:
    return MAD_TO_SD * float(np.median(np.abs(logs - np.median(logs))))


def commit_errors(
    history: Sequence[Sequence[float]] | None, commits: int, within_pct: float | None
) -> tuple[list[float], float]:
    """(each commit's standard error of its ln median, the in-run sd of one sample): from
    its own samples (robust sd sqrt(pi/2) / sqrt(n)); a commit without 2 samples, or no
    history, gets the series' pooled `within_pct` (0 without)."""
    pooled = (within_pct or 0.0) / 100
    if history is None:
        return [pooled] * commits, 0.0
    out, spreads = [], []
    for samples in history:
        values = np.asarray([v for v in samples if math.isfinite(v) and v > 0], dtype=np.float64)
        if values.size >= 2:
            sd = _robust_sd(np.log(values))
            spreads.append(sd)
            out.append(max(MEDIAN_SE * sd / math.sqrt(values.size), 1e-6))
        else:
            out.append(pooled)
    return out, float(np.median(spreads)) if spreads else 0.0


def class_prior_pct(spread: float, noise: Noise) -> float:
    """tau's prior (%): CLASS_RATIO in-run spreads of one sample; without samples the
    series' conservative prior (`Noise.prior_pct`)."""
    if spread <= 0:
        return noise.prior_pct
    return max(CLASS_RATIO * 100 * spread, PRIOR_FLOOR_PCT)


def partition(
    logs: np.ndarray, weights: np.ndarray, penalty: float, min_inside: int = MIN_INSIDE
) -> list[int]:
    """Start positions of the levels of the weighted least-squares fit with `penalty`
    per change: levels of `min_inside` commits or more, the first and the last of 1+."""
    n = logs.size
    w1 = np.concatenate(([0.0], np.cumsum(weights)))
    wx = np.concatenate(([0.0], np.cumsum(weights * logs)))
    wxx = np.concatenate(([0.0], np.cumsum(weights * logs * logs)))

    def candidates(j: int) -> tuple[np.ndarray, np.ndarray]:
        starts = np.arange(0, j)
        lengths = j - starts
        starts = starts[(lengths >= min_inside) | (starts == 0) | (j == n)]
        w = w1[j] - w1[starts]
        s = wx[j] - wx[starts]
        return starts, (wxx[j] - wxx[starts]) - s * s / w

    return optimal_partition(n, penalty, candidates)


def _levels(logs: np.ndarray, weights: np.ndarray, starts: list[int]) -> list[Level]:
    bounds = [*starts, logs.size]
    out = []
    for a, b in itertools.pairwise(bounds):
        w = float(np.sum(weights[a:b]))
        out.append(Level(a, b, float(np.sum(weights[a:b] * logs[a:b]) / w), w))
    return out


def detection_threshold(commits: int, dof: float) -> float:
    """The z a change must reach in a history of `commits`: the one-sided tail
    SEGMENT_ALPHA / (commits - 1), Studentized by `dof`."""
    return t_isf(SEGMENT_ALPHA / max(commits - 1, 1), dof)


def _tau_from_levels(
    logs: np.ndarray, errors: np.ndarray, levels: list[Level]
) -> tuple[float | None, int]:
    """(tau from the levels' residuals, or None; their degrees of freedom): the mean
    square of each commit about its level's plain mean, scaled n / (n - 1), less the
    commits' own variance."""
    squares, own, dof = 0.0, 0.0, 0
    for lv in levels:
        k = lv.b - lv.a
        if k < 2:
            continue
        values = logs[lv.a : lv.b]
        squares += float(np.sum((values - values.mean()) ** 2))
        own += float(np.sum(errors[lv.a : lv.b] ** 2)) * (k - 1) / k
        dof += k - 1
    if dof == 0:
        return None, 0
    return math.sqrt(max(squares - own, 0.0) / dof), dof


def _blend(history: float | None, dof: int, prior: float) -> tuple[float, float]:
    """tau (ln) shrunk towards `prior` in ln by degrees of freedom: (tau, its dof). Levels
    that spread no more than their commits' own samples count as tau = prior / 4; no
    level of 2+ commits, the prior alone."""
    if history is None or history <= 0:
        history = prior / 4 if history is not None else None
    if history is None:
        return prior, PRIOR_DOF
    log_tau = (PRIOR_DOF * math.log(prior) + dof * math.log(history)) / (PRIOR_DOF + dof)
    return math.exp(log_tau), PRIOR_DOF + dof


def fit(
    medians: Sequence[float | None],
    noise: Noise,
    samples: Sequence[Sequence[float]] | None = None,
) -> Fit:
    """The series' segmentation, tau learned from its levels (see the module). A commit
    alone inside the history, beyond the levels on both its sides (`_odd_commits`), is
    one odd process: set aside, as a failed commit is, and the fit made again."""
    kept = [i for i, m in enumerate(medians) if m is not None and math.isfinite(m) and m > 0]
    index = np.asarray(kept, dtype=np.int64)
    logs = np.log(np.asarray([medians[i] for i in kept], dtype=np.float64))
    errs, spread = commit_errors(samples, len(medians), noise.within_pct)
    errors = np.asarray([errs[i] for i in kept], dtype=np.float64)
    prior = class_prior_pct(spread, noise) / 100
    use = np.ones(logs.size, dtype=bool)
    for _ in range(ODD_PASSES):
        tau, dof, levels = _fit_levels(logs[use], errors[use], prior)
        odd = _odd_commits(logs[use], errors[use], tau, dof)
        if not odd:
            break
        use[np.flatnonzero(use)[odd]] = False
    tau, dof, levels = _fit_levels(logs[use], errors[use], prior)
    return Fit(index[use], logs[use], errors[use], tau, dof, spread, levels)


def _fit_levels(
    logs: np.ndarray, errors: np.ndarray, prior: float
) -> tuple[float, float, list[Level]]:
    """(tau, its dof, the levels): the fit made with tau learned from its own levels."""
    # Each fit takes tau as known (its penalty the normal quantile): first the prior,
    # then tau learned from the levels the fit before left. Each change is then judged
    # with tau's own degrees of freedom (`changes`).
    tau, dof = prior, PRIOR_DOF
    if logs.size < 2:
        return tau, dof, _levels(logs, np.ones(logs.size), [0]) if logs.size else []
    penalty = detection_threshold(int(logs.size), math.inf) ** 2
    for _ in range(TAU_ITERATIONS):
        weights = 1 / (errors**2 + tau**2)
        levels = _levels(logs, weights, partition(logs, weights, penalty))
        history, used = _tau_from_levels(logs, errors, levels)
        tau, dof = _blend(history, used, prior)
    weights = 1 / (errors**2 + tau**2)
    return tau, dof, _levels(logs, weights, partition(logs, weights, penalty))


def _odd_commits(logs: np.ndarray, errors: np.ndarray, tau: float, dof: float) -> list[int]:
    """Positions of the commits the fit with levels of 1 commit inside the history sets
    alone, above (or below) the levels on both sides, which are one level (the step
    from one to the other below the fit's threshold): one odd process each."""
    if logs.size < 3:
        return []
    weights = 1 / (errors**2 + tau**2)
    penalty = detection_threshold(int(logs.size), math.inf) ** 2
    levels = _levels(logs, weights, partition(logs, weights, penalty, min_inside=1))
    out = []
    for before, level, after in zip(levels, levels[1:], levels[2:], strict=False):
        if level.b - level.a != 1 or (level.mean - before.mean) * (level.mean - after.mean) <= 0:
            continue
        if _z(before, after) < math.sqrt(penalty):  # the level comes back: not a step's first
            out.append(level.a)
    return out


def _z(a: Level, b: Level) -> float:
    return abs(b.mean - a.mean) / math.sqrt(1 / a.weight + 1 / b.weight)


def _stands(f: Fit, level: Level, other: Level) -> bool:
    """Each commit of `level` (2-3 commits) stands EACH_Z of its own sd beyond `other`'s
    mean, towards its own: a level, not one odd commit leaning on its neighbour."""
    k = level.b - level.a
    if k == 1 or k > 3:
        return True
    sign = 1.0 if level.mean > other.mean else -1.0
    values = f.logs[level.a : level.b]
    sd = np.sqrt(f.errors[level.a : level.b] ** 2 + f.tau**2)
    return bool(np.all(sign * (values - other.mean) >= EACH_Z * sd))


def changes(
    medians: Sequence[float | None],
    noise: Noise,
    samples: Sequence[Sequence[float]] | None = None,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
) -> list[Step]:
    """Every change of level of the series, either sign, oldest first: `Step`s with
    status `regression` (beyond doubt), `suspected` or `improvement` (faster)."""
    f = fit(medians, noise, samples)
    n = int(f.logs.size)
    if n < 2:
        return []
    threshold = detection_threshold(n, f.dof)
    doubt = t_isf(DOUBT_P, f.dof)
    out = []
    levels = f.levels
    for k in range(len(levels) - 1):
        a, b = levels[k], levels[k + 1]
        log_step = b.mean - a.mean
        effect = 100 * math.expm1(abs(log_step))
        z = _z(a, b)
        if effect < min_effect_pct or z < threshold:
            continue
        if not (_stands(f, a, b) and _stands(f, b, a)):
            continue
        up = log_step > 0
        status = Status.SUSPECTED
        if not up:
            status = Status.IMPROVEMENT
        elif _beyond_doubt(f, k, z, doubt):
            status = Status.REGRESSION
        before_n, after_n = a.b - a.a, b.b - b.a
        edge = None  # a level at an end too short for the fit of `levels` to hold
        if k + 1 == len(levels) - 1 and after_n < MIN_SEGMENT:
            edge = HEAD
        elif k == 0 and before_n < MIN_SEGMENT:
            edge = START
        out.append(
            Step(
                before_index=int(f.index[a.b - 1]),
                after_index=int(f.index[b.a]),
                before=math.exp(a.mean),
                after=math.exp(b.mean),
                percent=100 * math.expm1(log_step),
                z=z,
                z_threshold=threshold,
                noise_pct=100 * math.sqrt(f.tau**2 + float(np.median(f.errors)) ** 2),
                commits_before=before_n,
                commits_after=after_n,
                status=status,
                edge=edge,
            )
        )
    return out


def _beyond_doubt(f: Fit, k: int, z: float, doubt: float) -> bool:
    """Whether the upward change after level k leaves no doubt on the stored samples: z
    at least the DOUBT_P quantile, 2+ commits at the new level, and the new level is
    not one that comes back (the next level back where the old one was: an excursion,
    which confirm's A/B decides); 2 commits at the new level must each stand beyond
    what an odd process makes (ODD_SPREADS in-run spreads) or beyond doubt each."""
    a, b = f.levels[k], f.levels[k + 1]
    after_n = b.b - b.a
    if z < doubt or after_n < 2:
        return False
    if k + 2 < len(f.levels):
        c = f.levels[k + 2]
        if c.mean < b.mean and _z(a, c) < detection_threshold(int(f.logs.size), f.dof):
            return False
    if after_n >= 3:
        return True
    gaps = f.logs[b.a : b.b] - a.mean
    each = np.sqrt(f.errors[b.a : b.b] ** 2 + f.tau**2 + 1 / a.weight)
    odd = ODD_SPREADS * f.spread if f.spread > 0 else 0.0
    return bool(np.all(gaps > odd) and np.all(gaps / each >= doubt))
