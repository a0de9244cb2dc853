"""`fwdasv check`'s looks on simulated process medians: when it stops, what it says, at what cost.

    python bench/verdicts/check_looks.py [--pairs 1000] [--seed 1] [--max-processes 12]

Each pair is BASE and HEAD process medians drawn around one level (HEAD `step` slower),
each process off by a normal draw of `spread` (0.1%: an H100's or H200's process medians,
docs/measurements.md sections 25 and 32; 0.3%; 1%; 5%: a busy CPU box), in the last rows
with a share `odd` of processes 15-40% slow besides (a neighbour's burst), and fed to the
check's real looks (`fwdasv.analysis.check.check._judged`, then `_held`). Three ways side
by side on the same draws:

- before: no stored history; stop when `judge_ab`'s `more_processes` (the width that
  decides any estimate, at today's pooled sd, mostly the 1% prior after 3+3) exceeds what
  is left;
- after: no stored history (`--no-history`, or a project with no results on the
  machine); stop when `rules.check.processes_to_decide` (the run's own estimate and
  spread, the prior's weight fading with the degrees of freedom) exceeds
  `--max-processes`;
- history: as after, with the prior `fwdasv check` takes from a stored series
  (`check.stored_noise`: `estimate_noise` over it): `--history` commits (default 30),
  each the mean of `--history-processes` process medians (default 1) drawn as the pair's
  are, bursts included. A commit of several processes has a steadier median than one
  process, by about the square root of their number; the prior is scaled back to one
  process (`Noise.per_process`), as the check does.

Beside them, on the same process medians, asv's own pair rule: `asv continuous` marks a
benchmark worse when `asv.commands.compare._is_result_better(before, after)` (asv's code,
called as is): its Mann-Whitney U on the two sides' pooled samples at p < 0.002 (its 99%
intervals' overlap where there are too few samples), then the ratio of medians beyond
`--factor`, here 1 + min_effect_pct (`--asv-factor`; asv's default is 1.1). asv takes the samples of one run, so each side is
`--asv-processes` bench processes (1: a fwdasv suite's one launch a commit; 3: what the
check's first look takes) of `--asv-samples` samples each (10: a suite's default), each
sample off its process's median by a normal draw of `--within` times the spread (1: a
GPU's samples spread within a process about as its process medians do, the H100's
`track_spread_pct` 0.04-0.09% beside medians 0.04% apart, section 35). A process's burst
moves all its samples. Fixed cost: no looks.

`--levels GAP` asks another question: a GPU whose processes fall on one of two levels GAP %
apart (section 39's H100: 1393 and 1398 us, 0.36%; its stored history gave the check a
0.242% prior, and a docs-only pull request came out `undecided` at a cap of 3). Every
process, the stored history's included, lands on the upper level with probability 1/2,
besides its normal draw; only the steady rows at 0.03% and 0.1% spread are drawn, at
`--max-processes` (run it again with `--max-processes 3` for section 39's cap).

Prints, per spread and step, each way's share of `worse` (a false alarm where the step
is 0, a detection where it is at least min_effect_pct, 0.3%), `undecided`, and the mean
processes a side it took; asv's rule, its share of `worse`.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import numpy as np
from asv.commands.compare import _is_result_better
from asv_runner.statistics import compute_stats

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


def looks_until(
    cursor: Draws,
    noise: Noise,
    min_effect: float,
    max_processes: int,
    hopeless: Callable[[Confirmation, int], bool],
) -> Confirmation:
    """The check's looks, frozen as they once were: 3 a side, then 3 more while `judge_ab`
    says undecided, processes are left and `hopeless(verdict, left)` does not stop them."""
    a, b = (list(side) for side in cursor.measure(min(confirm.MIN_PROCESSES, max_processes)))
    while True:
        verdict = confirm.judge_ab(a, b, noise, min_effect_pct=min_effect)
        left = max_processes - min(len(a), len(b))
        if verdict.status != ReMeasureStatus.UNDECIDED or left < 1 or hopeless(verdict, left):
            return verdict
        more_a, more_b = cursor.measure(min(confirm.STEP_PROCESSES, left))
        a.extend(more_a)
        b.extend(more_b)


def judged_before(
    cursor: Draws, noise: Noise, min_effect: float, max_processes: int
) -> Confirmation:
    """The looks as they stopped before: on `judge_ab`'s own projection."""
    return looks_until(
        cursor,
        noise,
        min_effect,
        max_processes,
        lambda verdict, left: verdict.more_processes > left,
    )


Looks = Callable[[Draws, Noise, float, int], Confirmation]


def run(
    looks: Looks,
    draws: list[tuple[list[float], list[float]]],
    max_processes: int,
    priors: list[Noise] | None = None,
) -> tuple[Counter[str], float]:
    """Each pair judged by `looks` then `_held`, with its own prior (`priors`) or none."""
    words: Counter[str] = Counter()
    taken = 0
    for number, (base, head) in enumerate(draws):
        noise = priors[number] if priors is not None else estimate_noise(())
        cursor = Draws(base, head)
        verdict = looks(cursor, noise, MIN_EFFECT_PCT, max_processes)  # type: ignore[arg-type]
        verdict = check._held(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes, None)  # type: ignore[arg-type]
        words[str(check_status(verdict, MIN_EFFECT_PCT))] += 1
        taken += cursor.taken
    return words, taken / len(draws)


