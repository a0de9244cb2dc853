#!/usr/bin/env python
"""Bisect's decisions on simulated bench processes: right, wrong, undecided, and what they cost.

The real `Bisector` (its ends, probes, looks and answers), with only the bench process
replaced at its boundary (`ProcessPool._launch`): a process of commit i reads
`level_i * exp(N(0, sd))`, level_i the base times (1 + step) from the culprit on, times
an odd factor with probability `odd` (slow 20-60% or fast 15-25%, half each: single
processes on the 2-core VM beside a neighbour, docs/measurements.md section 11) or a
GPU's slow clock state (+1..3%, with probability `outlier`). Scenarios:

    gpu-1pct     a 1% step, process sd 0.05-0.2% (log-uniform; H200 decodes), 3% outliers
    gpu-1pct-noisy  the same at sd 0.2-0.5% (H200 prefills)
    gpu-2pct     a 2% step at sd 0.05-0.5%
    gpu-1pct-cold  the 1% step at sd 0.05-0.2%, no stored history, by hand (the run's own
                 spread decides, the step's size from the ends)
    busy-15pct   a 15% step, sd 2-5%, 15% odd processes (a paced series on a busy box)
    busy-2x      a doubled forward, sd 5-12%, 15% odd processes (latency on a busy box)
    cpu-5x       a 5x step (an -80% speed-up seen from its end), sd 1-3%, 26 commits
    gpu-suite    11 cases of one suite stepping at one commit, 0.8-3.2% each, sd 0.03-0.5%:
                 one search for all (a case that cannot place a probe takes the others')
    gpu-no-step  a finding of +1% that was a false alarm (no step): any commit named is wrong
    busy-no-step the same at a busy box's noise (+15% claimed)
    burst-60pct  the demo's paced ratio: a 60% step over 10 commits, sd 0.7-4.5%, and
                 neighbours' bursts (3% of processes start one; it and the next 2-7
                 processes read 20-60% slow: a load that lasts, as in a loaded CI run)
    burst-15pct  a 15% step at the same noise and bursts, over 16 commits

With a history, the prior is the true sd with 30 degrees of freedom (a 50-commit history),
or with `--prior stored` what bisect takes from a drawn stored history (`remeasure.stored_prior`:
each commit's loaded processes left out, as one process's median), or with `--prior raw`
the same history's noise with nothing left out (bisect's prior before stored_prior). The
stored history: 50 commits before the range, 2 processes of 5 samples each, a process
drawn as the search's are (its sd, odd and outlier chances), an odd slow one also 5 times
as spread inside (a loaded process). It comes from a generator of its own, so `stored` and
`raw` search the same bench processes.

    python bench/verdicts/bisect_simulate.py --trials 200 [--scenario NAME ...] [--seed 1]
        [--prior true|stored|raw]

prints per scenario: right, wrong, undecided, not reproducible (% of searches; a search of
several series counts as its worst), and the mean and max bench processes and bench runs
(looks). Exit 1 when any bisect named a wrong commit: with the burst scenarios and enough
trials it does (a burst that covers a good probe's processes and then the final pair's
re-check places it bad: 0.1% of burst-60pct's searches at 10,000 trials with the re-check
beside GOOD and BAD, 0.2% before; docs/measurements.md, sections 42 and 44).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import dataclass

from fwdasv.analysis.bisect.driver import Bisector, Track
from fwdasv.analysis.bisect.outcome import Answer
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed
from fwdasv.analysis.confirm.processes import ProcessPool, SeriesRef
from fwdasv.analysis.remeasure import ProcessLayout, one_process_noise, stored_prior
from fwdasv.analysis.rules.confirm import MAX_PROCESSES
from fwdasv.analysis.rules.noise import Noise, estimate_noise

REF = SeriesRef("sim.Sim", "c0")
FALSE_ALARM_PCT = {"gpu-no-step": 1.0, "busy-no-step": 15.0}  # what the finding claimed


@dataclass(frozen=True)
class Scenario:
    name: str
    step_pct: float
    sd_pct: tuple[float, float]  # per-process sd range (log-uniform)
    commits: int = 16
    odd: float = 0.0  # chance a process reads 20-60% slow or 15-25% fast
    outlier: float = 0.0  # chance of a slow clock state, +1..3% (`outlier_pct`)
    outlier_pct: tuple[float, float] = (1.0, 3.0)
    history: bool = True
    claimed: bool = True  # bisected from a finding (its change known) or by hand
    series: int = 1  # cases of one suite stepping at the same commit, each its own sd
    step_spread: float = 0.0  # each case's step drawn in step_pct * (1 +- step_spread)
    burst: float = 0.0  # chance a process starts a neighbour's burst: it and the next 2-7
    # processes in launch order read 20-60% slow (a load that lasts a while, not one process)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("gpu-1pct", 1.0, (0.05, 0.2), outlier=0.03),
        Scenario("gpu-1pct-noisy", 1.0, (0.2, 0.5), outlier=0.03),
        Scenario("gpu-2pct", 2.0, (0.05, 0.5), outlier=0.03),
        Scenario("gpu-1pct-cold", 1.0, (0.05, 0.2), outlier=0.03, history=False, claimed=False),
        Scenario("busy-15pct", 15.0, (2.0, 5.0), odd=0.15),
        Scenario("busy-2x", 100.0, (5.0, 12.0), odd=0.15),
        Scenario("cpu-5x", -80.0, (1.0, 3.0), commits=26),
        Scenario("gpu-suite", 2.0, (0.03, 0.5), outlier=0.03, series=11, step_spread=0.6),
        Scenario("gpu-no-step", 0.0, (0.05, 0.5), outlier=0.03),
        Scenario("busy-no-step", 0.0, (2.0, 5.0), odd=0.15),
        Scenario("burst-60pct", 60.0, (0.7, 4.5), commits=10, burst=0.03),
        Scenario("burst-15pct", 15.0, (0.7, 4.5), burst=0.03),
    )
}


STORED = ProcessLayout(samples=5, launches=2)  # a stored commit: 2 processes of 5 samples
STORED_COMMITS = 50
PRIORS = ("true", "stored", "raw")


def odd_factor(rng: random.Random, scenario: Scenario) -> tuple[float, bool]:
    """One process's odd factor (1.0 for most) and whether it ran loaded (an odd slow one)."""
    if rng.random() < scenario.odd:
        slow = rng.random() < 0.5
        return (rng.uniform(1.2, 1.6), True) if slow else (rng.uniform(0.75, 0.85), False)
    if rng.random() < scenario.outlier:
        low, high = scenario.outlier_pct
        return rng.uniform(1 + low / 100, 1 + high / 100), False
    return 1.0, False


