"""A series' run-to-run noise, estimated from its own history.

A verdict needs the noise of the number it compares: the median of one commit's
run. GPU series differ by two orders of magnitude there (0.05% on a light
decode, several % on a power-capped prefill), so one global threshold either
misses every 1% step or cries wolf; and the in-run samples alone understate it,
because they never see a new process, a new graph capture or a new clock state.
This module estimates, per series:

- `between_pct`: the relative standard deviation of a commit's median from one
  commit to the next, from the history. Successive differences of the log
  medians, d_i = ln m_{i+1} - ln m_i, have standard deviation sqrt(2)*sigma when
  the medians are independent around a constant level (von Neumann's
  mean-square-successive-difference idea, von Neumann et al. 1941). A step
  moves one difference and a one-commit outlier two, so a robust scale of the
  differences ignores both: the biweight midvariance (Mosteller & Tukey 1977;
  astropy's `biweight_midvariance`), about a known location of 0, tuning
  constant 9 MADs, then / sqrt(2). It rejects differences beyond 9 MADs (about
  8.5 sigma) outright and downweights large ones smoothly, keeping about 60%
  of the efficiency of the plain sample variance of the differences (measured:
  `HISTORY_DOF_PER_DIFF`), where the MAD alone keeps about 37%. At 60 commits
  the estimate is within +-12% (one sd) of the truth.
- `within_pct`: the standard error of one commit's median from its own samples
  (the per-block medians asv stored), pooled over commits: a robust scale of the
  samples' log deviations from their commit's median, times sqrt(pi/2)/sqrt(n)
  (the asymptotic variance of a median of n normal values is pi/2 * s^2/n).
  It is a floor: a commit's median cannot vary less between runs than its own
  sampling error, so `noise_pct >= within_pct` always.
- `noise_pct`: what verdicts use, the history estimate shrunk towards a
  conservative prior when the history is short, and never below `within_pct`.

The prior and the shrinkage. With few commits the history estimate is itself
noisy (from 3 differences it is off by a factor 2 one time in five). The prior
says the noise is `PRIOR_NOISE_PCT` = 1% within a factor `exp(PRIOR_LOG_SD)` = 3
(one standard deviation of ln sigma): above every H200 series the measurements
saw outside power capping (0.05-0.5%), so a series without history flags only
large steps. The two are combined as normal estimates of ln sigma weighted by
their precisions: the prior's is 1 / PRIOR_LOG_SD^2, the history's 2 * nu
(ln of a scale estimate with nu degrees of freedom has variance about
1 / (2 nu)), nu = `HISTORY_DOF_PER_DIFF` * (number of differences). The
prior's weight is 7% at 10 commits, 1.2% at 60 (a bias of 1.04x on a 0.05%
series). Below `MIN_HISTORY_COMMITS` commits with data the prior is used alone.
`dof` carries nu (plus the prior's equivalent 1 / (2 PRIOR_LOG_SD^2)) so
detection can widen its threshold as a t statistic does for a short history.

Everything is in relative terms: a 100 us and a 10 ms series with the same
noise_pct are equally noisy. Inputs are plain numbers in commit order; failed
commits are empty lists and are skipped (the differences join the commits
either side, which are still neighbours in the series).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

PRIOR_NOISE_PCT = 1.0  # conservative prior for a series with little history
PRIOR_LOG_SD = math.log(3.0)  # the prior's sd of ln(noise): "within a factor 3"
MIN_HISTORY_COMMITS = 4  # commits with data (3 differences) before the history counts
RESOLUTION_PCT = 1e-4  # the least noise a history can show (1 ppm)
BIWEIGHT_C = 9.0  # Mosteller & Tukey's tuning constant, in MADs
# Effective degrees of freedom of the biweight scale of n successive differences,
# per difference: 1 / (2 var(ln estimate)) / n on Gaussian series (measured, 4000
# series each of 10-120 commits: 0.59-0.63; var(ln) = 0.0138 at 60 commits).
HISTORY_DOF_PER_DIFF = 0.6
# Consistency factor: biweight scale / sigma on Gaussian data at c = 9 about a
# known centre (measured on 10^6 values): the estimate is divided by it.
BIWEIGHT_CONSISTENCY = 1.007
SOURCES = ("history", "blend", "prior")


@dataclass(frozen=True)
class Noise:
    """A series' noise: relative standard deviation of one commit's median, in %.

    `between_pct` is the history's estimate (None with too little history),
    `within_pct` the in-run standard error of the median (None without
    samples), `noise_pct` the value verdicts use. `source` says where it
    came from: "history", "prior" or "blend" (shrunk towards the prior).
    `dof` is its effective degrees of freedom (history plus prior).
    """

    noise_pct: float
    between_pct: float | None
    within_pct: float | None
    commits_used: int
    source: str
    dof: float
    prior_pct: float = PRIOR_NOISE_PCT

    def __post_init__(self) -> None:
        assert self.source in SOURCES, f"source {self.source!r} not in {SOURCES}"
        assert self.noise_pct > 0 and math.isfinite(self.noise_pct), (
            f"noise_pct {self.noise_pct} must be positive and finite"
        )

    @property
    def sigma(self) -> float:
        """noise_pct as a standard deviation of ln(median)."""
        return self.noise_pct / 100

    def per_process(self, processes_per_commit: int) -> Noise:
        """The noise of one process's median when each history commit pooled several.

        A commit's median over P processes' samples varies about as the mean of
        P process medians, so one process varies sqrt(P) times more: the floor a
        confirmation (one median per process) needs.
        """
        if processes_per_commit < 1:
            raise ValueError(f"processes_per_commit {processes_per_commit} must be >= 1")
        return replace(self, noise_pct=self.noise_pct * math.sqrt(processes_per_commit))

    def to_json(self) -> dict[str, float | int | str | None]:
        return {
            "noise_pct": self.noise_pct,
            "between_pct": self.between_pct,
            "within_pct": self.within_pct,
            "commits_used": self.commits_used,
            "source": self.source,
            "dof": self.dof,
            "prior_pct": self.prior_pct,
        }


def commit_medians(history: Sequence[Sequence[float]]) -> list[float | None]:
    """Each commit's median (None for a commit without finite positive samples)."""
    cleaned = [_clean(samples) for samples in history]
    out: list[float | None] = [None] * len(cleaned)
    by_size: dict[int, list[int]] = {}
    for i, values in enumerate(cleaned):
        if values.size:
            by_size.setdefault(int(values.size), []).append(i)
    for rows in by_size.values():  # one vectorized median per sample count
        medians = np.median(np.stack([cleaned[i] for i in rows]), axis=1)
        for i, median in zip(rows, medians, strict=True):
            out[i] = float(median)
    return out


