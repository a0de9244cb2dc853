"""The pure rules of bisect: one comparison, one probe's classification, the next probe.

See `fwdasv.analysis.bisect` for the rule table these implement. Everything
here works on lists of samples and indices: no git, no asv, no files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fwdasv.analysis.judgment import DEFAULT_ALPHA, sample_test
from fwdasv.core import stats

DEFAULT_FACTOR = 1.05
DEFAULT_MAX_REMEASURE = 2

DIFFERENT, SAME, UNKNOWN = "different", "same", "unknown"
GOOD, BAD, FAILED = "good", "bad", "failed"
PART_WAY = "part-way"


@dataclass(frozen=True)
class Step:
    """One comparison x -> y in the direction of the regression."""

    outcome: str  # different / same / unknown
    ratio: float | None = None  # median(y) / median(x)
    p_value: float | None = None


def compare_step(
    x: Sequence[float],
    y: Sequence[float],
    direction: int,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
) -> Step:
    """x -> y in `direction` (+1: is y slower? -1: is y faster?).

    `same` when the median ratio is within `factor` that way; beyond it,
    `different` when Mann-Whitney says p < alpha, else `unknown`: a large move
    that the samples do not confirm is a reason to measure again, never
    evidence that nothing changed. Too few samples to test: `unknown`.
    """
    tested = sample_test(x, y, alpha)
    if tested.ratio is None:
        return Step(UNKNOWN)
    if not tested.beyond(factor, direction):
        return Step(SAME if tested.different is not None else UNKNOWN, tested.ratio, tested.p_value)
    return Step(DIFFERENT if tested.different else UNKNOWN, tested.ratio, tested.p_value)


@dataclass(frozen=True)
class Classification:
    verdict: str  # good / bad / unknown
    from_good: Step
    to_bad: Step


def classify(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    direction: int,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
) -> Classification:
    """The module's rule table for one probe between GOOD and BAD."""
    from_good = compare_step(good, probe, direction, factor, alpha)
    to_bad = compare_step(probe, bad, direction, factor, alpha)
    if from_good.outcome == DIFFERENT and to_bad.outcome == SAME:
        verdict = BAD
    elif from_good.outcome == SAME and to_bad.outcome == DIFFERENT:
        verdict = GOOD
    elif from_good.outcome == DIFFERENT and to_bad.outcome == DIFFERENT:
        # Part way between the ends: either a step of several commits, or the ends
        # (or the probe) measured in another machine state. The ends are measured again.
        verdict = PART_WAY
    else:
        verdict = UNKNOWN
    return Classification(verdict, from_good, to_bad)


def closer(good: Sequence[float], probe: Sequence[float], bad: Sequence[float]) -> str:
    """The fallback: the end whose median is nearer the probe's, in log ratio."""
    m = math.log(stats.median(probe))
    return (
        GOOD
        if abs(m - math.log(stats.median(good))) <= abs(m - math.log(stats.median(bad)))
        else BAD
    )


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


def step_text(step: Step) -> str:
    if step.ratio is None:
        return step.outcome
    p = f", p={step.p_value:.2g}" if step.p_value is not None else ""
    return f"{100 * (step.ratio - 1):+.1f}%{p}: {step.outcome}"
