"""The verdict of a confirmation re-measure: is commit B really slower (or, for a speed-up
found, faster) than commit A?

A step found in the history is re-measured before anyone is alarmed (as Chromium's
Pinpoint does): A and B (`ab_indices`: one commit outside the finding's pair, inside
its levels) are benchmarked interleaved, A B A B ..., in one run on one machine, and
judged on ln(process median) by a t rule whose variance is this run's own, pooled with
the series' noise from its history as a prior worth PRIOR_DOF degrees of freedom
(`judge_ab`: the run's processes overrule the history). Each side is winsorized at its
median +- CLIP_SD sd (the prior's, or the run's robust spread when larger) first. `confirmed`: the lower bound above 0 and the estimate at
least half of `min_effect_pct`; `not-reproduced`: the upper bound below the reported
step, or below the tested slowdown max(min_effect_pct, claimed / 2); else `undecided`, and
`run_confirmation` adds STEP_PROCESSES a side up to MAX_PROCESSES. Pure: the caller
measures (`run_confirmation` takes a callback). A speed-up (a negative claim) is judged by
the same rule with its slower side, A, as B (`magnitude_pct`), and told as B over A
(`mirrored`). The rule and its figures: docs/verdicts.md, "Confirm".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import CONFIRMATION_STATUSES, ReMeasureStatus
from fwdasv.analysis.rules.step import Step
from fwdasv.analysis.rules.student_t import t_isf
from fwdasv.core.verdicts import MIN_EFFECT_PCT

# One-sided, per look: 4 looks (3, 6, 9, 12 processes) keep the chance of confirming a
# no-op under 4 * 0.005 = 2% (Bonferroni).
ALPHA = 0.005
# Process medians beyond this many sds of their side's median are clipped: a process in
# a slow clock state says nothing of the code, and one such value in 3 would decide.
CLIP_SD = 3.0
MARGIN = 1  # commits the re-measured pair reaches past a finding's, each side
MIN_PROCESSES = 3  # per side, the first look
STEP_PROCESSES = 3  # added per side while undecided
MAX_PROCESSES = 12  # per side, the last look
# The history's noise as a prior on the processes' variance, worth this many degrees of
# freedom (those of one look's 3 + 3 processes): 12 + 12 processes (22) overrule it. A
# busy box's history (13.5-18% noise) beside a run whose processes showed 6-9.5% left a
# floor of the history's noise and a reported +74% step "undecided".
PRIOR_DOF = 4.0


@dataclass(frozen=True)
class Confirmation:
    """What an A/B re-measure says about B vs A (percentages are B over A)."""

    status: ReMeasureStatus  # one of CONFIRMATION_STATUSES
    percent: float  # 100 (exp(d) - 1)
    lower_pct: float  # one-sided (1 - alpha) lower bound
    upper_pct: float  # one-sided (1 - alpha) upper bound
    t: float  # d / se
    t_threshold: float  # q
    processes_a: int
    processes_b: int
    sd_pct: float  # per-process sd used: this run's pooled with the history's prior
    observed_sd_pct: float | None  # this run's pooled between-process sd
    floor_pct: float  # the history's noise: the prior (a floor in lines written before it)
    variance: str  # "pooled" (the run's with the prior), "prior" (no run dof); older lines:
    # "observed" or "floor"
    dof: float
    tested_pct: float  # the slowdown `not-reproduced` rules out (a speed-up's: negative)
    more_processes: int = 0  # per side, suggested when undecided
    # Undecided because the interval could not have excluded a min-effect step (else it
    # would read not-reproduced): "undecided at this noise".
    noise_limited: bool = False
    min_effect_pct: float = MIN_EFFECT_PCT

    def __post_init__(self) -> None:
        assert self.status in CONFIRMATION_STATUSES, (
            f"status {self.status!r} not in {CONFIRMATION_STATUSES}"
        )

    def to_json(self) -> dict[str, float | int | str | None]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Confirmation:
        """The figures `to_json` wrote (as the verdicts file keeps them); ValueError naming
        the first field that is missing or of the wrong type. Unknown keys are ignored;
        the last three fields have defaults (lines written before they existed)."""
        status = _text(raw, "status")  # read first, judged last: as the fields are listed
        # Keywords are evaluated in order: the fields as listed, then the status's word.
        return cls(
            **_numbers(raw, "percent", "lower_pct", "upper_pct", "t", "t_threshold"),
            processes_a=_count(raw, "processes_a"),
            processes_b=_count(raw, "processes_b"),
            sd_pct=_number(raw, "sd_pct"),
            observed_sd_pct=_number_or_none(raw, "observed_sd_pct"),
            floor_pct=_number(raw, "floor_pct"),
            variance=_text(raw, "variance"),
            dof=_number(raw, "dof"),
            tested_pct=_number(raw, "tested_pct"),
            more_processes=_count(raw, "more_processes", default=0),
            noise_limited=_flag(raw, "noise_limited", default=False),
            min_effect_pct=_number(raw, "min_effect_pct", default=MIN_EFFECT_PCT),
            status=_status(status),
        )

    @property
    def label(self) -> str:
        """The status as a reader takes it: `undecided at this noise` where it is that."""
        return f"{self.status} at this noise" if self.noise_limited else str(self.status)

    @property
    def faster(self) -> bool:
        """Whether this re-measure tested a speed-up (B faster than A)."""
        return self.tested_pct < 0

    def summary(self, a: str = "A", b: str = "B") -> str:
        """The label and what was measured, B told over A (`a`, `b`: their names)."""
        why = ""
        if self.noise_limited:
            effect = (
                f"{-self.min_effect_pct:g}% (min-effect) speed-up"
                if self.faster
                else f"+{self.min_effect_pct:g}% (min-effect) step"
            )
            why = f"; the interval could not have excluded a {effect}, so it rules nothing out"
        return f"{self.label}: {self.measured(a, b)}{why}"

    def measured(self, a: str = "A", b: str = "B") -> str:
        """What was measured, without a word for it: "B -2.00% vs A [-3.63%, -0.34%],
        12+12 processes, sd 1.461% (pooled)" (`a`, `b`: the sides' names)."""
        return (
            f"{b} {self.percent:+.2f}% vs {a} [{self.lower_pct:+.2f}%, {self.upper_pct:+.2f}%], "
            f"{self.processes_a}+{self.processes_b} processes, sd {self.sd_pct:.3f}% "
            f"({self.variance})"
        )


