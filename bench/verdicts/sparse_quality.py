#!/usr/bin/env python
"""Verdicts on sparse series (a night of `asv run --steps N`): every step of either sign,
fwdasv's detector beside asv's `step_detect` on the same medians.

    python bench/verdicts/sparse_quality.py --seed 1 --histories 1000 [--markdown]

Families (FAMILIES): 6-12 measured commits, 0-3 steps of either sign at any place (levels
inside the history of 2+ commits, the first and the newest of 1+), each step's size
log-uniform in 3-30 times the series' true noise; CPU-like (a commit's process offset
1-3%, in-run spread of a sample 1-3%, 5% odd processes +5-15%) and GPU-like
(`simulate.random_spec`: 0.05-0.5%, 3% odd processes +1-3%) noise; and the doubled
forward at 0.2% noise with 2|3 and 1|2 commits. Per family: steps found at their commit
with the right sign (all; >= 10x the noise, and of those the ones confirm's re-measure
kept), with the right status (slower: `regression` or `suspected`, faster: `improvement`;
slower as `regression`); histories with a false finding (at no step's commit or of the
wrong sign, any status), the same once confirm's simulated re-measure of each (both
signs, as nightly re-measures them) set the `not-reproduced` aside, and after the night: a
confirmed slower one whose re-measured A..B holds a slower step is bisected there by the
real `Bisector` on simulated processes (`placed_by_bisect`), and no longer counts once it
names that step's commit; with a false slower finding (`regression` or `suspected`: a
slowdown listed where there is none; before and after confirm), with a false
`regression`; asv's
`step_detect` (weighted as `asv publish` does) on the same medians: a change of its levels
at the step's commit with its sign, any size and 5%+. Last, the size error of the steps
each found (|reported ln size - true| / |true|: median / 90th percentile). Seeds: (seed,
family, index).
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

try:
    import fwdasv  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bisect_simulate
from asv._stats import get_weight
from asv.graph import Graph

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.rules.confirm import MAX_PROCESSES, ab_indices
from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import TO_CONFIRM, ReMeasureStatus, Status
from fwdasv.analysis.rules.step import Step

STEP_NOISE = (3.0, 30.0)  # a step's size, log-uniform, in multiples of the true noise
LARGE = 10.0  # the must-show: steps >= this many times the noise
ASV_THRESHOLD = 0.05
CPU_BETWEEN_PCT = (1.0, 3.0)
CPU_WITHIN_PCT = (1.0, 3.0)
CPU_OUTLIER_RATE = 0.05
CPU_OUTLIER_PCT = (5.0, 15.0)
# Commits asv left unmeasured in each gap between measured ones, for bisect's search: a
# 30-commit range at `--steps 6` leaves 4-5.
GAP_COMMITS = 4


@dataclass(frozen=True)
class Family:
    """Histories of `commits` (a range) with `steps` (a range) steps on `machine` noise;
    `fixed`: a doubled forward at 0.2% noise, (commits before, after)."""

    machine: str  # "cpu" or "gpu"
    commits: tuple[int, int]
    steps: tuple[int, int]
    fixed: tuple[int, int] | None = None


FAMILIES = {
    "cpu 6-8, 1 step": Family("cpu", (6, 8), (1, 1)),
    "cpu 6-8, 2 steps": Family("cpu", (6, 8), (2, 2)),
    "cpu 9-12, 0-3 steps": Family("cpu", (9, 12), (0, 3)),
    "cpu 6-12, none": Family("cpu", (6, 12), (0, 0)),
    "gpu 6-8, 1 step": Family("gpu", (6, 8), (1, 1)),
    "gpu 6-8, 2 steps": Family("gpu", (6, 8), (2, 2)),
    "gpu 9-12, 0-3 steps": Family("gpu", (9, 12), (0, 3)),
    "gpu 6-12, none": Family("gpu", (6, 12), (0, 0)),
    "2+3 x2 at 0.2%": Family("gpu", (5, 5), (1, 1), fixed=(2, 3)),
    "1+2 x2 at 0.2%": Family("gpu", (3, 3), (1, 1), fixed=(1, 2)),
}


def spec(machine: str, rng: np.random.Generator) -> sim.SeriesSpec:
    if machine == "gpu":
        return sim.random_spec(rng)
    return sim.SeriesSpec(
        base_s=2e-3,
        between_pct=float(
            math.exp(rng.uniform(math.log(CPU_BETWEEN_PCT[0]), math.log(CPU_BETWEEN_PCT[1])))
        ),
        within_pct=float(rng.uniform(*CPU_WITHIN_PCT)),
        outlier_rate=CPU_OUTLIER_RATE,
        outlier_pct=CPU_OUTLIER_PCT,
    )


def places(rng: np.random.Generator, commits: int, steps: int) -> list[int]:
    """`steps` first commits of new levels: levels inside of 2+ commits, the ends of 1+."""
    for _ in range(1000):
        at = sorted(int(i) for i in rng.choice(np.arange(1, commits), steps, replace=False))
        if all(b - a >= 2 for a, b in itertools.pairwise(at)):
            return at
    raise ValueError(f"{steps} steps do not fit {commits} commits")


@dataclass(frozen=True)
class Truth:
    index: int
    up: bool
    large: bool  # >= LARGE times the noise
    log_size: float  # ln of the step's factor


@dataclass(frozen=True)
class Outcome:
    family: str
    truths: tuple[Truth, ...]
    found: tuple[bool, ...]  # per truth: a finding at its commit, right sign
    kept: tuple[bool, ...]  # ... that confirm's re-measure did not set aside
    status: tuple[bool, ...]  # ... and the right status
    regression: tuple[bool, ...]  # ... as `regression` (slower steps)
    false_any: bool
    false_after_confirm: bool  # a false finding left once confirm re-measured every one
    false_after_night: bool  # ... and bisect placed the confirmed slower ones (A..B held a step)
    false_slower: bool  # a false `regression` or `suspected` (a slowdown listed where none is)
    false_slower_after_confirm: bool  # the same once confirm set the `not-reproduced` aside
    false_regression: bool
    asv_any: tuple[bool, ...]
    asv_5: tuple[bool, ...]
    asv_false: bool  # a change of asv's levels of 5%+ at no step's commit
    # Per truth found at its commit with its sign: |reported log size - true| / |true|
    # (fwdasv's finding; asv's change of levels there); None where not found.
    size_error: tuple[float | None, ...]
    asv_size_error: tuple[float | None, ...]


def asv_changes(history: sim.SimHistory) -> list[tuple[int, float]]:
    """asv's `step_detect` on the stored medians, weighted as `asv publish` weighs them:
    (first commit of each new level, relative change)."""
    graph = Graph("sim.track_latency", {"machine": "sim"})
    for revision, stored in enumerate(history.asv_stored()):
        if stored is None:
            graph.add_data_point(revision, None, None)
        else:
            graph.add_data_point(revision, stored["median"], get_weight(stored))
    steps = graph.get_steps()
    return [(int(b[0]), b[2] / a[2] - 1) for a, b in itertools.pairwise(steps)]


def draw(task: tuple[str, int, int]) -> tuple[sim.SimHistory, tuple[Truth, ...]]:
    """The history of (family, seed, index) and its true steps."""
    name, seed, index = task
    family = FAMILIES[name]
    rng = np.random.default_rng([seed, 2000 + list(FAMILIES).index(name), index])
    if family.fixed is not None:
        before, after = family.fixed
        series = sim.random_spec(rng, between_pct=0.2)
        commits, at, factors = before + after, [before], [2.0]
    else:
        series = spec(family.machine, rng)
        commits = int(rng.integers(family.commits[0], family.commits[1] + 1))
        count = int(rng.integers(family.steps[0], family.steps[1] + 1))
        at = places(rng, commits, count)
        low, high = (math.log(v) for v in STEP_NOISE)
        sizes = np.exp(rng.uniform(low, high, len(at)))
        signs = rng.choice([-1.0, 1.0], len(at))
        factors = [
            math.exp(s * z * series.true_noise_pct / 100) for s, z in zip(signs, sizes, strict=True)
        ]
    shifts = [sim.Shift(i, 100 * (f - 1)) for i, f in zip(at, factors, strict=True)]
    history = sim.simulate(series, rng, commits, shifts)
    truths = tuple(
        Truth(i, f > 1, abs(math.log(f)) >= LARGE * series.true_noise_pct / 100, math.log(f))
        for i, f in zip(at, factors, strict=True)
    )
    return history, truths


def slower(status: Status) -> bool:
    """Whether a finding of this status says the series got slower."""
    return status != Status.IMPROVEMENT


def false_findings(found: Sequence[Step], truths: Sequence[Truth]) -> list[Step]:
    """The findings at no step's commit, or of the wrong sign (any status)."""
    good = {(t.index, t.up) for t in truths}
    return [f for f in found if (f.after_index, slower(f.status)) not in good]


