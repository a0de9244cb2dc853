"""Steps in one series, each judged by that series' own noise: levels, edges, undecided steps.

`detect` composes the rules: the steps between two levels that hold (`levels`), the
large settled steps the noise estimate is too uncertain to decide (`suspected`), the
steps beside levels of 2-3 commits (`short`: a short history, a short level), and
the steps at the history's head and start that no level holds yet (`edges`), an edge
near a fitted step counted once; then every change of the whole-series segmentation
(`segment`) those rules left out or placed on part of the series; last, each step's size
told from the levels its neighbours leave it (`ended_at_neighbours`). Input: a series'
medians in commit order (None or NaN for a failed commit), its `Noise`
(`fwdasv.analysis.rules.noise`) and optionally each commit's samples; output: `Step`s,
oldest first. Drift is marked afterwards (`fwdasv.analysis.rules.drift`). Where asv's
publish flags a fixed 5% of the level, a GPU series' noise spans 0.05-5%: here the
threshold is a z-score on the series' own noise plus a minimum effect in percent.
How each rule decides, with its figures: docs/verdicts.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from fwdasv.analysis.rules.edges import edge_threshold, edges, rejudge_edge
from fwdasv.analysis.rules.levels import (
    EDGE_MAX,
    MIN_SEGMENT,
    Z_THRESHOLD,
    level_steps,
    undecided_steps,
    valid_logs,
)
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.segment import changes
from fwdasv.analysis.rules.short import excursions, short_history_steps, short_level_steps
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import HEAD, START, Step
from fwdasv.core.verdicts import MIN_EFFECT_PCT

EDGE_HOLD_Z = 2.0  # sigma a fitted level's commits must stand up to be more than a head spike
EDGE_SPIKE_RATIO = 3.0  # and the head must be this many times the fitted step to be its spike
# A smaller step inside a step's level ends it too at this z (over twice the fit's threshold):
# noise-sized ones would leave a short level picked at an extreme (docs/verdicts.md).
END_LEVEL_Z = 8.0


def detect(
    medians: Sequence[float | None],
    noise: Noise,
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    z0: float = Z_THRESHOLD,
    edge: bool = True,
    improvements: bool = False,
    undecided: bool = True,
    samples: Sequence[Sequence[float]] | None = None,
    segments: bool = True,
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
    With `edge` and `segments`, every change of the whole-series segmentation (`segment.changes`, each
    commit weighed by its own `samples` where given) that those rules left
    unreported, and their `suspected` steps the segmentation finds beyond doubt made
    `regression` (`with_segments`).
    """
    if min_effect_pct < 0:
        raise ValueError(f"min_effect_pct {min_effect_pct} must be >= 0")
    out = level_steps(
        medians, noise, min_effect_pct=min_effect_pct, z0=z0, improvements=improvements
    )
    # The large settled steps the noise estimate cannot decide, before the edges: an edge
    # near one is its new level seen again, as near a fitted step.
    settled = (
        undecided_steps(medians, noise, out, min_effect_pct, improvements=improvements)
        if undecided
        else []
    )
    out = sorted([*out, *settled], key=_order)
    # Levels of 2-3 commits, which the fit cannot hold: a short history, or a short level
    # between two others. An edge then ends its reference level at them, a faster one too
    # (listed only with `improvements`).
    short = [
        *short_history_steps(medians, noise, min_effect_pct=min_effect_pct, improvements=True),
        *short_level_steps(medians, noise, out, min_effect_pct=min_effect_pct, improvements=True),
    ]
    short = [s for s in short if edge or s.edge is None]  # at an edge: only with `edge`
    # ... and where a run of 2-3 outlier commits inside the history begins and ends.
    cuts = [s.after_index for s in short] + excursions(medians, noise)
    short = [s for s in short if improvements or s.status != Status.IMPROVEMENT]
    out = sorted([*out, *short], key=_order)
    if edge:
        out = _with_edges(out, medians, noise, min_effect_pct, undecided, improvements, cuts)
    if edge and segments:
        found = changes(medians, noise, samples, min_effect_pct=min_effect_pct)
        out = with_segments(out, found, improvements=improvements)
    unlisted: list[Step] = []
    if out and not improvements:
        # The speed-ups not listed end their neighbours' levels too (`ended_at_neighbours`).
        faster = detect(
            medians,
            noise,
            min_effect_pct=min_effect_pct,
            z0=z0,
            edge=edge,
            improvements=True,
            undecided=undecided,
            samples=samples,
            segments=segments,
        )
        unlisted = [s for s in faster if s.status == Status.IMPROVEMENT]
    return ended_at_neighbours(out, medians, noise, unlisted)