def _seen_from_the_other_side(pct: float) -> float:
    """B over A as a percent of A over B (-80% -> +400%, +80% -> -44.4%)."""
    return 100 * (1 / (1 + pct / 100) - 1)


def magnitude_pct(change_pct: float) -> float:
    """A change as the slowdown of its slower side over its faster one (a -80% step is a
    +400% one seen from its end): the size both directions are judged at."""
    return change_pct if change_pct >= 0 else _seen_from_the_other_side(change_pct)


def mirrored(verdict: Confirmation) -> Confirmation:
    """A verdict judged with A and B swapped, told as B over A: percentages and bounds
    turned over (a +80% of A over B is a -44.4% of B over A), the tested change negative."""
    over = _seen_from_the_other_side
    return replace(
        verdict,
        percent=over(verdict.percent),
        lower_pct=over(verdict.upper_pct),
        upper_pct=over(verdict.lower_pct),
        t=-verdict.t,
        tested_pct=over(verdict.tested_pct),
    )


def _field(raw: Mapping[str, object], name: str) -> object:
    if name not in raw:
        raise ValueError(f"confirmation: missing {name!r}")
    return raw[name]


def _wrong(name: str, value: object, kind: str) -> ValueError:
    return ValueError(f"confirmation: {name!r} is {value!r}, expected {kind}")