def re_measured(
    history: sim.SimHistory,
    found: Sequence[Step],
    noise: Noise,
    rng: np.random.Generator,
    *,
    improvements: bool = True,
) -> list[tuple[Step, ReMeasureStatus | None]]:
    """Each of `found` with what confirm's simulated A/B (`simulate.confirm_step`) said of
    it: every slower one, and with `improvements` (nightly's default) every speed-up too;
    None where it was not re-measured."""
    return [
        (
            f,
            sim.confirm_step(history, f, noise, rng).status
            if f.status in TO_CONFIRM or improvements
            else None,
        )
        for f in found
    ]


def left_after_confirm(
    history: sim.SimHistory,
    found: Sequence[Step],
    noise: Noise,
    rng: np.random.Generator,
    *,
    improvements: bool = True,
) -> list[Step]:
    """What a nightly user sees of `found`: a `not-reproduced` one set aside (`re_measured`)."""
    return [
        f
        for f, status in re_measured(history, found, noise, rng, improvements=improvements)
        if status != ReMeasureStatus.NOT_REPRODUCED
    ]


def placed_by_bisect(
    history: sim.SimHistory,
    finding: Step,
    status: ReMeasureStatus | None,
    truths: Sequence[Truth],
    seed: int,
) -> bool:
    """Whether the night's bisect names a true step's commit for `finding`: a confirmed
    slowdown is bisected over its re-measured A..B (`from_findings.finding_range`). Where
    a slower step lies inside, the real `Bisector` searches A..B's commits (GAP_COMMITS
    unmeasured in each measured gap) on simulated processes of this series' noise and odd
    processes (`bisect_simulate.trial`); True only when it names the step's commit."""
    if status != ReMeasureStatus.CONFIRMED or not slower(finding.status):
        return False
    a_index, b_index = ab_indices(finding, history.medians())
    inside = [t for t in truths if t.up and a_index < t.index <= b_index]
    if not inside:
        return False
    (shift,) = [s for s in history.shifts if s.index == inside[0].index]
    sd = history.spec.true_noise_pct
    scenario = bisect_simulate.Scenario(
        "sparse",
        shift.pct,
        (sd, sd),
        commits=(b_index - a_index) * (GAP_COMMITS + 1) + 1,
        outlier=history.spec.outlier_rate,
        outlier_pct=history.spec.outlier_pct,
    )
    return bisect_simulate.trial(scenario, seed, MAX_PROCESSES)[0] == "right"