def ended_at_neighbours(
    steps: Sequence[Step],
    medians: Sequence[float | None],
    noise: Noise,
    unlisted: Sequence[Step] = (),
) -> list[Step]:
    """`steps` with each one's levels ended at a step inside them (of `steps`, or
    `unlisted`: the speed-ups not listed without `improvements`) at least its own size or
    of z >= END_LEVEL_Z, and its size (levels, percent, z, commits a side) told from the
    commits left. The fit holds no level of 2-3 commits, so a step found beside one by
    `short` or `edges` otherwise has its level run through it to the level beyond. A
    smaller step of lower z is left in the level: where it is noise, the short level it
    leaves sits at an extreme the noise picked. Sizes only: each status is its rule's,
    and a step the shorter levels would turn round is left as it was.
    docs/verdicts.md, "Short levels"."""
    index, logs = valid_logs(medians)
    at = {int(i): k for k, i in enumerate(index)}
    others = [*steps, *unlisted]
    out = []
    for step in steps:
        b, a = at.get(step.before_index), at.get(step.after_index)
        if b is None or a is None:
            out.append(step)
            continue
        size = abs(math.log1p(step.percent / 100))
        start, stop = b + 1 - step.commits_before, a + step.commits_after
        for other in others:
            o = at.get(other.after_index)
            if o is None or o == a:
                continue
            if abs(math.log1p(other.percent / 100)) < size and other.z < END_LEVEL_Z:
                continue
            if start < o <= b:
                start = o
            elif a < o < stop:
                stop = o
        if (start, stop) == (b + 1 - step.commits_before, a + step.commits_after):
            out.append(step)
            continue
        before, after = float(np.mean(logs[start : b + 1])), float(np.mean(logs[a:stop]))
        log_step = after - before
        if log_step == 0 or (log_step < 0) != (step.percent < 0):
            out.append(step)
            continue
        n_before, n_after = b + 1 - start, stop - a
        out.append(
            dataclasses.replace(
                step,
                before=math.exp(before),
                after=math.exp(after),
                percent=100 * math.expm1(log_step),
                z=abs(log_step) / (noise.sigma * math.sqrt(1 / n_before + 1 / n_after)),
                commits_before=n_before,
                commits_after=n_after,
            )
        )
    return out


def with_segments(out: Sequence[Step], found: Sequence[Step], *, improvements: bool) -> list[Step]:
    """`out` (the rules' steps) with the segmentation's changes (`found`). A step at a
    change's commit, of its sign, stays, made `regression` where the change is beyond
    doubt; a step beside a short level or at an edge (placed by a rule that sees only
    part of the series) with a change of its sign within EDGE_MAX commits is replaced
    by that change (`_displaces`); a change within EDGE_MAX commits of a step between
    two levels that hold, or of one it does not displace, is that step. Faster changes
    only with `improvements`."""
    changes_ = [c for c in found if improvements or c.status != Status.IMPROVEMENT]

    def sign(step: Step) -> bool:
        return step.status == Status.IMPROVEMENT

    at = {(c.after_index, sign(c)): c for c in changes_}
    kept: list[Step] = []
    matched: list[Step] = []  # the rules' steps at a change's commit: that change
    for step in out:
        change = at.pop((step.after_index, sign(step)), None)
        if change is not None:
            if change.status == Status.REGRESSION and step.status == Status.SUSPECTED:
                step = dataclasses.replace(step, status=Status.REGRESSION)
            kept.append(step)
            matched.append(step)
        elif _holds_levels(step) or not any(
            sign(c) == sign(step)
            and abs(c.after_index - step.after_index) <= EDGE_MAX
            and _displaces(c, step)
            for c in changes_
        ):
            kept.append(step)
    for change in at.values():
        if not any(
            (_holds_levels(s) or not _displaces(change, s))
            and s not in matched
            and sign(s) == sign(change)
            and abs(s.after_index - change.after_index) <= EDGE_MAX
            for s in kept
        ):
            kept.append(change)
    return sorted(kept, key=_order)