def _number(raw: Mapping[str, object], name: str, default: float | None = None) -> float:
    """A JSON number as a float (an int is read as a float; a bool is not a number)."""
    if default is not None and name not in raw:
        return default
    value = _field(raw, name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _wrong(name, value, "float")


def _numbers(raw: Mapping[str, object], *names: str) -> dict[str, float]:
    """Several fields read by `_number`, in order: `cls(**_numbers(...))` keeps mypy's check
    of each field's type, as long as one call passes one such group."""
    return {name: _number(raw, name) for name in names}


def _number_or_none(raw: Mapping[str, object], name: str) -> float | None:
    return None if _field(raw, name) is None else _number(raw, name)


def _count(raw: Mapping[str, object], name: str, default: int | None = None) -> int:
    if default is not None and name not in raw:
        return default
    value = _field(raw, name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _wrong(name, value, "int")


def _status(word: str) -> ReMeasureStatus:
    if word not in CONFIRMATION_STATUSES:
        raise ValueError(f"confirmation: status {word!r} is not one of a confirmation")
    return ReMeasureStatus(word)


def _text(raw: Mapping[str, object], name: str) -> str:
    value = _field(raw, name)
    if isinstance(value, str):
        return value
    raise _wrong(name, value, "str")


def _flag(raw: Mapping[str, object], name: str, default: bool) -> bool:
    if name not in raw:
        return default
    value = raw[name]
    if isinstance(value, bool):
        return value
    raise _wrong(name, value, "bool")


def _clip(logs: np.ndarray, sd: float) -> np.ndarray:
    """Values beyond CLIP_SD sd of the side's median moved to that bound (Huber winsorizing)."""
    centre = float(np.median(logs))
    return np.clip(logs, centre - CLIP_SD * sd, centre + CLIP_SD * sd)


def _robust_spread(*sides: np.ndarray) -> float:
    """1.4826 x the median absolute deviation of each side's values from its median, pooled
    (a side's median itself, a zero, left out); 0 without two values on a side."""
    deviations = [abs(v - float(np.median(side))) for side in sides if side.size >= 2 for v in side]
    kept = [d for d in deviations if d > 0]
    return 1.4826 * float(np.median(kept)) if kept else 0.0


@dataclass(frozen=True)
class Pooled:
    """Sides of ln(process median) winsorized (`_clip`), and the per-process sd pooled over
    their own spread (`ss` over `run_dof`) and the noise prior (`floor`, PRIOR_DOF)."""

    sides: tuple[np.ndarray, ...]
    sd: float
    dof: float
    run_dof: int
    ss: float
    floor: float


def pooled(sides: Sequence[np.ndarray], noise: Noise | float) -> Pooled:
    """`judge_ab`'s variance over any number of sides (each of ln values, one or more): each
    side winsorized at CLIP_SD of the prior's sd or the sides' robust spread where larger,
    then the run's own variance (n - sides degrees of freedom) pooled with the prior's."""
    if isinstance(noise, Noise):
        floor, prior_dof = noise.sigma, min(PRIOR_DOF, noise.dof)
    else:
        floor, prior_dof = float(noise) / 100, PRIOR_DOF
    if not floor > 0:
        raise ValueError(f"noise {noise} must be positive")
    # Winsorized at the prior's sd, or the run's own robust spread where larger: a run
    # noisier than its history keeps its spread (the processes overrule the prior).
    scale = max(floor, _robust_spread(*sides))
    clipped = tuple(_clip(side, scale) for side in sides)
    run_dof = sum(int(side.size) for side in clipped) - len(clipped)
    ss = 0.0
    if run_dof > 0:
        ss = sum(float(np.sum((side - side.mean()) ** 2)) for side in clipped)
    # The history's noise is a prior the run's own processes overrule as they add up.
    dof = run_dof + prior_dof
    sd = math.sqrt((ss + prior_dof * floor * floor) / dof)
    return Pooled(clipped, sd, dof, run_dof, ss, floor)


def logs(values: Sequence[float]) -> np.ndarray:
    """ln of the finite positive values (a failed process's None or NaN left out)."""
    array = np.asarray(list(values), dtype=np.float64)
    array = array[np.isfinite(array) & (array > 0)]
    return np.log(array)


def ab_indices(
    step: Step, medians: Sequence[float | None] | None = None, margin: int = MARGIN
) -> tuple[int, int]:
    """History indices of the commits to re-measure for a finding: (A, B).

    A finding's edge is an estimate: at 2 noise sds a step is placed one commit
    off one time in eight (least squares with the levels known). A and B are
    taken `margin` commits outside the finding's pair, inside its two levels
    (each holds >= MIN_SEGMENT commits), so a confirmation tests that the
    level changed within B - A commits, which a bisect then narrows. With the
    series' `medians`, the margin counts commits with data (a commit that
    failed in the history is not picked to be re-measured).
    """
    back = min(margin, step.commits_before - 1)
    ahead = min(margin, step.commits_after - 1)
    if medians is None:
        return max(step.before_index - back, 0), step.after_index + ahead
    valid = [i for i, m in enumerate(medians) if m is not None and math.isfinite(m) and m > 0]
    where_a, where_b = valid.index(step.before_index), valid.index(step.after_index)
    return valid[max(where_a - back, 0)], valid[min(where_b + ahead, len(valid) - 1)]


def pair_reason(step: Step, a_index: int, b_index: int) -> str:
    """Why A and B are the commits re-measured for `step` (its own pair, or widened)."""
    back = step.before_index - a_index
    ahead = b_index - step.after_index
    if back == 0 and ahead == 0:
        return "the finding's own pair: the last commit at the old level and the first at the new"
    parts = []
    if back:
        parts.append(f"A {back} commit{'s' if back > 1 else ''} before its last old one")
    if ahead:
        parts.append(f"B {ahead} commit{'s' if ahead > 1 else ''} after its first new one")
    return (
        f"{' and '.join(parts)} (inside its levels): the step's place is uncertain by about "
        "a commit, so the re-measure tests that the level changed between A and B"
    )


def _pct(log_ratio: float) -> float:
    return 100 * math.expm1(log_ratio)


def judge_ab(
    a: Sequence[float],
    b: Sequence[float],
    noise: Noise | float,
    *,
    claimed_pct: float | None = None,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = ALPHA,
) -> Confirmation:
    """Judge per-process medians of A (last good) and B (first bad), measured interleaved.

    `noise` is the series' `Noise` (or its noise_pct): the prior of the per-process
    variance, pooled with this run's own (n_A + n_B - 2 degrees of freedom) as
    PRIOR_DOF degrees of freedom (fewer when the noise has fewer). Needs at least one
    finite value a side; the run's own variance counts from three values in all. A
    run whose upper bound lies below `claimed_pct` (the reported step) rules it out.
    """
    la, lb = logs(a), logs(b)
    if la.size == 0 or lb.size == 0:
        raise ValueError(f"need process medians on both sides, got {la.size} and {lb.size}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha {alpha} must be in (0, 0.5)")
    fit = pooled((la, lb), noise)
    (la, lb), sd, dof, floor = fit.sides, fit.sd, fit.dof, fit.floor
    na, nb = int(la.size), int(lb.size)
    observed = math.sqrt(fit.ss / fit.run_dof) if fit.run_dof > 0 else None
    variance = "pooled" if fit.run_dof > 0 else "prior"
    se = sd * math.sqrt(1 / na + 1 / nb)
    d = float(lb.mean() - la.mean())
    q = t_isf(alpha, dof)
    lower, upper = d - q * se, d + q * se
    tested = max(min_effect_pct, (claimed_pct or 0.0) / 2)
    tested_log = math.log1p(tested / 100)
    more = 0
    min_effect_log = math.log1p(min_effect_pct / 100)
    # Whether a real step of the minimum effect could have come out below the tested one.
    noise_limited = q * se >= min_effect_log > 0
    if lower > 0 and d >= math.log1p(min_effect_pct / 200):
        status = ReMeasureStatus.CONFIRMED
        noise_limited = False
    elif (upper < tested_log and not noise_limited) or (
        claimed_pct is not None and claimed_pct > 0 and upper < math.log1p(claimed_pct / 100)
    ):
        # The reported step itself lies above the interval: ruled out, however wide.
        status = ReMeasureStatus.NOT_REPRODUCED
        noise_limited = False
    else:
        noise_limited = noise_limited and upper < tested_log
        status = ReMeasureStatus.UNDECIDED
        # q sqrt(2 v / n) <= width  <=>  n >= 2 v (q / width)^2, width tested / 2, or
        # below the minimum effect where that is what the run could not resolve.
        width = min(tested_log / 2, min_effect_log * 0.9) if noise_limited else tested_log / 2
        needed = math.ceil(2 * sd * sd * (q / width) ** 2) if width > 0 else 0
        more = max(needed - min(na, nb), 1)
    return Confirmation(
        status=status,
        percent=_pct(d),
        lower_pct=_pct(lower),
        upper_pct=_pct(upper),
        t=d / se,
        t_threshold=q,
        processes_a=na,
        processes_b=nb,
        sd_pct=100 * sd,
        observed_sd_pct=None if observed is None else 100 * observed,
        floor_pct=100 * floor,
        variance=variance,
        dof=dof,
        tested_pct=tested,
        more_processes=more,
        noise_limited=noise_limited,
        min_effect_pct=min_effect_pct,
    )


Measure = Callable[[int], tuple[Sequence[float], Sequence[float]]]


def run_confirmation(
    measure: Measure,
    noise: Noise | float,
    *,
    claimed_pct: float | None = None,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = ALPHA,
    start: int = MIN_PROCESSES,
    step: int = STEP_PROCESSES,
    max_processes: int = MAX_PROCESSES,
) -> Confirmation:
    """Measure, judge, and measure more while undecided, up to `max_processes` a side.

    `measure(k)` runs k more processes of A and of B, interleaved A B A B in
    one run on one machine, and returns their medians (A's, B's). A negative
    `claimed_pct` (a speed-up found) is judged with B as the old side (`mirrored`).
    """
    if not 1 <= start <= max_processes or step < 1:
        raise ValueError(f"start {start}, step {step}, max {max_processes}: need 1 <= start <= max")
    faster = claimed_pct is not None and claimed_pct < 0
    claimed = None if claimed_pct is None else magnitude_pct(claimed_pct)
    a, b = (list(side) for side in measure(start))
    while True:
        old, new = (b, a) if faster else (a, b)
        verdict = judge_ab(
            old, new, noise, claimed_pct=claimed, min_effect_pct=min_effect_pct, alpha=alpha
        )
        if faster:
            verdict = mirrored(verdict)
        taken = min(len(a), len(b))
        if verdict.status != ReMeasureStatus.UNDECIDED or taken >= max_processes:
            return verdict
        more_a, more_b = measure(min(step, max_processes - taken))
        a.extend(more_a)
        b.extend(more_b)
