#!/usr/bin/env python
"""Where the false findings and the missed large steps of the sparse families come from.

    python bench/verdicts/sparse_false.py --seed 1 --histories 300 [--workers 2]

The histories of `sparse_quality.py` (the same seeds). Each false finding (at no step's
commit, or of the wrong sign; any status) is put in one class by what the simulator
knows: a step of its sign within 2 commits (`misplaced`, by the step's size against 10x
the noise), a step at its commit of the
other sign (`wrong sign`), else by the odd processes beside it: one odd first commit
(`odd start`), one odd newest (`odd head`), two odd commits in a row (`odd pair`), one
odd commit inside (`odd inside`), none (`noise`); with its status and whether the rules
alone (`detect(..., segments=False)`) list it too. Each missed step >= 10x the noise:
its place (start: the first commit alone before it; head: the newest alone after it;
inside), an odd commit beside it, and whether a finding of its sign lies within 2
commits. Then the false findings a nightly user sees: each `regression`/`suspected` one
re-measured by the simulated confirm (`simulate.confirm_step`), a `not-reproduced` one
dropped (improvements are never re-measured).
"""

from __future__ import annotations

import collections
import math
import multiprocessing
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

try:
    import fwdasv  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sparse_quality import FAMILIES, draw, false_findings, left_after_confirm, slower

from fwdasv.analysis.rules import segment
from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import Step

NEAR = 2
# Variants of a rule on a lone end commit slower than the level beside it (a slow first
# commit: an improvement after it; a slow newest: a rise), applied to detect's findings:
# drop it when within this many in-run spreads of one sample (0: off) ...
ODD_END_SPREADS = 0.0
# ... or when the posterior odds step : odd process are below 1 (0: off): a change of
# one sign at one gap with this prior chance, its size log-uniform over STEP_DECADES;
# an odd process at the machine class's rate, its size uniform in its range (ln),
# each blurred by the change's own sd. The classes and their priors are the sparse
# families' design: in-run spread below 1% an accelerator.
STEP_PRIOR = 0.0
STEP_DECADES = 1.0
ACCELERATOR_SPREAD = 0.01
ODD_ACCELERATOR = (0.03, math.log(1.01), math.log(1.03))
ODD_CPU = (0.05, math.log(1.05), math.log(1.15))


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _odd(f: segment.Fit, lone: int, other: segment.Level, d: float) -> bool:
    """Whether the lone end commit `lone`, d (ln) slower than `other`, is dropped."""
    if ODD_END_SPREADS:
        return d < ODD_END_SPREADS * f.spread
    rate, low, high = ODD_ACCELERATOR if 0 < f.spread < ACCELERATOR_SPREAD else ODD_CPU
    sd = math.sqrt(f.errors[lone] ** 2 + f.tau**2 + 1 / other.weight)
    odd = (_normal_cdf((d - low) / sd) - _normal_cdf((d - high) / sd)) / (high - low)
    step = 1 / (d * STEP_DECADES * math.log(10))
    return odd > 0 and STEP_PRIOR * step < rate * odd


def odd_end_variant(found: list[Step], f: segment.Fit) -> list[Step]:
    """`found` less the findings at a lone slower end commit the variant calls odd."""
    if not (ODD_END_SPREADS or STEP_PRIOR) or len(f.levels) < 2:
        return found
    drop = set()
    first, second = f.levels[0], f.levels[1]
    if (
        first.b - first.a == 1
        and first.mean > second.mean
        and _odd(f, first.a, second, first.mean - second.mean)
    ):
        drop.add((int(f.index[second.a]), False))
    last, before = f.levels[-1], f.levels[-2]
    if (
        last.b - last.a == 1
        and last.mean > before.mean
        and _odd(f, last.a, before, last.mean - before.mean)
    ):
        drop.add((int(f.index[last.a]), True))
    return [s for s in found if (s.after_index, s.status != Status.IMPROVEMENT) not in drop]


@dataclass(frozen=True)
class Tally:
    family: str
    false: tuple[tuple[str, str, bool], ...]  # (class, status, the rules alone list it)
    false_after_confirm: bool
    false_any: bool
    missed: tuple[tuple[str, str, str], ...]  # (place, odd beside, near finding)
    large: int


