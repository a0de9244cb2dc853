"""Steps beside levels of 2-3 commits: a short history's first nights, a short level inside one.

The fit (`levels`) holds levels of MIN_SEGMENT commits: with 2-3 commits before a step,
or a level of 2-3 commits between two others (43 32 24 | 100 91 103 | 65 54 57 67 ms:
no partition of 10 commits into levels of 4 has three), it says nothing. Here a step
between two runs of commits is judged by the spread they show (`judge_local`): the
ln means' difference against the runs' pooled between-commit sd, floored at the
within-commit standard error of the stored samples (`Noise.within_pct`, many degrees
of freedom), t >= max(t quantile of one-sided SHORT_P, EDGE_Z of the shorter run), each
new commit EDGE_EACH_Z beyond. `short_history_steps`: histories of fewer than
2 MIN_SEGMENT commits, every split with 2+ commits before. `short_level_steps`: the
changes of a fit with levels of 2 commits (`partition`, min_segment 2) that a short
level makes, unless that level is an excursion (the level after it is back at the one
before). Status: by the history's outlier rate as edges (`edges.outlier_rate`); a
faster step is an `improvement`. Figures: docs/verdicts.md, "Short levels".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fwdasv.analysis.rules.edges import (
    EDGE_EACH_Z,
    EDGE_LEVEL_FRACTION,
    EDGE_LEVEL_Z,
    EDGE_OUTLIER_P,
    EDGE_Z,
    edge_threshold,
    outlier_rate,
)
from fwdasv.analysis.rules.levels import EDGE_MAX, MIN_SEGMENT, Z_THRESHOLD, partition, valid_logs
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import HEAD, START, Step
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core.verdicts import MIN_EFFECT_PCT

# One-sided tail of the local t: calibrated on simulated 4-commit histories (2+2 and 3+1
# at +1.5%, 0.05% noise: >= 90% found; step-free: <= 5% with any finding, the newest
# commit's 3% slow outliers included). docs/verdicts.md, "Short levels".
SHORT_P = 0.015
# A slow commit on top of a new level (its commits not one level): the least-standing
# commit must stand this many spreads of the reference beyond it.
SHORT_TOP_SPREADS = 10.0
SHORT_MIN_REFERENCE = 2  # commits before a step (the run a step is judged against)
SHORT_REGRESSION_REFERENCE = 3  # commits before a short history's step for a `regression`


@dataclass(frozen=True)
class Local:
    """A step between two runs of commits, as `judge_local` found it."""

    log_step: float  # ln(new level) - ln(old level)
    t: float
    threshold: float
    low: float  # the least-standing new commit's gap (ln, in the step's direction)


def _ss(values: np.ndarray) -> float:
    return float(np.sum((values - values.mean()) ** 2)) if values.size else 0.0


def judge_local(
    reference: np.ndarray,
    new: np.ndarray,
    within_sigma: float,
    sign: float,
    min_effect_pct: float = MIN_EFFECT_PCT,
    tail: float = SHORT_P,
) -> Local | None:
    """The step from `reference` (ln medians of the commits before) to `new` (after) in
    the direction `sign` (+1 slower), judged by the two runs' own spread; None when it
    does not stand out. The spread: their pooled sd (n_r + n_n - 2 dof), or
    `within_sigma` when larger. Where the new commits are not one level but each stands
    at least EDGE_LEVEL_FRACTION of the largest (a slow commit on top of a new level),
    the least-standing must be SHORT_TOP_SPREADS reference spreads beyond instead."""
    n_ref, n_new = int(reference.size), int(new.size)
    if n_ref < SHORT_MIN_REFERENCE or n_new < 1:
        return None
    centre = float(reference.mean())
    gaps = sign * (new - centre)
    log_step = float(np.mean(gaps))
    low, high = float(np.min(gaps)), float(np.max(gaps))
    if 100 * math.expm1(log_step) < min_effect_pct or low <= 0:
        return None
    shorter = min(n_ref, n_new, EDGE_MAX)
    ref_sd = max(math.sqrt(_ss(reference) / (n_ref - 1)), within_sigma)
    if 2 <= n_new <= EDGE_MAX and high - low > EDGE_LEVEL_Z * ref_sd * math.sqrt(2):
        if low < EDGE_LEVEL_FRACTION * high:
            return None  # not one level: an outlier beside the step, or before it
        needed = SHORT_TOP_SPREADS * ref_sd * math.sqrt(1 + 1 / n_ref)
        if _behind(reference, centre + sign * low, sign) < needed:
            return None
        return Local(sign * log_step, low / needed * SHORT_TOP_SPREADS, SHORT_TOP_SPREADS, low)
    dof = n_ref + n_new - 2
    sd = max(math.sqrt((_ss(reference) + _ss(new)) / dof), within_sigma)
    t = log_step / (sd * math.sqrt(1 / n_ref + 1 / n_new))
    threshold = max(t_isf(tail, dof), EDGE_Z[shorter])
    # Each commit of either run stands beyond the other run's level: two levels, not
    # one slow commit leaning on its neighbour.
    each_new = EDGE_EACH_Z * sd * math.sqrt(1 + 1 / n_ref)
    each_ref = EDGE_EACH_Z * sd * math.sqrt(1 + 1 / n_new)
    behind = _behind(reference, float(new.mean()), sign)
    if t < threshold or low < each_new or behind < each_ref:
        return None
    return Local(sign * log_step, t, threshold, low)


def _behind(reference: np.ndarray, level: float, sign: float) -> float:
    """How far the reference commit nearest `level` stays behind it (ln, direction `sign`)."""
    return float(np.min(sign * (level - reference)))


def _status(
    sign: float, short: int, other: np.ndarray, bounds: list[int], low: float, side: float
) -> Status:
    """An improvement when faster; else a `regression` when `short` commits (2 or more)
    standing `low` beyond are less likely as outliers in a row than EDGE_OUTLIER_P by
    the rate the `other` commits (levels starting at `bounds`) show on the `side` (+1
    slower), else `suspected`."""
    if sign < 0:
        return Status.IMPROVEMENT
    if short < 2:
        return Status.SUSPECTED
    rate = outlier_rate(other, bounds, low, side)
    return Status.REGRESSION if rate ** min(short, EDGE_MAX) <= EDGE_OUTLIER_P else Status.SUSPECTED


def _step(
    index: np.ndarray,
    logs: np.ndarray,
    split: int,
    ref: slice,
    new: slice,
    found: Local,
    status: Status,
    noise: Noise,
    edge: str | None,
) -> Step:
    old, after = float(logs[ref].mean()), float(logs[new].mean())
    return Step(
        before_index=int(index[split - 1]),
        after_index=int(index[split]),
        before=math.exp(old),
        after=math.exp(after),
        percent=100 * math.expm1(after - old),
        z=found.t,
        z_threshold=found.threshold,
        noise_pct=noise.noise_pct,
        commits_before=int(logs[ref].size),
        commits_after=int(logs[new].size),
        status=status,
        edge=edge,
    )


def _within(noise: Noise) -> float:
    return (noise.within_pct or 0.0) / 100


def short_history_steps(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    improvements: bool = False,
) -> list[Step]:
    """In a history of fewer than 2 MIN_SEGMENT commits with data, the step with the
    largest t over its threshold among every split with SHORT_MIN_REFERENCE commits
    before (each direction once; faster only with `improvements`). Its new commits at
    the head (EDGE_MAX or fewer) show it; else its 2-3 old ones at the start."""
    index, logs = valid_logs(medians)
    n = int(logs.size)
    if n >= 2 * MIN_SEGMENT or n < SHORT_MIN_REFERENCE + 1:
        return []
    # SHORT_P over the splits of a 4-commit history (2), Bonferroni: as many false alarms
    # in a longer one, which tests more.
    tail = SHORT_P * 2 / (n - SHORT_MIN_REFERENCE)
    out = []
    for sign in (1.0, -1.0) if improvements else (1.0,):
        best: tuple[float, int, Local] | None = None
        for split in range(SHORT_MIN_REFERENCE, n):
            found = judge_local(
                logs[:split], logs[split:], _within(noise), sign, min_effect_pct, tail
            )
            if found is not None and (best is None or found.t / found.threshold > best[0]):
                best = (found.t / found.threshold, split, found)
        if best is None:
            continue
        _, split, found = best
        at_head = n - split <= EDGE_MAX
        short = n - split if at_head else split
        other = logs[:split] if at_head else logs[split:]
        status = _status(
            sign, short, other, [0, int(other.size)], found.low, 1.0 if at_head else -1.0
        )
        if status == Status.REGRESSION and (split < SHORT_REGRESSION_REFERENCE or short < EDGE_MAX):
            # A short history shows few of its outliers: EDGE_MAX commits against at
            # least SHORT_REGRESSION_REFERENCE make a regression; fewer, suspected.
            status = Status.SUSPECTED
        step = _step(
            index, logs, split, slice(0, split), slice(split, n), found, status, noise,
            HEAD if at_head else START,
        )  # fmt: skip
        out.append(step)
    return sorted(out, key=lambda s: s.after_index)


def short_level_steps(
    medians: Sequence[float | None],
    noise: Noise,
    found: Sequence[Step],
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    improvements: bool = False,
) -> list[Step]:
    """The steps a level of 2-3 commits makes in a history of 2 MIN_SEGMENT commits or
    more, where `found` (the fit's) has none within EDGE_MAX commits. Candidates: the
    changes of the least-squares fit with levels of 2 commits (raw ln medians, penalty
    Z_THRESHOLD^2 in units of the series' noise) beside a shorter level than
    MIN_SEGMENT: the first level (2-3 commits; against a level that holds, the edge's
    Studentized threshold on the series' noise too), a level inside of EDGE_MAX commits
    (two are one burst of a busy neighbour often enough) whose next level is not back
    where the one before it was (`judge_local` of those two: else a run of outliers),
    and the newest level against a short one (against one that holds: `edges`)."""
    index, logs = valid_logs(medians)
    levels = _short_fit(logs, noise)
    sizes = [lv.stop - lv.start for lv in levels]
    within = _within(noise)
    accepted: list[bool] = []
    out = []
    for i in range(len(levels) - 1):
        ref, new = levels[i], levels[i + 1]
        sign = 1.0 if logs[new].mean() > logs[ref].mean() else -1.0
        judged = None
        if _candidate(sizes, i) and _not_excursion(logs, levels, sizes, i, within, sign):
            judged = judge_local(logs[ref], logs[new], within, sign, min_effect_pct)
        start = i == 0 and sizes[0] < MIN_SEGMENT and sizes[1] >= MIN_SEGMENT
        if judged is not None and start:
            # Against a level that holds, as a start edge is: by the series' noise too.
            n_short = sizes[0]
            z = abs(judged.log_step) / (noise.sigma * math.sqrt(1 / n_short + 1 / sizes[1]))
            if z < edge_threshold(n_short, noise.dof):
                judged = None
        accepted.append(judged is not None)
        if judged is None or (sign < 0 and not improvements):
            continue
        after_index = int(index[new.start])
        if any(abs(after_index - s.after_index) <= EDGE_MAX for s in found):
            continue
        # The history's outlier rate: the commits of every other level, each about its own.
        short_level = i + 1 if sizes[i + 1] < MIN_SEGMENT else i
        others = [lv for j, lv in enumerate(levels) if j != short_level]
        rest = np.concatenate([logs[lv] for lv in others])
        starts = [int(v) for v in np.cumsum([0] + [lv.stop - lv.start for lv in others])]
        status = _status(sign, sizes[short_level], rest, starts, judged.low, -1.0 if start else 1.0)
        head = i + 1 == len(levels) - 1 and sizes[i + 1] < MIN_SEGMENT
        edge = HEAD if head else START if start else None
        out.append(_step(index, logs, new.start, ref, new, judged, status, noise, edge))
    return out


def _short_fit(logs: np.ndarray, noise: Noise) -> list[slice]:
    """The levels (positions among the commits with data) of the fit with levels of 2
    commits, in a history of 2 MIN_SEGMENT commits or more; [] in a shorter one."""
    n = int(logs.size)
    if n < 2 * MIN_SEGMENT:
        return []
    bounds = [*partition(logs / noise.sigma, Z_THRESHOLD**2, min_segment=2), n]
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


def excursions(medians: Sequence[float | None], noise: Noise) -> list[int]:
    """The first commit (history index) of each run of 2-3 commits inside the history
    that the fit with levels of 2 commits sets apart, that stands out of the level
    before it (`judge_local`) and that the next level is back from (a run of outliers),
    and the first commit after it: where a level an edge is judged against must end,
    so the run does not move it. A next level that only spreads (the run's level, then a
    doubled newest commit) is not back."""
    index, logs = valid_logs(medians)
    levels = _short_fit(logs, noise)
    within = _within(noise)
    out = []
    for i in range(1, len(levels) - 1):
        before, run, after = levels[i - 1], levels[i], levels[i + 1]
        if run.stop - run.start >= MIN_SEGMENT:
            continue
        sign = 1.0 if logs[run].mean() > logs[before].mean() else -1.0
        stands = judge_local(logs[before], logs[run], within, sign) is not None
        back = judge_local(logs[run], logs[after], within, -sign) is not None
        if stands and back and judge_local(logs[before], logs[after], within, sign) is None:
            out += [int(index[run.start]), int(index[after.start])]
    return out


def _candidate(sizes: Sequence[int], i: int) -> bool:
    """Whether the change after level `i` of the short fit is one `short_level_steps`
    judges (a short level on one side, of the lengths it allows), not the fit's or an
    edge's."""
    last = len(sizes) - 1
    before, after = sizes[i], sizes[i + 1]
    if min(before, after) >= MIN_SEGMENT:
        return False  # the fit's
    if i + 1 == last and after < MIN_SEGMENT and before >= MIN_SEGMENT:
        return False  # a newest level against one that holds: the edges'
    inner = [j for j in (i, i + 1) if 0 < j < last and sizes[j] < MIN_SEGMENT]
    return all(sizes[j] >= EDGE_MAX for j in inner)


def _not_excursion(
    logs: np.ndarray,
    levels: Sequence[slice],
    sizes: Sequence[int],
    i: int,
    within: float,
    sign: float,
) -> bool:
    """Whether a short level inside the history beside change `i` is a level: the level
    after it is not back where the level before it was."""
    into = i + 2 < len(levels) and sizes[i + 1] < MIN_SEGMENT  # into a short level
    if into and judge_local(logs[levels[i]], logs[levels[i + 2]], within, sign) is None:
        return False
    if i > 0 and sizes[i] < MIN_SEGMENT:  # out of one: it was a level going in
        previous = 1.0 if logs[levels[i]].mean() > logs[levels[i - 1]].mean() else -1.0
        if judge_local(logs[levels[i - 1]], logs[levels[i]], within, previous) is None:
            return False
        if judge_local(logs[levels[i - 1]], logs[levels[i + 1]], within, previous) is None:
            return False
    return True