def asv_worse(
    base: list[float],
    head: list[float],
    rng: np.random.Generator,
    samples: int,
    within_pct: float,
    factor: float = 1 + MIN_EFFECT_PCT / 100,
) -> bool:
    """`asv continuous`'s verdict on one pair: each side's processes (their medians in
    `base`, `head`) give `samples` samples each, off their median by a normal draw of
    `within_pct` %; asv's compute_stats and its compare rule at `factor`."""
    sides = []
    for medians in (base, head):
        centre = np.repeat(np.asarray(medians, dtype=float), samples)
        values = [
            float(v) for v in centre * (1 + rng.standard_normal(centre.size) * within_pct / 100)
        ]
        median, stats = compute_stats(values, 1)
        sides.append((median, (stats, values)))
    (before, before_ss), (after, after_ss) = sides
    return bool(_is_result_better(before, after, before_ss, after_ss, factor))


def _offsets(
    rng: np.random.Generator, shape: tuple[int, ...], spread: float, odd: float, levels: float = 0
) -> np.ndarray:
    """Process medians' relative offsets: normal at `spread` %, and a share `odd` of them
    15-40% slow besides (a neighbour's burst); with `levels`, half of them, at random,
    `levels` % slower besides (a GPU whose processes fall on two levels)."""
    offs = rng.standard_normal(shape) * spread / 100
    if odd:
        offs += (rng.random(shape) < odd) * rng.uniform(0.15, 0.40, shape)
    if levels:
        offs += (rng.random(shape) < 0.5) * levels / 100
    return offs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-processes", type=int, default=confirm.MAX_PROCESSES)
    parser.add_argument(
        "--history", type=int, default=30, help="stored commits behind the history prior"
    )
    parser.add_argument(
        "--history-processes", type=int, default=1, help="bench processes a stored commit"
    )
    parser.add_argument(
        "--asv-processes",
        type=int,
        nargs="+",
        default=[1, 3],
        help="bench processes a side for asv's rule (one column each)",
    )
    parser.add_argument("--asv-samples", type=int, default=10, help="samples a process")
    parser.add_argument(
        "--asv-factor",
        type=float,
        default=1 + MIN_EFFECT_PCT / 100,
        help="asv's --factor (its default is 1.1) [default: 1 + min_effect_pct]",
    )
    parser.add_argument(
        "--within", type=float, default=1.0, help="samples' spread in a process / the spread"
    )
    parser.add_argument(
        "--levels",
        type=float,
        default=0.0,
        metavar="GAP",
        help="processes on two levels GAP %% apart (steady rows only) [default: one level]",
    )
    args = parser.parse_args()
    scenarios = ((0.03, 0.0), (0.1, 0.0)) if args.levels else SCENARIOS
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    asv_rng = np.random.default_rng([args.seed, 1])  # asv's samples: the other draws as before
    width = 2 * args.max_processes
    print(
        f"{args.pairs} pairs a cell, seed {args.seed}, max {args.max_processes} processes a "
        f"side, min_effect_pct {MIN_EFFECT_PCT}, history {args.history} stored commits of "
        f"{args.history_processes} process(es); asv's rule at {args.asv_processes} process(es) "
        f"a side of {args.asv_samples} samples, within-process spread {args.within:g} x spread, "
        f"factor {args.asv_factor:g}"
        + (f"; two levels {args.levels:g}% apart" if args.levels else "")
    )
    print()
    ways = ("before", "after", "history")
    print(
        "| spread | odd | step | "
        + " | ".join(f"{w}: {c}" for w in ways for c in ("worse", "undecided", "processes"))
        + "".join(f" | asv {k}+{k}: worse" for k in args.asv_processes)
        + " |"
    )
    print("|---|---|---|" + "---|" * (3 * len(ways) + len(args.asv_processes)))
    for spread, odd in scenarios:
        for step in STEPS:
            offs = _offsets(rng, (args.pairs, 2, width), spread, odd, args.levels)
            draws = [
                (list(1000 * (1 + d[0])), list(1000 * (1 + step / 100) * (1 + d[1]))) for d in offs
            ]
            shape = (args.pairs, args.history, args.history_processes)
            stored = 1000 * (1 + _offsets(rng, shape, spread, odd, args.levels).mean(axis=2))
            # As check.stored_noise: the commits' noise as one process's median.
            priors = [
                estimate_noise([[float(m)] for m in medians]).per_process(args.history_processes)
                for medians in stored
            ]
            cells = []
            for looks, prior in (
                (judged_before, None),
                (check._judged, None),
                (check._judged, priors),
            ):
                words, mean = run(looks, draws, args.max_processes, prior)  # type: ignore[arg-type]
                share = {w: 100 * words[w] / args.pairs for w in ("worse", "undecided")}
                cells += [f"{share['worse']:.1f}%", f"{share['undecided']:.1f}%", f"{mean:.1f}"]
            for k in args.asv_processes:
                flagged = sum(
                    asv_worse(
                        base[:k],
                        head[:k],
                        asv_rng,
                        args.asv_samples,
                        args.within * spread,
                        args.asv_factor,
                    )
                    for base, head in draws
                )
                cells.append(f"{100 * flagged / args.pairs:.1f}%")
            print(f"| {spread:g}% | {odd:.0%} | {step:g}% | " + " | ".join(cells) + " |")
    print()
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