def classify(task: tuple[str, int, int]) -> Tally:
    history, truths = draw(task)
    noise = estimate_noise(history.samples)
    medians = history.medians()
    found = detect(medians, noise, improvements=True, samples=history.samples)
    if ODD_END_SPREADS or STEP_PRIOR:
        found = odd_end_variant(found, segment.fit(medians, noise, history.samples))
    rules = detect(medians, noise, improvements=True, samples=history.samples, segments=False)
    n = history.commits
    odd = set(history.outliers)

    false = false_findings(found, truths)
    out = []
    for f in false:
        i, sign = f.after_index, slower(f.status)
        near = [t for t in truths if t.up == sign and abs(t.index - i) <= NEAR]
        if near:
            kind = "misplaced >= 10x" if any(t.large for t in near) else "misplaced < 10x"
        elif any(t.index == i for t in truths):
            kind = "wrong sign"
        elif i == 1 and 0 in odd and not sign:
            kind = "odd start"
        elif i == n - 1 and n - 1 in odd and sign:
            kind = "odd head"
        elif {i - 1, i} <= odd or {i, i + 1} <= odd or {i - 2, i - 1} <= odd:
            kind = "odd pair"
        elif {i - 1, i} & odd:
            kind = "odd inside"
        else:
            kind = "noise"
        listed = any((r.after_index, slower(r.status)) == (i, sign) for r in rules)
        out.append((kind, str(f.status), listed))
    rng = np.random.default_rng([task[1], 9000 + list(FAMILIES).index(task[0]), task[2]])
    seen = left_after_confirm(history, false, noise, rng)
    missed = []
    for t in truths:
        if not t.large or any(f.after_index == t.index and slower(f.status) == t.up for f in found):
            continue
        place = "start" if t.index == 1 else "head" if t.index == n - 1 else "inside"
        beside = "odd beside" if {t.index - 1, t.index} & odd else "no odd"
        close = any(
            abs(f.after_index - t.index) <= NEAR and slower(f.status) == t.up for f in found
        )
        missed.append((place, beside, "found near" if close else "not found"))
    return Tally(
        task[0],
        tuple(out),
        bool(seen),
        bool(false),
        tuple(missed),
        sum(t.large for t in truths),
    )


@click.command()
@click.option("--seed", default=1, show_default=True)
@click.option("--histories", default=300, show_default=True)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 2))
@click.option("--family", "only", multiple=True, type=click.Choice(list(FAMILIES)))
@click.option(
    "--odd-end-spreads",
    default=0.0,
    show_default=True,
    help="A variant: a slower lone end commit within this many in-run spreads is not listed.",
)
@click.option(
    "--alpha",
    default=segment.SEGMENT_ALPHA,
    show_default=True,
    help="A variant: the segmentation's nominal false-change chance.",
)
@click.option(
    "--step-prior", default=0.0, help="A variant: the odds rule with this step prior (0: off)."
)
def main(
    seed: int,
    histories: int,
    workers: int,
    only: tuple[str, ...],
    odd_end_spreads: float,
    alpha: float,
    step_prior: float,
) -> None:
    """The false findings and missed large steps of the sparse families, by cause."""
    global ODD_END_SPREADS, STEP_PRIOR  # read by the forked workers
    ODD_END_SPREADS, STEP_PRIOR = odd_end_spreads, step_prior
    segment.SEGMENT_ALPHA = alpha
    summary = []
    names = [n for n in FAMILIES if (not only or n in only) and FAMILIES[n].fixed is None]
    todo = [(n, seed, i) for n in names for i in range(histories)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            tallies = pool.map(classify, todo, chunksize=16)
    else:
        tallies = [classify(t) for t in todo]
    for name in names:
        mine = [t for t in tallies if t.family == name]
        falses = sum(t.false_any for t in mine)
        seen = sum(t.false_after_confirm for t in mine)
        large = sum(t.large for t in mine)
        missed = [m for t in mine for m in t.missed]
        click.echo(
            f"\n{name}: false findings {falses}/{len(mine)} histories "
            f"({100 * falses / len(mine):.1f}%), after confirm {seen} "
            f"({100 * seen / len(mine):.1f}%); >= 10x missed {len(missed)}/{large}"
        )
        ends = ("odd start", "odd head")
        odds = (*ends, "odd pair", "odd inside")
        floor_ends = sum(any(k not in ends for k, _, _ in t.false) for t in mine)
        floor_odd = sum(any(k not in odds for k, _, _ in t.false) for t in mine)
        summary.append(
            f"| {name} | {_pct(falses, len(mine))} | {_pct(seen, len(mine))} "
            f"| {_pct(floor_ends, len(mine))} | {_pct(floor_odd, len(mine))} "
            f"| {_pct(large - len(missed), large)} |"
        )
        kinds = collections.Counter(
            (k, s, "rules too" if r else "segment only") for t in mine for k, s, r in t.false
        )
        for key, count in kinds.most_common():
            click.echo(f"  false  {count:4d}  {' / '.join(key)}")
        for key, count in collections.Counter(missed).most_common():
            click.echo(f"  missed {count:4d}  {' / '.join(key)}")
    click.echo(
        "\n| family | false finding | after confirm | every odd end known | every odd commit"
        " known | >= 10x found |\n|---|---|---|---|---|---|"
    )
    click.echo("\n".join(summary))


def _pct(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


if __name__ == "__main__":
    main()
