"""Steps at the ends of a history that no level holds yet: the head and a series' start.

The fit (`levels`) needs MIN_SEGMENT commits on each side of a step. An edge is
tested at its known place, not scanned: the k = 1..EDGE_MAX newest commits (raw ln
medians) against the last level of the despiked fit of the commits before them, and
a series' first k = 3 or 2 commits against the first level after them. An edge is
reported when each of its commits stands EDGE_EACH_Z sigma beyond that level, they
are one level, their mean has z >= EDGE_Z[k] (Studentized) and the effect is at
least `min_effect_pct`. Its status: one commit is `suspected`; k >= 2 are a
`regression` when k outliers in a row are less likely than EDGE_OUTLIER_P by the
history's own outlier rate, else `suspected`; a faster edge is an `improvement`.
Inputs: medians in commit order (None for a failed commit), the series' `Noise`, and
the steps already found (`cuts`: a reference level ends at them); output: `Step`s
with `edge` set. The method and its figures: docs/verdicts.md, "Edges".
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np

from fwdasv.analysis.rules.levels import (
    EDGE_MAX,
    MIN_SEGMENT,
    despike,
    partition,
    undecided_floor,
    valid_logs,
    z_threshold,
)
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import HEAD, START, Step
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core.verdicts import MIN_EFFECT_PCT

EDGE_START = (3, 2)  # commits before a step at a series' start, tested longest first
EDGE_MIN_REFERENCE = 2  # commits at the reference level an edge is judged against
# The mean's normal quantile, by commits at the edge: a shorter edge needs more, as the
# scan's Z_THRESHOLD (3.6) does for three commits.
EDGE_Z = {1: 4.5, 2: 4.0, 3: 3.6}
# One commit at the head is always `suspected` (confirm decides it): Studentized, its
# quantile is this one, which finds 98% of +2% newest commits on 30 commits at 0.2% noise
# (4.5: 76%) and leaves step-free 30- and 60-commit histories with a finding in 3.6%
# (their slow outlier commits at the head). Taken as known (a busy box's undecided
# edge), EDGE_Z[1] stands: there 10% of commits are slow outliers.
EDGE_HEAD1_Z = 3.3
EDGE_EACH_Z = 1.5  # sigma each edge commit must stand beyond the reference
EDGE_LEVEL_Z = 3.0  # the edge's commits are one level: their gaps within this many sd apart,
EDGE_LEVEL_FRACTION = 1 / 3  # or each at least this fraction of the largest
EDGE_OUTLIER_P = 0.005  # chance of k outliers in a row below which a level excludes them


def edge_threshold(commits: int, dof: float) -> float:
    """The z an edge of `commits` commits must reach: EDGE_Z's quantile (EDGE_HEAD1_Z for
    one commit with the noise estimated), Studentized by `dof`."""
    z = EDGE_HEAD1_Z if commits == 1 and math.isfinite(dof) else EDGE_Z[min(commits, EDGE_MAX)]
    return t_isf(NormalDist().cdf(-z), dof)


def outlier_rate(values: np.ndarray, bounds: list[int], excursion: float, sign: float) -> float:
    """How often a commit of `values` (ln, in levels starting at `bounds`) stands
    `excursion` beyond its own level's median, on the side `sign` (+1 slower):
    (m + 1/2) / (n + 1)."""
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
    improvements: bool = False,
    cuts: Sequence[int] = (),
) -> list[Step]:
    """Upward steps no level holds yet: at the head (the newest 1-3 commits) or after
    only 2-3 commits at the start; at most one of each, oldest first (see the module).
    With `undecided`, also the large ones the noise estimate alone cannot decide; with
    `improvements`, a faster head or start too where no slower one is (status
    `improvement`). `cuts`: first commits (history indices) of steps found otherwise
    (a short level's): the reference level an edge is judged against ends there."""
    out = _edges(*_edge_judge(medians, noise, min_effect_pct, undecided, 1.0, cuts))
    if improvements:
        faster = _edges(*_edge_judge(medians, noise, min_effect_pct, undecided, -1.0, cuts))
        taken = {s.edge for s in out}
        out = sorted(
            [*out, *(s for s in faster if s.edge not in taken)], key=lambda s: s.after_index
        )
    return out


def _edges(index: np.ndarray, logs: np.ndarray, edge: Callable[..., Step | None]) -> list[Step]:
    """`edges` in one direction, the one `edge` (`_edge_judge`) is bound to."""
    out = []
    stop = logs.size  # the start's edge is judged on the commits before the head's
    for k in range(EDGE_MAX, 0, -1):  # the head: its newest k commits
        step = edge(index, logs, logs.size - k, k, where=HEAD)
        if step is not None and k == EDGE_MAX:
            # The commit before the edge at the edge's level too: the new level has one
            # commit more than an edge, which the fit did not hold (a short, noisy
            # history). The step is at that commit (an 8-commit history's 5th commit
            # doubled the forward; the edge of its newest 3 named the 6th).
            longer = edge(index, logs, logs.size - k - 1, k + 1, where=HEAD)
            # Only when that commit sits nearer the edge's level than the old one: a
            # commit measured slow before a 3-commit level (1.4 1.5 1.5 2.0 2.1 | 3.6 3.4
            # 3.1 ms on a busy box) stands beyond the old level, and is not the step.
            extra = logs[logs.size - k - 1]
            if longer is not None and abs(extra - _new_level(step)) < abs(
                extra - _old_level(longer)
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
        step = edge(index, logs, k, k, where=START, drop_slow=drop)
        if step is not None:
            out.insert(0, step)
            break
    return out


def rejudge_edge(
    medians: Sequence[float | None],
    noise: Noise,
    step: Step,
    cuts: Sequence[int],
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    undecided: bool = True,
) -> Step | None:
    """`step`, an edge `edges` found, judged again with its reference level ended at
    `cuts` (history indices where other steps were found); None where it does not stand
    out against that level."""
    sign = -1.0 if step.status == Status.IMPROVEMENT else 1.0
    index, logs, edge = _edge_judge(medians, noise, min_effect_pct, undecided, sign, cuts)
    split = int(np.searchsorted(index, step.after_index))
    k = int(logs.size) - split if step.edge == HEAD else split
    where = step.edge or START
    judged = edge(index, logs, split, k, where=where, drop_slow=False)
    if judged is None and where == START:
        judged = edge(index, logs, split, k, where=where, drop_slow=True)
    return judged


def _edge_judge(
    medians: Sequence[float | None],
    noise: Noise,
    min_effect_pct: float,
    undecided: bool,
    sign: float,
    cuts: Sequence[int],
) -> tuple[np.ndarray, np.ndarray, Callable[..., Step | None]]:
    """(history index, ln median) of the commits with data, and `_edge` with the series'
    settings bound: its noise, the undecided floor (or none), the direction and the cuts
    as positions among the commits with data (where a level found otherwise starts)."""
    index, logs = valid_logs(medians)
    edge = functools.partial(
        _edge, sigma=noise.sigma, noise=noise, min_effect_pct=min_effect_pct,
        undecided_pct=undecided_floor(noise, min_effect_pct) if undecided else math.inf,
        sign=sign, cuts=sorted({int(np.searchsorted(index, c)) for c in cuts}),
    )  # fmt: skip
    return index, logs, edge


def _new_level(step: Step) -> float:
    """ln of the level the edge's own commits are at (the head's new one, the start's old)."""
    return math.log(step.after if step.edge == HEAD else step.before)


def _old_level(step: Step) -> float:
    return math.log(step.before if step.edge == HEAD else step.after)


def _edge(
    index: np.ndarray,
    logs: np.ndarray,
    split: int,
    k: int,
    *,
    sigma: float,
    noise: Noise,
    min_effect_pct: float,
    undecided_pct: float,
    where: str,
    sign: float = 1.0,
    cuts: Sequence[int] = (),
    drop_slow: bool = False,
) -> Step | None:
    """The step at `split` (first commit with data at the new level, a position among
    the commits with data), the k commits of the short side tested against the
    nearest level of the other side's fit (ended at `cuts`, positions among the commits
    with data); None when it does not stand out in the direction `sign` (+1 slower)."""
    head = where == HEAD
    short = logs[split:] if head else logs[:split]
    rest = logs[:split] if head else logs[split:]
    if rest.size < EDGE_MIN_REFERENCE or short.size != k:
        return None
    # The levels of the other side: the fit's, ended where a level found otherwise starts;
    # spikes are judged within each run between those cuts (a 2-commit level next to a
    # cut is no spike of the level beyond it).
    offset = 0 if head else split
    inside = [c - offset for c in cuts if 0 < c - offset < rest.size]
    runs = itertools.pairwise([0, *sorted(set(inside)), int(rest.size)])
    clean = np.concatenate([despike(rest[a:b], sigma) for a, b in runs])
    threshold = z_threshold(int(rest.size), noise.dof)
    bounds = sorted({*partition(clean / sigma, threshold * threshold), *inside, int(rest.size)})
    a, b = (bounds[-2], bounds[-1]) if head else (bounds[0], bounds[1])
    reference = float(np.mean(clean[a:b]))
    n_ref = b - a
    if n_ref < EDGE_MIN_REFERENCE:
        return None
    # ln(new level) - ln(old level): the head is the new level, the start the old one.
    gaps = sign * (short - reference if head else reference - short)
    if not drop_slow:
        judged = _judge_gaps(gaps, n_ref, sigma, noise, min_effect_pct, undecided_pct)
    else:
        # A slow commit among the first few (a slow clock state, a busy neighbour) is no
        # old level: the rest of them, without it, can still show the step; suspected,
        # since fewer commits show it than the edge has. Of three, the one next to the
        # step is not set aside (it may be the new level's first: then two is the edge).
        # A faster start keeps all its commits: setting one aside would pick the slow ones.
        slow = int(np.argmin(gaps))
        if head or sign < 0 or k < 2 or (k > 2 and slow == k - 1):
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
        rate = outlier_rate(rest, bounds, low, sign if head else -sign)
        if rate**k > EDGE_OUTLIER_P:
            status = Status.SUSPECTED
    if sign < 0:
        status = Status.IMPROVEMENT
    old, new = (reference, float(np.mean(short))) if head else (float(np.mean(short)), reference)
    return Step(
        before_index=int(index[split - 1]),
        after_index=int(index[split]),
        before=math.exp(old),
        after=math.exp(new),
        percent=percent if sign > 0 else 100 * math.expm1(new - old),
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
