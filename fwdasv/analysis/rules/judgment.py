"""The one rule that compares two commits' samples, shared by compare and bisect.

Both ask the same question of two lists of samples: how far apart are the
medians (the ratio after / before), and do the samples say they differ
(asv's test: two-sided Mann-Whitney U, different when p < alpha; None when
there are too few samples for the test to reach alpha at all). What each does
with the answer differs (compare adds asv's CI fallback and reports a verdict;
bisect looks in the direction of the step): that stays with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fwdasv.analysis.rules.student_t import t_sf
from fwdasv.core import stats
from fwdasv.core.errors import UserError
from fwdasv.core.numbers import numbers

DEFAULT_ALPHA = stats.SIGNIFICANCE


class RuleError(UserError, ValueError):
    """A factor or significance level that cannot be used."""


def check_rule(factor: float, alpha: float) -> None:
    """One clear error for a factor below 1 or an alpha outside (0, 1)."""
    if not factor >= 1:
        raise RuleError(f"--factor {factor}: must be >= 1 (1.05 = 5%)")
    if not 0 < alpha < 1:
        raise RuleError(f"--alpha {alpha}: must be between 0 and 1")


@dataclass(frozen=True)
class SampleTest:
    """before -> after on the samples: the median ratio and what Mann-Whitney says."""

    ratio: float | None  # median(after) / median(before); None without samples
    different: bool | None  # p < alpha; None: too few samples to test (or none)
    p_value: float | None = None

    def beyond(self, factor: float, direction: int) -> bool:
        """Whether the ratio moved beyond `factor` in `direction` (+1 slower, -1 faster)."""
        if self.ratio is None:
            return False
        return self.ratio > factor if direction > 0 else self.ratio < 1 / factor


def sample_test(
    before: Sequence[float], after: Sequence[float], alpha: float = DEFAULT_ALPHA
) -> SampleTest:
    xs, ys = numbers(before), numbers(after)
    if not xs or not ys:
        return SampleTest(None, None)
    before_median = stats.median(xs)
    ratio = stats.median(ys) / before_median if before_median else math.inf
    different = stats.is_different(xs, ys, alpha)
    p_value = None if different is None else stats.mann_whitney_u(xs, ys)[1]
    return SampleTest(ratio, different, p_value)


# --- process-level variation ----------------------------------------------------------------
#
# asv stores one commit's samples as one flat list: a fwdasv suite's `samples` per bench
# process (launch), one process after another, and every appended run (bisect, `asv run
# --append-samples`) adds its processes at the end. Samples inside one process share its
# capture, allocation and machine state, so a test on them counts a process-to-process
# offset as significant (one unusually fast process became a 2.2x "slowdown", and a bad
# commit whose one run read fast a p=1e-7 step). The unit of replication is the process:
# each contributes its median, and two commits are compared on those, against the
# variance between processes of one commit (confirm's rule, `fwdasv.analysis.rules.confirm`).


def process_medians(samples: Sequence[float | None], size: int | None) -> list[float] | None:
    """The median of each process's samples, in the order stored; None when the samples
    cannot be split (no `size`, or a count that is not a multiple of it). A process with
    no finite sample is left out."""
    if not size or size < 1 or not samples or len(samples) % size:
        return None
    out = []
    for start in range(0, len(samples), size):
        chunk = numbers(samples[start : start + size])
        if chunk:
            out.append(stats.median(chunk))
    return out


@dataclass(frozen=True)
class ProcessSpread:
    """The sd of ln(process median) between processes of one commit, pooled over commits."""

    sigma: float
    dof: float


# A commit's processes are judged by their median, which with ROBUST_MIN_PROCESSES or
# more is not moved by one process that ran fast or slow: such a process is left out of
# the spread too, when it lies beyond ROBUST_CUT robust sds of its commit's median.
ROBUST_MIN_PROCESSES = 5
ROBUST_CUT = 3.5


def pooled_spread(
    groups: Sequence[Sequence[float]], *, robust: bool = False
) -> ProcessSpread | None:
    """Pooled within-commit variance of ln process medians (each group one commit's
    processes); None when no commit has two processes.

    With `robust`, a group of ROBUST_MIN_PROCESSES or more leaves out the processes
    beyond ROBUST_CUT robust sds (1.4826 x the median absolute deviation, pooled over
    those groups) of its median: its median is not moved by them, so neither is its
    spread. A smaller group keeps every process: two processes that disagree are that
    commit's spread (its median is their mean)."""
    logged = [[math.log(v) for v in group if v > 0 and math.isfinite(v)] for group in groups]
    # Each well-measured group's median, once (None: the group keeps every process).
    centres = [
        stats.median(logs) if robust and len(logs) >= ROBUST_MIN_PROCESSES else None
        for logs in logged
    ]
    deviations = [
        abs(x - centre)
        for logs, centre in zip(logged, centres, strict=True)
        if centre is not None
        for x in logs
    ]
    cut = ROBUST_CUT * 1.4826 * stats.median(deviations) if deviations else 0.0
    ss, dof = 0.0, 0
    for logs, centre in zip(logged, centres, strict=True):
        if cut > 0 and centre is not None:
            logs = [x for x in logs if abs(x - centre) <= cut]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
    if dof == 0:
        return None
    return ProcessSpread(math.sqrt(ss / dof), dof)