def _clean(samples: Sequence[float] | None) -> np.ndarray:
    values = np.asarray([] if samples is None else samples, dtype=np.float64)
    return values[np.isfinite(values) & (values > 0)]


def biweight_scale(values: Sequence[float] | np.ndarray, location: float = 0.0) -> float:
    """Biweight midvariance's square root about a known `location` (Mosteller & Tukey 1977).

    s^2 = n * sum_{|u|<1} x^2 (1 - u^2)^4 / (sum_{|u|<1} (1 - u^2)(1 - 5u^2))^2,
    x = value - location, u = x / (c * MAD), MAD = median |x|, c = BIWEIGHT_C;
    divided by BIWEIGHT_CONSISTENCY so it estimates sigma on Gaussian data.
    Values beyond c MADs get no weight: steps and outliers, in a difference series.
    0.0 for fewer than two values or when more than half are exactly `location`.
    """
    x = np.asarray(values, dtype=np.float64) - location
    x = x[np.isfinite(x)]
    if x.size < 2:
        return 0.0
    mad = float(np.median(np.abs(x)))
    if mad == 0.0:
        return 0.0
    u = x / (BIWEIGHT_C * mad)
    kept = np.abs(u) < 1
    u2 = u[kept] ** 2
    numerator = x.size * float(np.sum(x[kept] ** 2 * (1 - u2) ** 4))
    denominator = float(np.sum((1 - u2) * (1 - 5 * u2))) ** 2
    if denominator <= 0:
        return 0.0
    return math.sqrt(numerator / denominator) / BIWEIGHT_CONSISTENCY


def between_from_medians(medians: Sequence[float | None]) -> tuple[float | None, int]:
    """(relative sd of a commit's median, %, or None; commits used) from the history.

    Biweight scale of successive log differences / sqrt(2); None below
    MIN_HISTORY_COMMITS commits with data.
    """
    logs = np.log([m for m in medians if m is not None and math.isfinite(m) and m > 0])
    if logs.size < MIN_HISTORY_COMMITS:
        return None, int(logs.size)
    scale = biweight_scale(np.diff(logs)) / math.sqrt(2)
    return 100 * scale, int(logs.size)


