"""`fwdasv check`'s looks on simulated process medians: when it stops, what it says, at what cost.

    python bench/verdicts/check_looks.py [--pairs 1000] [--seed 1] [--max-processes 12]

Each pair is BASE and HEAD process medians drawn around one level (HEAD `step` slower),
each process off by a normal draw of `spread` (0.1%: an H100's or H200's process medians,
docs/measurements.md sections 25 and 32; 0.3%; 1%; 5%: a busy CPU box), in the last rows
with a share `odd` of processes 15-40% slow besides (a neighbour's burst), and fed to the
check's real looks (`fwdasv.analysis.check.check._judged`, then `_held`) with no stored
history, as `fwdasv check` judges. Two stopping rules side by side on the same draws:

- before: stop when `judge_ab`'s `more_processes` (the width that decides any estimate,
  at today's pooled sd, mostly the 1% prior after 3+3) exceeds what is left;
- after: stop when `rules.check.processes_to_decide` (the run's own estimate and spread,
  the prior's weight fading with the degrees of freedom) exceeds `--max-processes`.

Prints, per spread and step, each rule's share of `worse` (a false alarm where the step
is 0, a detection where it is at least min_effect_pct, 0.3%), `undecided`, and the mean
processes a side it took.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from fwdasv.analysis.check import check
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.check import check_status
from fwdasv.analysis.rules.confirm import Confirmation
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import ReMeasureStatus

MIN_EFFECT_PCT = 0.3
# (spread %, share of odd processes): steady, then with a neighbour's bursts.
SCENARIOS = ((0.1, 0.0), (0.3, 0.0), (1.0, 0.0), (5.0, 0.0), (0.1, 0.05), (2.0, 0.15), (5.0, 0.15))
STEPS = (0.0, 0.3, 0.5, 1.0, 2.0)


class Draws:
    """check's Cursor at its boundary: the next k process medians a side, from fixed draws."""

    def __init__(self, base: list[float], head: list[float]) -> None:
        self.sides = {"base": base, "head": head}
        self.taken = 0
        self.a, self.b, self.ref = "base", "head", None
        self.pool = self

    def values(self, commit: str, ref: object) -> list[float]:
        return self.sides[commit]

    def measure(self, k: int) -> tuple[list[float], list[float]]:
        start, self.taken = self.taken, self.taken + k
        return self.sides["base"][start : self.taken], self.sides["head"][start : self.taken]


def judged_before(
    cursor: Draws, noise: Noise, min_effect: float, max_processes: int
) -> Confirmation:
    """The looks as they stopped before: on `judge_ab`'s own projection."""
    a, b = (list(side) for side in cursor.measure(min(confirm.MIN_PROCESSES, max_processes)))
    while True:
        verdict = confirm.judge_ab(a, b, noise, min_effect_pct=min_effect)
        left = max_processes - min(len(a), len(b))
        if verdict.status != ReMeasureStatus.UNDECIDED or left < 1 or verdict.more_processes > left:
            return verdict
        more_a, more_b = cursor.measure(min(confirm.STEP_PROCESSES, left))
        a.extend(more_a)
        b.extend(more_b)


Looks = Callable[[Draws, Noise, float, int], Confirmation]


def run(
    looks: Looks, draws: list[tuple[list[float], list[float]]], max_processes: int
) -> tuple[Counter[str], float]:
    noise = estimate_noise(())
    words: Counter[str] = Counter()
    taken = 0
    for base, head in draws:
        cursor = Draws(base, head)
        verdict = looks(cursor, noise, MIN_EFFECT_PCT, max_processes)  # type: ignore[arg-type]
        verdict = check._held(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes, None)  # type: ignore[arg-type]
        words[str(check_status(verdict, MIN_EFFECT_PCT))] += 1
        taken += cursor.taken
    return words, taken / len(draws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-processes", type=int, default=confirm.MAX_PROCESSES)
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    width = 2 * args.max_processes
    print(
        f"{args.pairs} pairs a cell, seed {args.seed}, max {args.max_processes} processes a side, min_effect_pct {MIN_EFFECT_PCT}"
    )
    print()
    print(
        "| spread | odd | step | before: worse | before: undecided | before: processes "
        "| after: worse | after: undecided | after: processes |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for spread, odd in SCENARIOS:
        for step in STEPS:
            offs = rng.standard_normal((args.pairs, 2, width)) * spread / 100
            if odd:
                slow = rng.random((args.pairs, 2, width)) < odd
                offs += slow * rng.uniform(0.15, 0.40, (args.pairs, 2, width))
            draws = [
                (list(1000 * (1 + d[0])), list(1000 * (1 + step / 100) * (1 + d[1]))) for d in offs
            ]
            cells = []
            for looks in (judged_before, check._judged):
                words, mean = run(looks, draws, args.max_processes)  # type: ignore[arg-type]
                share = {w: 100 * words[w] / args.pairs for w in ("worse", "undecided")}
                cells += [f"{share['worse']:.1f}%", f"{share['undecided']:.1f}%", f"{mean:.1f}"]
            print(f"| {spread:g}% | {odd:.0%} | {step:g}% | " + " | ".join(cells) + " |")
    print()
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
