"""A series' run-to-run noise, estimated from its own history.

Input: per commit (commit order) the samples asv stored; failed commits are empty
and skipped. Output: `Noise`, the relative sd (%) of one commit's median, with its
degrees of freedom. `between_pct` is the biweight scale of successive ln-median
differences / sqrt(2) (steps and outliers move one or two differences and get no
weight); `within_pct` the in-run standard error of a median, a floor; `noise_pct`
the history's estimate shrunk towards a conservative prior (PRIOR_NOISE_PCT within
a factor 3) by precision weights, never below `within_pct`. Everything is relative:
a 100 us and a 10 ms series of the same noise_pct are equally noisy. The method
and its figures: docs/verdicts.md, "Noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

# A conservative prior for a series with little history: above every H200 series seen
# outside power capping (0.05-0.5%), so a series without history flags only large steps.
PRIOR_NOISE_PCT = 1.0
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
        return asdict(self)


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
