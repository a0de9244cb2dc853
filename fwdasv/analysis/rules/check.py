"""A pull-request check's word for one case: HEAD against BASE, from confirm's A/B verdict.

`fwdasv check` measures BASE and HEAD interleaved and judges each case by confirm's rule
(`fwdasv.analysis.rules.confirm.judge_ab`, no claimed step). `check_status` reads that
verdict as the words `fwdasv compare` uses: `worse` (confirmed, the estimate at least
`min_effect_pct`: the one word the check fails on, `gate.COMPARISON`), `unchanged`
(ruled out, or a real change smaller than `min_effect_pct`), `improved` (ruled out and
the whole interval below zero, or `faster_by_interval`), `undecided` (the processes
allowed could not tell).

`faster_by_interval`: `judge_ab` confirms a slowdown whose interval lies above zero however
wide, but rules a step out only with an interval narrow enough to have excluded a
min-effect step; with no claimed step (the check has none) a clear speed-up on a noisy box
stayed `undecided` (a 2% speed-up at 1% spread never `improved`, where the 2% slowdown is
`worse` 77% of the time). So an undecided verdict whose interval lies below zero is
`improved`, as a confirmed slowdown is `worse`, mirrored (docs/measurements.md, section
41; the check holds such a speed-up as it holds a slowdown,
`fwdasv.analysis.check.check._held`).

`processes_to_decide` is what the check's looks stop on: how many processes a side an
undecided case would need if the run's own spread holds.
"""

from __future__ import annotations

import math

from fwdasv.analysis.rules.confirm import ALPHA, Confirmation
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus
from fwdasv.analysis.rules.student_t import t_isf


def check_status(verdict: Confirmation, min_effect_pct: float) -> CompareStatus | ReMeasureStatus:
    """The case's word (see the module)."""
    if verdict.status == ReMeasureStatus.CONFIRMED:
        return CompareStatus.WORSE if verdict.percent >= min_effect_pct else CompareStatus.UNCHANGED
    if verdict.status == ReMeasureStatus.NOT_REPRODUCED:
        return CompareStatus.IMPROVED if verdict.upper_pct < 0 else CompareStatus.UNCHANGED
    if faster_by_interval(verdict):
        return CompareStatus.IMPROVED
    return ReMeasureStatus.UNDECIDED


def faster_by_interval(verdict: Confirmation) -> bool:
    """An undecided verdict whose whole interval lies below zero: a speed-up, decided as
    `judge_ab` confirms a slowdown (mirrored). Undecided, its half-width is at least the
    min effect (else the step would be ruled out), so its estimate lies beyond it."""
    return verdict.status == ReMeasureStatus.UNDECIDED and verdict.upper_pct < 0


def processes_to_decide(verdict: Confirmation, cap: int, alpha: float = ALPHA) -> int:
    """Processes a side at which an undecided verdict would be decided if the run's own
    estimate and spread hold; `cap + 1` when not even `cap` would do.

    Decided: the interval's lower bound above zero (confirmed), or its upper bound below
    the tested step (ruled out); so the half-width must come under the larger of the
    estimate and the tested step less the estimate. The sd is projected as `judge_ab`
    pools it at n a side: the run's observed variance over 2n - 2 degrees of freedom, the
    prior's over its own, so the prior's weight fades as processes are added. Not
    `judge_ab`'s `more_processes`, which holds today's pooled sd fixed: with no stored
    history that is mostly the 1% prior, and on processes 0.1% apart it asks for far
    more than would decide (docs/verdicts.md, "check").
    """
    taken = min(verdict.processes_a, verdict.processes_b)
    run_dof = verdict.processes_a + verdict.processes_b - 2
    prior_dof = max(verdict.dof - run_dof, 0.0)
    prior = verdict.floor_pct / 100
    observed = (
        verdict.observed_sd_pct if verdict.observed_sd_pct is not None else verdict.floor_pct
    ) / 100
    estimate = math.log1p(verdict.percent / 100)
    tested = math.log1p(verdict.tested_pct / 100)
    width = max(estimate, tested - estimate)
    for n in range(taken + 1, cap + 1):
        dof = 2 * n - 2 + prior_dof
        sd = math.sqrt((observed * observed * (2 * n - 2) + prior_dof * prior * prior) / dof)
        if t_isf(alpha, dof) * sd * math.sqrt(2 / n) < width:
            return n
    return cap + 1