def within_from_samples(history: Sequence[Sequence[float]]) -> float | None:
    """In-run standard error of a commit's median, %, pooled over the commits with >= 2 samples.

    Deviations of ln(sample) from ln(commit median), each commit's scaled by
    sqrt(n / (n - 1)) (deviations from an estimated centre are smaller than from
    the true one), pooled; their biweight scale s gives the standard error
    sqrt(pi / 2) * s / sqrt(n), n the median sample count.
    """
    by_size: dict[int, list[np.ndarray]] = {}
    for samples in history:
        values = _clean(samples)
        if values.size >= 2:
            by_size.setdefault(int(values.size), []).append(np.log(values))
    if not by_size:
        return None
    deviations: list[np.ndarray] = []
    counts: list[int] = []
    for size, rows in by_size.items():  # one vectorized median per sample count
        logs = np.stack(rows)
        centred = logs - np.median(logs, axis=1, keepdims=True)
        deviations.append(centred.ravel() * math.sqrt(size / (size - 1)))
        counts.extend([size] * len(rows))
    pooled = np.concatenate(deviations)
    center = float(np.median(pooled))
    scale = biweight_scale(pooled, center)
    return 100 * math.sqrt(math.pi / 2) * scale / math.sqrt(float(np.median(counts)))


def shrink(
    between_pct: float | None,
    commits_used: int,
    prior_pct: float = PRIOR_NOISE_PCT,
    prior_log_sd: float = PRIOR_LOG_SD,
) -> tuple[float, str, float]:
    """(noise %, source, dof): the history estimate shrunk towards the prior in ln(sigma).

    Precision weights: prior 1 / prior_log_sd^2, history 2 * nu with
    nu = HISTORY_DOF_PER_DIFF * (commits_used - 1). "history" when the prior's
    weight is under 5%, "prior" without a history estimate, else "blend".
    """
    prior_precision = 1 / prior_log_sd**2
    prior_dof = prior_precision / 2
    if between_pct is None or between_pct <= 0:
        return prior_pct, "prior", prior_dof
    nu = HISTORY_DOF_PER_DIFF * max(commits_used - 1, 1)
    weight = prior_precision / (prior_precision + 2 * nu)
    log_sigma = weight * math.log(prior_pct) + (1 - weight) * math.log(between_pct)
    source = "history" if weight < 0.05 else "blend"
    return math.exp(log_sigma), source, nu + prior_dof


def estimate_noise(
    history: Sequence[Sequence[float]],
    *,
    prior_pct: float = PRIOR_NOISE_PCT,
    prior_log_sd: float = PRIOR_LOG_SD,
) -> Noise:
    """A series' `Noise` from its history: per commit (commit order) the samples asv stored.

    Commits without samples (failed) are skipped. A commit stored without
    samples can be passed as its median alone (one sample): it counts for
    `between_pct` and not for `within_pct`.
    """
    medians = commit_medians(history)
    between, used = between_from_medians(medians)
    within = within_from_samples(history)
    history_pct = None
    if between is not None:
        # Between can never be below within: a history of equal medians is noise
        # below what one commit's samples resolve, not a noiseless series.
        history_pct = max(between, within or 0.0, RESOLUTION_PCT)
    noise, source, dof = shrink(history_pct, used, prior_pct, prior_log_sd)
    if within is not None and within > noise:
        noise = within
    return Noise(
        noise_pct=noise,
        between_pct=between,
        within_pct=within,
        commits_used=used,
        source=source,
        dof=dof,
        prior_pct=prior_pct,
    )


# --- Student's t, for statistics scaled by an estimated noise -------------------------


def t_sf(t: float, dof: float) -> float:
    """P(T > t) for Student's t with `dof` degrees of freedom (normal for dof = inf).

    Through the regularized incomplete beta function,
    P(|T| > t) = I_x(dof / 2, 1 / 2) with x = dof / (dof + t^2)
    (Abramowitz & Stegun 26.7.1, 26.5.2), evaluated by its continued fraction.
    """
    if not math.isfinite(dof) or dof > 1e7:
        return 0.5 * math.erfc(t / math.sqrt(2))
    if dof <= 0:
        raise ValueError(f"dof {dof} must be positive")
    x = dof / (dof + t * t)
    tail = 0.5 * _betainc(dof / 2, 0.5, x)
    return tail if t >= 0 else 1 - tail


@functools.lru_cache(maxsize=4096)
def t_isf(p: float, dof: float) -> float:
    """The t with P(T > t) = p (0 < p < 1/2), by bisection on `t_sf`."""
    if not 0 < p < 0.5:
        raise ValueError(f"p {p} must be in (0, 0.5)")
    low, high = 0.0, 1.0
    while t_sf(high, dof) > p:
        high *= 2
        if high > 1e12:
            return math.inf
    for _ in range(200):
        mid = (low + high) / 2
        if t_sf(mid, dof) > p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10 * high:
            break
    return (low + high) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (Numerical Recipes 6.4, modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1 - math.exp(log_front) * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
