"""Drift: the machine changed under a step, not the code.

An environment change (a driver, a power cap, another host) moves every series of a
machine at once, the canary suite included. `mark_drift` labels a step `drift` when
the machine's canary (or a clock series, inverted) steps up at the same place (+-1
commit), tested there rather than scanned, by at least DRIFT_FRACTION of the step,
and what it leaves of the step is below DRIFT_RESIDUAL_Z. `mark_environment_drift`
does the same where the machine's recorded torch, driver or CUDA differs between a
step's two commits. Inputs: steps, the canary's medians and noise (or the recorded
environments); output: the steps with status `drift` where so. Missing a drift costs
a confirmation run; calling a regression drift hides it, so the rule leans to
regression. The figures: docs/verdicts.md, "Drift".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from fwdasv.analysis.rules.levels import despike, valid_logs
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status, finding_status
from fwdasv.analysis.rules.step import Step

DRIFT_TOLERANCE = 1  # commits between a finding and the canary's step
DRIFT_Z = 3.0  # the canary's one-sided z there
DRIFT_FRACTION = 0.5  # and at least this fraction of the finding's step
DRIFT_WINDOW = 10  # commits each side the canary's step is measured over
DRIFT_RESIDUAL_Z = 3.0  # what the canary's step leaves of a finding at this z is the code's


@dataclass(frozen=True)
class CanaryStep:
    """The canary's own change at a commit: z and percent over DRIFT_WINDOW commits each side."""

    after_index: int
    percent: float
    z: float


def canary_step(
    canary_medians: Sequence[float | None],
    canary_noise: Noise,
    after_index: int,
    window: int = DRIFT_WINDOW,
) -> CanaryStep | None:
    """The canary's step at `after_index`: its despiked ln medians, up to `window` commits
    with data before `after_index` against as many from it on. None: fewer than 2 a side."""
    index, logs = valid_logs(canary_medians)
    if logs.size < 4:
        return None
    sigma = canary_noise.sigma
    clean = despike(logs, sigma)
    split = int(np.searchsorted(index, after_index))
    before, after = clean[max(0, split - window) : split], clean[split : split + window]
    if before.size < 2 or after.size < 2:
        return None
    log_step = float(after.mean() - before.mean())
    z = log_step / (sigma * math.sqrt(1 / before.size + 1 / after.size))
    return CanaryStep(after_index, 100 * math.expm1(log_step), z)


def _residual_z(step: Step, canary: CanaryStep) -> float:
    """The z of what is left of `step` with the canary's step taken out of it (ln terms):
    the difference of the two steps over both their standard errors (each step's size
    over its own z), so a canary measured a little short of an environment's shift does
    not leave a "regression" of the difference."""
    log_step = math.log1p(step.percent / 100)
    log_canary = math.log1p(canary.percent / 100)
    if log_step <= 0 or step.z <= 0 or canary.z <= 0:
        return 0.0
    se = math.hypot(log_step / step.z, log_canary / canary.z)
    return (log_step - log_canary) / se


def mark_drift(
    findings: Sequence[Step],
    canary_medians: Sequence[float | None],
    canary_noise: Noise,
    *,
    tolerance: int = DRIFT_TOLERANCE,
) -> list[Step]:
    """`findings` with status `drift` where the machine's canary stepped up with them.

    The canary (same machine, same commits, None where it failed) stepped up
    with a finding when, at the finding's first new commit +-`tolerance`, its
    own step has z >= DRIFT_Z (one-sided, at a known place: no scan) and is at
    least DRIFT_FRACTION of the finding's size (in ln terms): a canary moving
    by 0.2% does not explain a 2% step. And what the canary's step leaves of
    the finding must be below DRIFT_RESIDUAL_Z (over both steps' standard
    errors): the machine explains the canary's size, and a step clearly beyond
    it is the code's too. Missing a drift costs a confirmation
    run (on one machine A and B see the same environment and the finding is
    not reproduced); calling a regression drift would hide it, so the rule
    leans to regression.
    """
    out = []
    for step in findings:
        if step.status == Status.IMPROVEMENT:
            out.append(step)  # the canary tells a slower machine; a faster step stays
            continue
        needed = DRIFT_FRACTION * math.log1p(step.percent / 100)
        drift = False
        for offset in range(-tolerance, tolerance + 1):
            moved = canary_step(canary_medians, canary_noise, step.after_index + offset)
            # The machine explains the canary's size of the step, not more: what is left
            # stands on the finding's own evidence (a +105% step beside a busy box's +45%
            # canary is still the code's). Any offset within the tolerance may explain it.
            if (
                moved
                and moved.z >= DRIFT_Z
                and math.log1p(moved.percent / 100) >= needed
                and _residual_z(step, moved) < DRIFT_RESIDUAL_Z
            ):
                drift = True
                break
        out.append(
            replace(step, status=finding_status(step.status, machine_moved=True)) if drift else step
        )
    return out


def mark_environment_drift(
    steps: Sequence[Step], environments: Sequence[tuple[object, ...] | None]
) -> list[Step]:
    """`steps` with status `drift` where the machine's recorded environment differs between
    the step's last old commit and its first new one (another torch or driver moves a
    series however good the code: asv splits such a series; fwdasv keeps it whole and
    does not count the step)."""
    out = []
    for step in steps:
        before = environments[step.before_index] if step.before_index < len(environments) else None
        after = environments[step.after_index] if step.after_index < len(environments) else None
        changed = before is not None and after is not None and before != after
        out.append(
            replace(step, status=finding_status(step.status, environment_changed=True))
            if changed
            else step
        )
    return out