def _displaces(change: Step, step: Step) -> bool:
    """Whether the segmentation's `change` stands in for the rules' `step` near it: not
    a `suspected` change for a `regression` step."""
    return not (change.status == Status.SUSPECTED and step.status == Status.REGRESSION)


def _holds_levels(step: Step) -> bool:
    """A step of the fit between two levels of MIN_SEGMENT commits or more."""
    return step.edge is None and min(step.commits_before, step.commits_after) >= MIN_SEGMENT


def _with_edges(
    out: list[Step],
    medians: Sequence[float | None],
    noise: Noise,
    min_effect_pct: float,
    undecided: bool,
    improvements: bool = False,
    cuts: Sequence[int] = (),
) -> list[Step]:
    """`out` (the fitted steps) with the edges that are not a fitted step seen again."""
    # An edge within EDGE_MAX commits of a step the fit reports in its direction is that
    # step's own new level seen again (its first commits sit in the edge's reference
    # level); one of a short history's steps, or beside a short level, is that step.
    kept = []
    found_edges = edges(
        medians,
        noise,
        min_effect_pct=min_effect_pct,
        undecided=undecided,
        improvements=improvements,
        cuts=cuts,
    )
    for found in found_edges:
        faster = found.status == Status.IMPROVEMENT
        near = [s for s in out if abs(found.after_index - s.after_index) <= EDGE_MAX]
        if any(s.after_index in cuts for s in near):
            continue
        fitted = [s for s in out if (s.status == Status.IMPROVEMENT) == faster]
        close = [f for f in fitted if abs(found.after_index - f.after_index) <= EDGE_MAX]
        if not close:
            kept.append(found)
        elif faster:
            continue  # a faster head beside a fitted improvement is its new level
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
    everything = [*out, *kept]
    judged = [_edge_level(f, everything, medians, noise, min_effect_pct, undecided) for f in kept]
    kept = [step for step in judged if step is not None]
    return sorted([*out, *kept], key=_order)


def _edge_level(
    step: Step,
    found: Sequence[Step],
    medians: Sequence[float | None],
    noise: Noise,
    min_effect_pct: float,
    undecided: bool,
) -> Step | None:
    """An edge judged again against its reference level ended at the nearest other step
    found (`found`) where its reference ran through that step: the fit of the reference
    side cannot end a level of 2-3 commits (2 | 2 | 4 commits: a start edge's reference
    spanned both later levels and halved a -61% step). None: it does not stand out
    against that level (the other step's level seen again)."""
    if step.edge == START:
        later = [s.after_index for s in found if s.after_index > step.after_index]
        span = (step.after_index, min(later)) if later else None
        reference = step.commits_after
    else:
        earlier = [s.after_index for s in found if s.after_index < step.after_index]
        span = (max(earlier), step.after_index) if earlier else None
        reference = step.commits_before
    if span is None:
        return step
    _, logs = valid_logs(medians[span[0] : span[1]])
    if logs.size >= reference:
        return step  # its reference level ended there already
    cuts = [s.after_index for s in found if s is not step]
    judged = rejudge_edge(
        medians, noise, step, cuts, min_effect_pct=min_effect_pct, undecided=undecided
    )
    if judged is None:
        return None
    # Its size: the mean of the level's raw ln medians, every commit of it kept (a
    # 2-commit level's despiking may still set one aside).
    level = math.exp(float(np.mean(logs)))
    before, after = (judged.before, level) if step.edge == START else (level, judged.after)
    percent = 100 * (after / before - 1)
    if (-percent if judged.status == Status.IMPROVEMENT else percent) < min_effect_pct:
        return None
    return dataclasses.replace(judged, before=before, after=after, percent=percent)


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