def stored_history(rng: random.Random, scenario: Scenario, sd: float) -> list[list[float]]:
    """A series' stored history before the range: STORED_COMMITS commits at one level, each
    STORED.launches processes of STORED.samples samples; a process's median drawn as the
    search's processes are, its samples sd apart around it (5 times that when loaded)."""
    history = []
    for _ in range(STORED_COMMITS):
        samples: list[float] = []
        for _ in range(STORED.launches):
            odd, loaded = odd_factor(rng, scenario)
            median = odd * math.exp(rng.gauss(0, sd))
            within = sd * (5 if loaded else 1)
            samples.extend(median * math.exp(rng.gauss(0, within)) for _ in range(STORED.samples))
        history.append(samples)
    return history


def prior_of(mode: str, rng: random.Random, scenario: Scenario, sd: float) -> Noise | None:
    """The prior a series is bisected with: the truth, or a drawn history's as bisect takes
    it (`stored`: loaded processes left out) or took it before (`raw`)."""
    if mode == "true":
        return Noise(100 * sd, 100 * sd, None, 50, "history", 30.0)
    history = stored_history(rng, scenario, sd)
    if mode == "stored":
        return stored_prior(history, STORED)
    noise = estimate_noise(history)
    return None if noise.source == "prior" else one_process_noise(noise, history, STORED)


class SimulatedPool(ProcessPool):
    """A process pool whose bench processes are drawn, not launched."""

    rng: random.Random
    culprit: int
    line: tuple[str, ...]
    scenario: Scenario
    sds: dict[SeriesRef, float]
    steps: dict[SeriesRef, float]

    def _set_up(self) -> None:
        pass  # no suites to resolve

    burst_left: int = 0  # processes the current burst still slows

    def _launch(self, commit: str) -> dict[SeriesRef, float]:
        self.bench_processes += 1
        index = self.line.index(commit)
        # One process measures every case: an odd process (a neighbour) slows them all.
        odd, _ = odd_factor(self.rng, self.scenario)
        if self.scenario.burst and (self.burst_left or self.rng.random() < self.scenario.burst):
            self.burst_left = (self.burst_left or self.rng.randint(3, 8)) - 1
            odd = self.rng.uniform(1.2, 1.6)
        out = {}
        for ref in self.series:
            level = 1.0 + (self.steps[ref] / 100 if index >= self.culprit else 0.0)
            out[ref] = level * odd * math.exp(self.rng.gauss(0, self.sds[ref]))
        return out


