"""The pure rules of bisect: one comparison, one probe's classification, the next probe.

The rule table these implement: docs/verdicts.md ("bisect"). Everything
here works on lists of samples and indices: no git, no asv, no files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fwdasv.analysis.judgment import (
    DEFAULT_ALPHA,
    ProcessSpread,
    process_medians,
    process_rank_test,
    process_test,
    sample_test,
)
from fwdasv.analysis.status import Status
from fwdasv.core import stats
from fwdasv.core.verdicts import VerdictSettings

# A probe's detection floor (fwdasv.core.verdicts.PROBE_FLOOR_PCT: why it is not the
# smallest change worth reporting); a project's own is `VerdictSettings.probe_factor`.
DEFAULT_PROBE_FACTOR = VerdictSettings().probe_factor
DEFAULT_MAX_REMEASURE = 2


@dataclass(frozen=True)
class StepTest:
    """One comparison x -> y in the direction of the regression: is the step between them?"""

    outcome: Status  # different / same / unknown (STEP_OUTCOMES)
    ratio: float | None = None  # median(y) / median(x)
    p_value: float | None = None


@dataclass(frozen=True)
class Processes:
    """How to judge by process-level variation: `size` samples per bench process, and the
    between-process spread of the commits measured so far (None: not known yet)."""

    size: int
    spread: ProcessSpread | None


def compare_step(
    x: Sequence[float],
    y: Sequence[float],
    direction: int,
    factor: float = DEFAULT_PROBE_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    processes: Processes | None = None,
) -> StepTest:
    """x -> y in `direction` (+1: is y slower? -1: is y faster?).

    `same` when the median ratio is within `factor` that way; beyond it,
    `different` when the test says p < alpha, else `unknown`: a large move
    that the samples do not confirm is a reason to measure again, never
    evidence that nothing changed. Too few samples to test: `unknown`.

    With `processes` (and samples that split into them) the ratio and the test
    are on process medians (`judgment.process_test`: the median of each
    side's process medians, against the pooled variance between processes of
    one commit), as confirm judges; without a spread yet, a move beyond the
    factor is `unknown`. With RANK_MIN_PROCESSES or more processes a side,
    Mann-Whitney on the process medians decides too (`process_rank_test`).
    Otherwise Mann-Whitney on the samples (asv's rule).
    """
    xs = process_medians(x, processes.size) if processes else None
    ys = process_medians(y, processes.size) if processes else None
    if processes is not None and xs and ys:
        tested_processes = (
            process_test(xs, ys, processes.spread) if processes.spread is not None else None
        )
        ratio = (
            tested_processes.ratio
            if tested_processes is not None
            else stats.median(ys) / stats.median(xs)
        )
        beyond = ratio > factor if direction > 0 else ratio < 1 / factor
        p_value = tested_processes.p_value if tested_processes is not None else None
        if not beyond:
            return StepTest(Status.SAME, ratio, p_value)
        different = tested_processes is not None and tested_processes.different(alpha)
        if not different:
            # Enough processes a side: their ranks decide too. One fast or slow process
            # widens the t rule's pooled spread for every comparison (a +14% step read
            # p=0.12 on a quiet 2-core VM whose processes now and then ran 20% fast);
            # it moves one rank. Each rule at alpha: at most 2 alpha together.
            rank_p = process_rank_test(xs, ys, alpha)
            if rank_p is not None and rank_p < alpha:
                return StepTest(Status.DIFFERENT, ratio, rank_p)
        return StepTest(Status.DIFFERENT if different else Status.UNKNOWN, ratio, p_value)
    tested = sample_test(x, y, alpha)
    if tested.ratio is None:
        return StepTest(Status.UNKNOWN)
    if not tested.beyond(factor, direction):
        outcome = Status.SAME if tested.different is not None else Status.UNKNOWN
        return StepTest(outcome, tested.ratio, tested.p_value)
    outcome = Status.DIFFERENT if tested.different else Status.UNKNOWN
    return StepTest(outcome, tested.ratio, tested.p_value)


@dataclass(frozen=True)
class Classification:
    verdict: Status  # good / bad / part-way / unknown
    from_good: StepTest
    to_bad: StepTest


def classify(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    direction: int,
    factor: float = DEFAULT_PROBE_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    processes: Processes | None = None,
) -> Classification:
    """The module's rule table for one probe between GOOD and BAD."""
    from_good = compare_step(good, probe, direction, factor, alpha, processes)
    to_bad = compare_step(probe, bad, direction, factor, alpha, processes)
    outcomes = (from_good.outcome, to_bad.outcome)
    if outcomes == (Status.DIFFERENT, Status.SAME):
        verdict = Status.BAD
    elif outcomes == (Status.SAME, Status.DIFFERENT):
        verdict = Status.GOOD
    elif outcomes == (Status.DIFFERENT, Status.DIFFERENT):
        # Part way between the ends: either a step of several commits, or the ends
        # (or the probe) measured in another machine state. The ends are measured again.
        verdict = Status.PART_WAY
    else:
        verdict = Status.UNKNOWN
    return Classification(verdict, from_good, to_bad)


def closer(good: Sequence[float], probe: Sequence[float], bad: Sequence[float]) -> Status:
    """The fallback: the end whose median is nearer the probe's, in log ratio."""
    m = math.log(stats.median(probe))
    return (
        Status.GOOD
        if abs(m - math.log(stats.median(good))) <= abs(m - math.log(stats.median(bad)))
        else Status.BAD
    )


def bounds(decisions: dict[int, Status], last: int) -> tuple[int, int]:
    """The range the decisions leave: after the last good index, up to the first bad one
    beyond it (0 and `last` are GOOD and BAD)."""
    lo = max([0, *(i for i, v in decisions.items() if v == Status.GOOD)])
    hi = min([last, *(i for i, v in decisions.items() if v == Status.BAD and i > lo)])
    return lo, hi


def recheck_order(decided: Sequence[int], lo: int, hi: int) -> list[int]:
    """Probe indices to re-check when the final pair lo -> hi does not differ: the decisions
    that led there, nearest the pair first (the pair's own members at distance 0)."""

    def distance(i: int) -> int:
        return 0 if lo <= i <= hi else min(abs(i - lo), abs(i - hi))

    return sorted(dict.fromkeys(decided), key=lambda i: (distance(i), i))


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


def both_text(decision: Classification) -> str:
    """A probe M's two comparisons, GOOD->M and M->BAD, in one line."""
    return f"GOOD->M {step_text(decision.from_good)}; M->BAD {step_text(decision.to_bad)}"


def step_text(test: StepTest) -> str:
    if test.ratio is None:
        return str(test.outcome)
    p = f", p={test.p_value:.2g}" if test.p_value is not None else ""
    return f"{100 * (test.ratio - 1):+.1f}%{p}: {test.outcome}"