@dataclass(frozen=True)
class ProcessTest:
    """before -> after on process medians: a t rule on their ln means."""

    ratio: float  # exp(median ln after - median ln before)
    t: float
    dof: float
    p_value: float  # two-sided
    processes: tuple[int, int]

    def different(self, alpha: float) -> bool:
        return self.p_value < alpha


# The fewest processes a side for the rank test on process medians (`process_rank_test`):
# with 5 and 5 the exact two-sided Mann-Whitney p can reach 0.008, with 8 and 8 0.00016.
RANK_MIN_PROCESSES = 5


def process_rank_test(
    before: Sequence[float], after: Sequence[float], alpha: float
) -> float | None:
    """Mann-Whitney's two-sided p on process medians (the process the unit, ranks the
    scale): one process that read fast or slow moves a rank, not the spread every t
    rule divides by. None with fewer than RANK_MIN_PROCESSES a side, or when even
    complete separation could not reach `alpha` at these counts."""
    xs, ys = numbers(before), numbers(after)
    if min(len(xs), len(ys)) < RANK_MIN_PROCESSES or not stats.can_reach(len(xs), len(ys), alpha):
        return None
    return stats.mann_whitney_u(xs, ys)[1]


def process_test(
    before: Sequence[float],
    after: Sequence[float],
    spread: ProcessSpread,
    floor: ProcessSpread | None = None,
) -> ProcessTest | None:
    """d = median ln(after) - median ln(before) (the median: one run that read fast among
    three moves it no more than the others allow), se = s sqrt(1/n_b + 1/n_a), s the pooled
    between-process sd (`spread`) or `floor` when that is larger (a series' noise, with its
    own degrees of freedom), t with the degrees of freedom of the one used; None without a
    process on each side."""
    lb = [math.log(v) for v in before if v > 0 and math.isfinite(v)]
    la = [math.log(v) for v in after if v > 0 and math.isfinite(v)]
    if not lb or not la:
        return None
    d = stats.median(la) - stats.median(lb)
    used = floor if floor is not None and floor.sigma > spread.sigma else spread
    se = used.sigma * math.sqrt(1 / len(lb) + 1 / len(la))
    t = d / se if se > 0 else (math.inf if d else 0.0)
    p_value = min(1.0, 2 * t_sf(abs(t), used.dof)) if math.isfinite(t) else 0.0
    return ProcessTest(math.exp(d), t, used.dof, p_value, (len(lb), len(la)))
