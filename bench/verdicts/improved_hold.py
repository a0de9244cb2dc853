"""Should `improved` hold as `worse` does? `fwdasv check`'s looks with and without it.

    python bench/verdicts/improved_hold.py [--pairs 1000] [--seed 1] [--max-processes 12]

`fwdasv check` takes 3 more processes a side before a slowdown stands
(`fwdasv.analysis.check.check._held`), and before a speed-up that only its interval
decided stands (`rules.check.faster_by_interval`, below); a speed-up `judge_ab` ruled out
stands at the look that found it. On a GPU whose processes fall on two levels, some no-op
pull requests came out `improved` (docs/measurements.md, section 40). This script asks
what a hold for every speed-up would buy and cost: each pair is drawn as check_looks.py
draws it (its `_offsets`: a normal draw of `spread` a process, on one level or on two
levels 0.36% apart, section 39's H100), HEAD `step` faster or the same, with a prior
from 30 stored commits drawn the same way (`check.stored_noise`'s estimate), and judged
by the check's real looks (`check._judged`), then by `_held` as it is, or by `_held`
widened to every `improved` (this script's `held_either`: the same 3 more a side,
judged with all the processes).

Prints, per GPU, spread and step, with and without the hold: the share of pairs
`improved`, `worse`, `undecided` and `unchanged`, and the mean processes a side.

`--speed-up-rule` asks another question (section 41): the check called a 2% speed-up
`undecided` at 1% spread, where a 2% slowdown is `worse`, because `judge_ab` rules a step
out only when its interval is narrow enough (`noise_limited`), while it confirms one
above zero however wide. `rules.check.faster_by_interval` now decides such a speed-up as
a slowdown is decided (an undecided verdict whose interval lies below zero: `improved`),
`check._judged` stops on it and `check._held` holds it. Three ways on the same pairs:
"before" (this script's `status_before` and `held_slowdowns`, check_looks.py's
`looks_until`: the check as it was), "no hold" (the rule, its speed-ups not held),
"check" (as it is now). Prints, per scenario (busy ones too: a share of processes 15-40%
slow, which on BASE reads as a speed-up) and step.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

try:
    import fwdasv  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_looks import MIN_EFFECT_PCT, Draws, _offsets, looks_until

from fwdasv.analysis.check import check
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.check import check_status, processes_to_decide
from fwdasv.analysis.rules.confirm import Confirmation
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus

# (GPU, spread %, levels' gap %): one level, quiet (an H100's or H200's 0.1%), less so, a
# CPU box's 1%; section 39's H100 on two levels.
GPUS = (("one level", 0.1, 0.0), ("one level", 0.3, 0.0), ("one level", 1.0, 0.0))
GPUS += (("two levels", 0.03, 0.36), ("two levels", 0.1, 0.36))
STEPS = (0.0, -0.3, -0.5, -1.0, -2.0)
WORDS = ("improved", "worse", "undecided", "unchanged")
Cell = tuple[Counter[str], float]  # each word's count, the mean processes a side
# (spread %, share of odd processes, levels' gap %) for --speed-up-rule.
RULE_SCENARIOS = ((0.1, 0.0, 0.0), (0.3, 0.0, 0.0), (1.0, 0.0, 0.0), (5.0, 0.0, 0.0))
RULE_SCENARIOS += ((0.1, 0.05, 0.0), (2.0, 0.15, 0.0), (5.0, 0.15, 0.0), (0.03, 0.0, 0.36))
RULE_STEPS = (0.0, -0.5, -1.0, -2.0, 1.0)


def held(
    verdict: Confirmation,
    cursor: Draws,
    noise: Noise,
    min_effect: float,
    max_processes: int,
    words: tuple[CompareStatus, ...],
) -> Confirmation:
    """A verdict whose word is one of `words` takes HOLD_PROCESSES more a side (as many as
    are left) and is judged again with all the processes, as `check._held` does."""
    more = min(check.HOLD_PROCESSES, max_processes - cursor.taken)
    if check_status(verdict, min_effect) not in words or more < 1:
        return verdict
    cursor.measure(more)
    return confirm.judge_ab(
        cursor.sides["base"][: cursor.taken],
        cursor.sides["head"][: cursor.taken],
        noise,
        min_effect_pct=min_effect,
    )


def held_either(
    verdict: Confirmation, cursor: Draws, noise: Noise, min_effect: float, max_processes: int
) -> Confirmation:
    """`check._held` widened to every speed-up: `worse` and `improved` held."""
    words = (CompareStatus.WORSE, CompareStatus.IMPROVED)
    return held(verdict, cursor, noise, min_effect, max_processes, words)


def held_slowdowns(
    verdict: Confirmation, cursor: Draws, noise: Noise, min_effect: float, max_processes: int
) -> Confirmation:
    """`check._held` as it was: a `worse` verdict only."""
    return held(verdict, cursor, noise, min_effect, max_processes, (CompareStatus.WORSE,))


def status_before(verdict: Confirmation, min_effect: float) -> CompareStatus | ReMeasureStatus:
    """check_status as it was before `faster_by_interval` (docs/measurements.md, section
    41): an undecided verdict stayed `undecided`."""
    if verdict.status == ReMeasureStatus.UNDECIDED:
        return ReMeasureStatus.UNDECIDED
    return check_status(verdict, min_effect)


def rule_cell(
    spread: float,
    odd: float,
    levels: float,
    step: float,
    way: str,
    *,
    pairs: int,
    seed: int,
    max_processes: int,
    history: int = 30,
) -> tuple[Counter[str], float]:
    """One cell: each word's count over `pairs` pairs, and the mean processes a side, for
    `way` "before" (the check before `faster_by_interval`), "no hold" (the rule, its
    speed-ups not held), "check" (fwdasv's: the rule and its hold) or "every improved"
    (`held_either`); the same seed gives the same draws for each way."""
    rng = np.random.default_rng(seed)
    offs = _offsets(rng, (pairs, 2, 2 * max_processes), spread, odd, levels)
    draws = [(list(1000 * (1 + d[0])), list(1000 * (1 + step / 100) * (1 + d[1]))) for d in offs]
    stored = 1000 * (1 + _offsets(rng, (pairs, history, 1), spread, odd, levels).mean(axis=2))
    words: Counter[str] = Counter()
    taken = 0
    for (base, head), medians in zip(draws, stored, strict=True):
        noise = estimate_noise([[float(m)] for m in medians]).per_process(1)
        cursor = Draws(base, head)
        if way == "before":
            # check._judged's looks as they were: stopped by judge_ab's own status.
            verdict = looks_until(
                cursor,
                noise,
                MIN_EFFECT_PCT,
                max_processes,
                lambda verdict, _: processes_to_decide(verdict, max_processes) > max_processes,
            )
            verdict = held_slowdowns(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes)
            words[str(status_before(verdict, MIN_EFFECT_PCT))] += 1
        else:
            verdict = check._judged(cursor, noise, MIN_EFFECT_PCT, max_processes)  # type: ignore[arg-type]
            if way == "no hold":
                verdict = held_slowdowns(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes)
            elif way == "every improved":
                verdict = held_either(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes)
            else:
                verdict = check._held(verdict, cursor, noise, MIN_EFFECT_PCT, max_processes, None)  # type: ignore[arg-type]
            words[str(check_status(verdict, MIN_EFFECT_PCT))] += 1
        taken += cursor.taken
    return words, taken / pairs


def cell(
    spread: float,
    levels: float,
    step: float,
    hold_improved: bool,
    *,
    pairs: int,
    seed: int,
    max_processes: int,
    history: int = 30,
) -> tuple[Counter[str], float]:
    """`rule_cell` on one level or two, no odd processes: the check as it is, or with every
    `improved` held. The same seed gives the same draws with and without the hold."""
    way = "every improved" if hold_improved else "check"
    return rule_cell(
        spread, 0.0, levels, step, way, pairs=pairs, seed=seed, max_processes=max_processes,
        history=history,
    )  # fmt: skip


def print_table(
    args: argparse.Namespace, heading: Sequence[str], rows: Iterable[tuple[list[str], Cell]]
) -> None:
    """The run's settings, then a markdown table: `heading`, WORDS' shares, processes."""
    print(
        f"{args.pairs} pairs a cell, seed {args.seed}, max {args.max_processes} processes a "
        f"side, min_effect_pct {MIN_EFFECT_PCT}, a prior from 30 stored commits"
    )
    print()
    print("| " + " | ".join([*heading, *WORDS, "processes a side"]) + " |")
    print("|" + "---|" * (len(heading) + len(WORDS) + 1))
    for labels, (words, mean) in rows:
        shares = [f"{100 * words[w] / args.pairs:.1f}%" for w in WORDS]
        print("| " + " | ".join([*labels, *shares, f"{mean:.1f}"]) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-processes", type=int, default=confirm.MAX_PROCESSES)
    parser.add_argument(
        "--speed-up-rule", action="store_true", help="the second question (see the docstring)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    draws = {"pairs": args.pairs, "seed": args.seed, "max_processes": args.max_processes}
    if args.speed_up_rule:
        print_table(
            args,
            ["spread", "odd", "levels", "step", "way"],
            (
                (
                    [f"{spread:g}%", f"{odd:.0%}", f"{levels:g}%", f"{step:g}%", way],
                    rule_cell(spread, odd, levels, step, way, **draws),
                )
                for spread, odd, levels in RULE_SCENARIOS
                for step in RULE_STEPS
                for way in ("before", "no hold", "check")
            ),
        )
    else:
        print_table(
            args,
            ["GPU", "spread", "step", "hold"],
            (
                (
                    [gpu, f"{spread:g}%", f"{step:g}%", "every improved" if hold else "check"],
                    cell(spread, levels, step, hold, **draws),
                )
                for gpu, spread, levels in GPUS
                for step in STEPS
                for hold in (False, True)
            ),
        )
    print()
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
