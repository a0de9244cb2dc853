#!/usr/bin/env python
"""Where the false findings and the missed large steps of the sparse families come from.

    python bench/verdicts/sparse_false.py --seed 1 --histories 300 [--workers 2]

The histories of `sparse_quality.py` (the same seeds). Each false finding (at no step's
commit, or of the wrong sign; any status) is put in one class by what the simulator
knows: a step of its sign within 2 commits (`misplaced`), a step at its commit of the
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

from sparse_quality import FAMILIES, draw  # noqa: E402

from fwdasv.analysis import simulate as sim  # noqa: E402
from fwdasv.analysis.rules import segment  # noqa: E402
from fwdasv.analysis.rules.detect import detect  # noqa: E402
from fwdasv.analysis.rules.noise import estimate_noise  # noqa: E402
from fwdasv.analysis.rules.status import TO_CONFIRM, ReMeasureStatus, Status  # noqa: E402

NEAR = 2


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
    rules = detect(medians, noise, improvements=True, samples=history.samples, segments=False)
    n = history.commits
    odd = set(history.outliers)

    def up(status: Status) -> bool:
        return status != Status.IMPROVEMENT

    good = {(t.index, t.up) for t in truths}
    false = [f for f in found if (f.after_index, up(f.status)) not in good]
    out = []
    for f in false:
        i, sign = f.after_index, up(f.status)
        if any(t.up == sign and abs(t.index - i) <= NEAR for t in truths):
            kind = "misplaced"
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
        listed = any((r.after_index, up(r.status)) == (i, sign) for r in rules)
        out.append((kind, str(f.status), listed))
    rng = np.random.default_rng([task[1], 9000 + list(FAMILIES).index(task[0]), task[2]])
    seen = [
        f
        for f in false
        if f.status not in TO_CONFIRM
        or sim.confirm_step(history, f, noise, rng).status != ReMeasureStatus.NOT_REPRODUCED
    ]
    missed = []
    for t in truths:
        if not t.large or any(f.after_index == t.index and up(f.status) == t.up for f in found):
            continue
        place = "start" if t.index == 1 else "head" if t.index == n - 1 else "inside"
        beside = "odd beside" if {t.index - 1, t.index} & odd else "no odd"
        near = any(abs(f.after_index - t.index) <= NEAR and up(f.status) == t.up for f in found)
        missed.append((place, beside, "found near" if near else "not found"))
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
@click.option("--bayes", default=0.0, help="A variant: the step prior of the odds rule.")
def main(
    seed: int,
    histories: int,
    workers: int,
    only: tuple[str, ...],
    odd_end_spreads: float,
    alpha: float,
    bayes: float,
) -> None:
    """The false findings and missed large steps of the sparse families, by cause."""
    segment.ODD_END_SPREADS = odd_end_spreads
    segment.SEGMENT_ALPHA = alpha
    segment.BAYES = bayes > 0
    segment.STEP_PRIOR = bayes
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