def run(task: tuple[str, int, int]) -> Outcome:
    name = task[0]
    history, truths = draw(task)
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise, improvements=True, samples=history.samples)
    family_index = list(FAMILIES).index(name)

    def at_truth(t: Truth) -> list[Step]:
        """The findings at `t`'s commit with its sign."""
        return [f for f in findings if f.after_index == t.index and slower(f.status) == t.up]

    # The true findings re-measured as the night re-measures them (seeds of their own).
    true_rng = np.random.default_rng([task[1], 4000 + family_index, task[2]])
    kept = tuple(
        bool(mine) and bool(left_after_confirm(history, mine[:1], noise, true_rng))
        for mine in map(at_truth, truths)
    )

    false = false_findings(findings, truths)
    # Confirm re-measures the false ones only here (their own seeds).
    confirm_rng = np.random.default_rng([task[1], 3000 + family_index, task[2]])
    standing = [
        (k, f, v)
        for k, (f, v) in enumerate(re_measured(history, false, noise, confirm_rng))
        if v != ReMeasureStatus.NOT_REPRODUCED
    ]
    left = [f for _, f, _ in standing]
    after_night = [
        f
        for k, f, v in standing
        if not placed_by_bisect(
            history, f, v, truths, (task[1] * 100 + family_index) * 1_000_000 + task[2] * 10 + k
        )
    ]
    changes = asv_changes(history)
    good = {(t.index, t.up) for t in truths}

    def error(t: Truth, percents: Sequence[float]) -> float | None:
        """How far the first reported size at `t` is from its true size, as a share of it."""
        if not percents:
            return None
        return abs(math.log1p(percents[0] / 100) - t.log_size) / abs(t.log_size)

    asv_good = [(i, r) for i, r in changes if (i, r > 0) in good]
    return Outcome(
        family=name,
        truths=truths,
        found=tuple(bool(at_truth(t)) for t in truths),
        kept=kept,
        status=tuple(
            any(
                f.status
                in ((Status.REGRESSION, Status.SUSPECTED) if t.up else (Status.IMPROVEMENT,))
                for f in at_truth(t)
            )
            for t in truths
        ),
        regression=tuple(any(f.status == Status.REGRESSION for f in at_truth(t)) for t in truths),
        false_any=bool(false),
        false_after_confirm=bool(left),
        false_after_night=bool(after_night),
        false_slower=any(slower(f.status) for f in false),
        false_slower_after_confirm=any(slower(f.status) for f in left),
        false_regression=any(f.status == Status.REGRESSION for f in false),
        asv_any=tuple(any(i == t.index and (r > 0) == t.up for i, r in changes) for t in truths),
        asv_5=tuple(
            any(i == t.index and (r > 0) == t.up and abs(r) >= ASV_THRESHOLD for i, r in changes)
            for t in truths
        ),
        asv_false=any(abs(r) >= ASV_THRESHOLD for i, r in changes if (i, r) not in asv_good),
        size_error=tuple(error(t, [f.percent for f in at_truth(t)]) for t in truths),
        asv_size_error=tuple(
            error(t, [100 * r for i, r in changes if i == t.index and (r > 0) == t.up])
            for t in truths
        ),
    )