def trial(
    scenario: Scenario, seed: int, max_processes: int, prior: str = "true"
) -> tuple[str, int, int]:
    rng = random.Random(seed)
    history_rng = random.Random(seed + 7_777_777)  # the stored histories: their own draws
    low, high = scenario.sd_pct
    refs = tuple(SeriesRef("sim.Sim", f"c{i}") for i in range(scenario.series))
    sds = {r: math.exp(rng.uniform(math.log(low), math.log(high))) / 100 for r in refs}
    spread = scenario.step_spread
    steps = {r: scenario.step_pct * rng.uniform(1 - spread, 1 + spread) for r in refs}
    line = tuple(f"{i:040x}" for i in range(scenario.commits))
    culprit = rng.randint(1, scenario.commits - 1)
    pool = SimulatedPool(None, refs, None)  # type: ignore[arg-type]
    pool.rng, pool.culprit, pool.line, pool.scenario = rng, culprit, line, scenario
    pool.sds, pool.steps = sds, steps
    tracks = []
    for ref in refs:
        noise = prior_of(prior, history_rng, scenario, sds[ref]) if scenario.history else None
        claimed = (steps[ref] or FALSE_ALARM_PCT[scenario.name]) if scenario.claimed else None
        tracks.append(Track(Followed(ref, "seconds", noise, claimed), Search(line)))
    bisector = Bisector(
        None,  # type: ignore[arg-type]
        "sim",
        line,
        tracks,
        pool,
        None,
        max_processes=max_processes,
        echo=None,
        subjects=dict.fromkeys(line),
    )
    results = bisector.run()
    outcomes = []
    for result in results:
        if result.answer == Answer.FOUND:
            right = scenario.step_pct != 0 and result.first_bad == line[culprit]
            outcomes.append("right" if right else "wrong")
        else:
            outcomes.append(str(result.answer))
    # A search is as good as its worst series: wrong over undecided over right.
    order = ["wrong", "not reproducible", "undecided", "right"]
    worst = min(outcomes, key=order.index)
    return worst, results[0].bench_processes, results[0].bench_runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-processes", type=int, default=MAX_PROCESSES)
    parser.add_argument(
        "--prior",
        choices=PRIORS,
        default="true",
        help="the series' prior: the true sd, or a drawn stored history's as bisect takes it "
        "(stored) or took it before loaded processes were left out (raw)",
    )
    args = parser.parse_args()
    names = args.scenario or list(SCENARIOS)
    print(
        f"{'scenario':14s} {'commits':>7s} {'right':>6s} {'wrong':>6s} {'undec.':>6s} "
        f"{'not rep.':>8s} {'processes':>13s} {'runs':>11s}"
    )
    wrong_any = 0
    for name in names:
        scenario = SCENARIOS[name]
        outcomes = [
            trial(scenario, args.seed * 100_000 + i, args.max_processes, args.prior)
            for i in range(args.trials)
        ]

        def pct(word: str, outcomes: list[tuple[str, int, int]] = outcomes) -> str:
            return f"{100 * sum(o == word for o, _, _ in outcomes) / len(outcomes):5.1f}%"

        processes = [p for _, p, _ in outcomes]
        runs = [r for _, _, r in outcomes]
        wrong_any += sum(o == "wrong" for o, _, _ in outcomes)
        print(
            f"{name:14s} {scenario.commits:7d} {pct('right'):>6s} {pct('wrong'):>6s} "
            f"{pct('undecided'):>6s} {pct('not reproducible'):>8s} "
            f"{sum(processes) / len(processes):6.1f} (<={max(processes):3d}) "
            f"{sum(runs) / len(runs):4.1f} (<={max(runs):2d})"
        )
    return 1 if wrong_any else 0


if __name__ == "__main__":
    sys.exit(main())
