"""The pure rules of bisect: confirm's A/B rule, applied to the ends and to each probe.

Every comparison is `fwdasv.analysis.rules.confirm.judge_ab` on process medians (A before B in
the step's direction), with the series' noise as its floor: the stored history's, per
process, where there is one, else the spread between this bisection's own processes of
one commit (`run_noise`). A probe's test floor is half the step (`probe_floor_pct`).
A probe M is `bad` when GOOD->M is confirmed and M->BAD not reproduced, `good` the other
way round, `part-way` when both are confirmed; where the noise leaves the other
comparison undecided, by its side of the ends' midpoint beyond doubt (`nearer`);
`unknown` otherwise (measure more; both ruled out: `between`, the ends are not a step
apart). A decision also needs nearly all
of M's processes on its side of the levels' midpoint (`sides_agree`); from fewer than
ROBUST_PROCESSES processes, values no odd process could have made (`robust`: beyond
ODD_PROCESS_PCT and 3 sds of the other level); and M not past the far end by half the
step or more (`_beyond`: no commit of a one-step range sits there, a burst puts one
there). Several series of one search: a series that cannot place M takes the others'
verdict unless its own leans against it (`group_verdict`). The table, with its figures:
docs/verdicts.md ("bisect").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fwdasv.analysis.rules.confirm import (
    ALPHA,
    CLIP_SD,
    STEP_PROCESSES,
    Confirmation,
    judge_ab,
    logs,
    magnitude_pct,
    pooled,
)
from fwdasv.analysis.rules.judgment import pooled_spread
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import BisectStatus, ReMeasureStatus
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core import stats
from fwdasv.core.verdicts import MIN_EFFECT_PCT

# How far one bench process can read from its commit's level for reasons not of the code:
# on the shared 2-core VM a process beside a neighbour read 20-60% slow, or 15-25% fast
# (docs/measurements.md, section 11). A decision from fewer than ROBUST_PROCESSES processes
# a side stands only beyond it: one odd process cannot have made it.
ODD_PROCESS_PCT = 60.0
# From three processes a side, judge_ab's winsorizing (CLIP_SD about the side's median)
# takes one odd process out of the decision.
ROBUST_PROCESSES = 3
# A process this far from its commit's others says a neighbour's load reached the run (a
# quiet GPU's slow clock state reads +1-3%; a burst 20-60%): the final pair's re-check then
# measures GOOD and BAD beside its probes (`loaded`).
LOADED_PCT = 10.0


def loaded(groups: Iterable[Sequence[float]]) -> bool:
    """Whether one commit's process medians (each of `groups`: 2 or more) hold one
    LOADED_PCT or more from their median."""
    limit = math.log1p(LOADED_PCT / 100)
    for values in groups:
        positive = [v for v in values if v > 0]
        if len(positive) < 2:
            continue
        mid = stats.median(positive)
        if max(abs(math.log(v / mid)) for v in positive) >= limit:
            return True
    return False


def probe_floor_pct(change_pct: float, min_effect_pct: float = MIN_EFFECT_PCT) -> float:
    """The smallest move a probe's test counts: half the step being bisected (its
    `magnitude_pct`), never below min_effect_pct (a 1% step is bisected at 0.5%, a 2x step
    at 50%, a -80% one, 5x seen from its faster end, at 200%)."""
    return max(min_effect_pct, magnitude_pct(change_pct) / 2)


def step_pct(before: Sequence[float], after: Sequence[float]) -> float:
    """The change from `before` to `after` in percent, from the medians of their process
    medians (one odd process does not move it)."""
    return 100 * (stats.median(after) / stats.median(before) - 1)


def run_noise(groups: Sequence[Sequence[float]]) -> Noise | None:
    """The noise of one process's median from this bisection's own processes: the spread
    between the processes of one commit, pooled over the commits measured (None until a
    commit has two)."""
    spread = pooled_spread(groups)
    if spread is None:
        return None
    pct = max(100 * spread.sigma, 1e-6)
    return Noise(pct, pct, None, len(groups), "history", float(spread.dof))


def judge_step(
    before: Sequence[float],
    after: Sequence[float],
    noise: Noise,
    direction: int,
    *,
    claimed_pct: float | None,
    min_effect_pct: float,
    alpha: float = ALPHA,
) -> Confirmation:
    """Is `after` beyond `before` in the step's direction (+1 slower, -1 faster)? confirm's
    rule with the slower side as B."""
    a, b = (before, after) if direction > 0 else (after, before)
    claimed = None if claimed_pct is None else magnitude_pct(claimed_pct)
    return judge_ab(a, b, noise, claimed_pct=claimed, min_effect_pct=min_effect_pct, alpha=alpha)


def consistent(values: Sequence[float], noise: Noise) -> bool:
    """Whether a side of fewer than ROBUST_PROCESSES processes agrees with itself: no two of
    them further apart than CLIP_SD sds of a difference (else one may be odd: measure more)."""
    if len(values) >= ROBUST_PROCESSES:
        return True
    logs = [math.log(v) for v in values]
    return max(logs) - min(logs) <= CLIP_SD * math.sqrt(2) * noise.sigma


def robust(near: Sequence[float], far: Sequence[float], noise: Noise) -> bool:
    """Whether a decision that puts `near`'s processes away from `far`'s level can stand:
    from ROBUST_PROCESSES processes a side, or else with every process of either side
    beyond ODD_PROCESS_PCT, plus CLIP_SD noise sds, of the other's median (one odd process
    cannot have made it)."""
    if min(len(near), len(far)) >= ROBUST_PROCESSES:
        return True
    if not (consistent(near, noise) and consistent(far, noise)):
        return False
    bound = math.log1p(ODD_PROCESS_PCT / 100) + CLIP_SD * noise.sigma
    centre_near, centre_far = math.log(stats.median(near)), math.log(stats.median(far))
    return all(abs(math.log(v) - centre_far) > bound for v in near) and all(
        abs(math.log(v) - centre_near) > bound for v in far
    )


def sides_agree(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    verdict: BisectStatus,
    direction: int,
) -> bool:
    """Whether nearly all of the probe's processes lie on `verdict`'s side of the midpoint
    between GOOD's and BAD's levels (all of up to 4, all but one of 5-9, ...: n - n // 5):
    a level read from the median and mean of a few processes can be carried by odd ones
    (3 of 6 processes 30-55% slow beside a neighbour put a good commit at BAD's level)."""
    middle = (math.log(stats.median(good)) + math.log(stats.median(bad))) / 2
    sign = direction if verdict == BisectStatus.BAD else -direction
    beyond = sum(sign * (math.log(v) - middle) > 0 for v in probe)
    return beyond >= len(probe) - len(probe) // 5


@dataclass(frozen=True)
class ProbeJudgment:
    """One probe M between the ends: its verdict and the two comparisons behind it."""

    verdict: BisectStatus  # good / bad / part-way / unknown
    from_good: Confirmation  # GOOD -> M: is M beyond GOOD in the step's direction?
    to_bad: Confirmation  # M -> BAD: is BAD beyond M?
    overshoot: str = ""  # "BAD" or "GOOD" when M lies beyond that end (`judge_probe`)
    midpoint: str = ""  # "BAD" or "GOOD": placed on that end's side of the midpoint (`nearer`)

    @property
    def between(self) -> bool:
        """Both comparisons rule the step out: M lies within half the step of both ends,
        which a real step of that size cannot leave room for (the ends are not a step apart)."""
        return self.from_good.status == self.to_bad.status == ReMeasureStatus.NOT_REPRODUCED

    def text(self) -> str:
        beyond = f"; M beyond {self.overshoot} by half the step or more" if self.overshoot else ""
        nearer = f"; M nearer {self.midpoint} beyond doubt" if self.midpoint else ""
        return (
            f"GOOD->M {self.from_good.percent:+.2f}% {self.from_good.label}; "
            f"M->BAD {self.to_bad.percent:+.2f}% {self.to_bad.label}{beyond}{nearer}"
        )


def judge_probe(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    noise: Noise,
    direction: int,
    *,
    change_pct: float,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = ALPHA,
) -> ProbeJudgment:
    """The rule table for one probe (process medians of GOOD, M and BAD).

    Both comparisons test half the step (`probe_floor_pct` of `change_pct`, GOOD to BAD):
    confirmed from a quarter of it up, ruled out below half of it. A decision from too few processes that one
    odd process could have made (`robust`) is `unknown`: measure more.
    """
    floor = probe_floor_pct(change_pct, min_effect_pct)
    # No claim: the slowdown ruled out is the floor itself (half the step), never the
    # whole step (a probe half way, or carried half way by odd processes, is no end).
    up = judge_step(
        good, probe, noise, direction, claimed_pct=None, min_effect_pct=floor, alpha=alpha
    )
    down = judge_step(
        probe, bad, noise, direction, claimed_pct=None, min_effect_pct=floor, alpha=alpha
    )
    confirmed = ReMeasureStatus.CONFIRMED
    lean = leaning(up, down)
    bad_side = sides_agree(good, probe, bad, BisectStatus.BAD, direction)
    good_side = sides_agree(good, probe, bad, BisectStatus.GOOD, direction)
    overshoot = ""
    if lean == BisectStatus.BAD and _beyond(bad, probe, noise, direction, change_pct, alpha):
        overshoot = "BAD"
    elif lean == BisectStatus.GOOD and _beyond(probe, good, noise, direction, change_pct, alpha):
        overshoot = "GOOD"
    if overshoot:
        verdict = BisectStatus.UNKNOWN
    elif lean == BisectStatus.BAD and robust(probe, good, noise) and bad_side:
        verdict = BisectStatus.BAD
    elif lean == BisectStatus.GOOD and robust(probe, bad, noise) and good_side:
        verdict = BisectStatus.GOOD
    elif (
        (up.status, down.status) == (confirmed, confirmed)
        and robust(probe, good, noise)
        and robust(probe, bad, noise)
    ):
        verdict = BisectStatus.PART_WAY
    elif (
        side := nearer(good, probe, bad, noise, direction, up, down, floor, alpha)
    ) is not None and (bad_side if side == BisectStatus.BAD else good_side):
        # From six processes or more: `robust` holds.
        return ProbeJudgment(side, up, down, midpoint=side.value.upper())
    else:
        verdict = BisectStatus.UNKNOWN
    return ProbeJudgment(verdict, up, down, overshoot)


def nearer(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    noise: Noise,
    direction: int,
    up: Confirmation,
    down: Confirmation,
    floor_pct: float,
    alpha: float = ALPHA,
) -> BisectStatus | None:
    """Where a probe the noise left unplaced (one comparison confirmed, the other
    undecided) lies by the midpoint between GOOD's and BAD's levels, from its second look
    on (2 x ROBUST_PROCESSES processes, the later ones interleaved with the ends'): bad
    when GOOD->M is confirmed and M's mean lies on BAD's side of the midpoint beyond doubt
    (one-sided Student t at `alpha`, the variance pooled over the three commits' processes
    and the noise prior, as `judge_ab` pools two: `confirm.pooled`) and M's median not
    past BAD by more than half the floor (a quarter of the step: a commit of a one-step
    range sits at one of two levels, a burst past them); good the other way round; else
    None. One look's three processes, all inside a neighbour's burst, once put a good
    commit on BAD's side beyond doubt (docs/verdicts.md, "bisect")."""
    confirmed, undecided = ReMeasureStatus.CONFIRMED, ReMeasureStatus.UNDECIDED
    if len(probe) < 2 * ROBUST_PROCESSES:
        return None
    if (up.status, down.status) == (confirmed, undecided):
        side, near = BisectStatus.BAD, bad
    elif (up.status, down.status) == (undecided, confirmed):
        side, near = BisectStatus.GOOD, good
    else:
        return None
    fit = pooled((logs(good), logs(probe), logs(bad)), noise)
    g, m, b = fit.sides
    se = fit.sd * math.sqrt(1 / m.size + 0.25 / g.size + 0.25 / b.size)
    d = direction * (float(m.mean()) - (float(g.mean()) + float(b.mean())) / 2)
    sign = 1 if side == BisectStatus.BAD else -1
    if sign * d - t_isf(alpha, fit.dof) * se <= 0:
        return None
    past = sign * direction * (math.log(stats.median(probe)) - math.log(stats.median(near)))
    return side if past <= math.log1p(floor_pct / 200) else None


def _beyond(
    near: Sequence[float],
    far: Sequence[float],
    noise: Noise,
    direction: int,
    change_pct: float,
    alpha: float,
) -> bool:
    """Whether `far` lies beyond `near` in the step's direction by half the step or more
    (confirm's rule, the whole step as its min effect). A probe past an end by that much
    sits at neither level of a one-step range; a burst over its processes puts it there
    (docs/verdicts.md, "bisect")."""
    whole = magnitude_pct(change_pct)
    verdict = judge_step(
        near, far, noise, direction, claimed_pct=None, min_effect_pct=whole, alpha=alpha
    )
    return verdict.status == ReMeasureStatus.CONFIRMED


def placed(judgment: ProbeJudgment) -> bool:
    return judgment.verdict in (BisectStatus.GOOD, BisectStatus.BAD)


def leaning(up: Confirmation, down: Confirmation) -> BisectStatus | None:
    """Where the two comparisons alone place a probe: bad (GOOD->M confirmed, M->BAD ruled
    out), good (the other way round), else None."""
    confirmed, ruled_out = ReMeasureStatus.CONFIRMED, ReMeasureStatus.NOT_REPRODUCED
    return {
        (confirmed, ruled_out): BisectStatus.BAD,
        (ruled_out, confirmed): BisectStatus.GOOD,
    }.get((up.status, down.status))


def vetoed(judgment: ProbeJudgment) -> bool:
    """Whether the comparisons place the probe (`leaning`) and only a guard on its
    processes (`sides_agree`, `robust`, `_beyond`) kept it unplaced: the mark of a burst
    over some of them, which fresh processes may not meet (`probes.retry`)."""
    return leaning(judgment.from_good, judgment.to_bad) is not None and not placed(judgment)


def settled(judgment: ProbeJudgment) -> bool:
    """Placed, or shown to lie between ends that are not a step apart: no more processes."""
    return placed(judgment) or judgment.between


def group_verdict(judgments: Sequence[ProbeJudgment]) -> BisectStatus | None:
    """The probe's verdict for all the series of one search: that of the series that place
    it, when they agree and none of the others leans the other way; None otherwise."""
    verdicts = {j.verdict for j in judgments if placed(j)}
    if len(verdicts) != 1:
        return None
    (verdict,) = verdicts
    if any(contradicts(j, verdict) for j in judgments if not placed(j)):
        return None
    return verdict


def contradicts(judgment: ProbeJudgment, verdict: BisectStatus) -> bool:
    """Whether one series' comparisons lean against `verdict` (bad: the probe is not beyond
    GOOD, or BAD is beyond it; good: the other way round)."""
    confirmed, ruled_out = ReMeasureStatus.CONFIRMED, ReMeasureStatus.NOT_REPRODUCED
    up, down = judgment.from_good.status, judgment.to_bad.status
    if verdict == BisectStatus.BAD:
        return up == ruled_out or down == confirmed
    return up == confirmed or down == ruled_out


def next_look(taken: int) -> int:
    """Processes a side at the next look: ROBUST_PROCESSES, then STEP_PROCESSES more each."""
    return ROBUST_PROCESSES if taken < ROBUST_PROCESSES else taken + STEP_PROCESSES


def bounds(decisions: dict[int, BisectStatus], last: int) -> tuple[int, int]:
    """The range the decisions leave: after the last good index, up to the first bad one
    beyond it (0 and `last` are GOOD and BAD)."""
    lo = max([0, *(i for i, v in decisions.items() if v == BisectStatus.GOOD)])
    hi = min([last, *(i for i, v in decisions.items() if v == BisectStatus.BAD and i > lo)])
    return lo, hi


def next_probe(lo: int, hi: int, skipped: frozenset[int] | set[int] = frozenset()) -> int | None:
    """The untried index strictly between lo and hi nearest the middle (None: done)."""
    middle = (lo + hi) // 2
    candidates = [i for i in range(lo + 1, hi) if i not in skipped]
    if not candidates:
        return None
    return min(candidates, key=lambda i: (abs(i - middle), i))


def expected_probes(commits: int) -> int:
    """Probes a plain binary search needs over `commits` commits after GOOD (BAD included)."""
    return math.ceil(math.log2(commits)) if commits > 1 else 0