def _share(flags: Iterable[bool]) -> str:
    values = list(flags)
    if not values:
        return "-"
    return f"{100 * sum(values) / len(values):.1f}% ({sum(values)}/{len(values)})"


def _errors(values: Iterable[float | None]) -> str:
    """Median and 90th percentile of the size errors told, in percent of the true size."""
    told = [v for v in values if v is not None]
    if not told:
        return "-"
    mid, high = np.percentile(told, [50, 90])
    return f"{100 * mid:.1f}% / {100 * high:.1f}% ({len(told)})"


HEADERS = (
    "family",
    "steps found at their commit, right sign",
    "of those >= 10x noise",
    ">= 10x noise, found and kept by confirm",
    "right status",
    "slower ones as regression",
    "false finding (histories)",
    "second figure: false finding after confirm (both signs re-measured)",
    "after the night (confirmed slower ones bisected)",
    "false slower finding (regression or suspected)",
    "false slower finding after confirm",
    "false regression",
    "asv step_detect: found (any size)",
    "asv: >= 10x noise",
    "asv: found at 5%",
    "asv: false change >= 5%",
    "size error of those found, median / p90 (n)",
    "asv: size error of those found, median / p90 (n)",
)


def rows(outcomes: list[Outcome]) -> list[list[str]]:
    out = []
    for name in FAMILIES:
        mine = [o for o in outcomes if o.family == name]
        if not mine:
            continue
        pairs = [(o, k) for o in mine for k in range(len(o.truths))]
        large = [(o, k) for o, k in pairs if o.truths[k].large]
        slower = [(o, k) for o, k in pairs if o.truths[k].up]
        out.append(
            [
                name,
                _share(o.found[k] for o, k in pairs),
                _share(o.found[k] for o, k in large),
                _share(o.kept[k] for o, k in large),
                _share(o.status[k] for o, k in pairs),
                _share(o.regression[k] for o, k in slower),
                _share(o.false_any for o in mine),
                _share(o.false_after_confirm for o in mine),
                _share(o.false_after_night for o in mine),
                _share(o.false_slower for o in mine),
                _share(o.false_slower_after_confirm for o in mine),
                _share(o.false_regression for o in mine),
                _share(o.asv_any[k] for o, k in pairs),
                _share(o.asv_any[k] for o, k in large),
                _share(o.asv_5[k] for o, k in pairs),
                _share(o.asv_false for o in mine),
                _errors(o.size_error[k] for o, k in pairs),
                _errors(o.asv_size_error[k] for o, k in pairs),
            ]
        )
    return out


def evaluate(seed: int, histories: int, workers: int, only: tuple[str, ...]) -> list[Outcome]:
    todo = [(n, seed, i) for n in FAMILIES if not only or n in only for i in range(histories)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(run, todo, chunksize=32)
    return [run(t) for t in todo]


@click.command()
@click.option("--seed", default=1, show_default=True)
@click.option("--histories", default=1000, show_default=True, help="Histories per family.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 2))
@click.option("--family", "only", multiple=True, type=click.Choice(list(FAMILIES)))
@click.option("--markdown", is_flag=True, help="A Markdown table for docs/measurements.md.")
def main(seed: int, histories: int, workers: int, only: tuple[str, ...], markdown: bool) -> None:
    """Every step of sparse series: fwdasv beside asv's step_detect."""
    started = time.perf_counter()
    table = rows(evaluate(seed, histories, workers, only))
    seconds = time.perf_counter() - started
    if markdown:
        lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(r) + " |" for r in table]
    else:
        widths = [max(len(x) for x in col) for col in zip(HEADERS, *table, strict=True)]
        lines = [
            "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True))
            for r in [list(HEADERS), *table]
        ]
    lines.append(
        f"\nseed {seed}, {histories} histories per family, {seconds:.0f} s on {workers} worker(s)"
    )
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
