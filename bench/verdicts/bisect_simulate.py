#!/usr/bin/env python
"""Bisect's rules on simulated runs: how often they name the right commit when runs read fast.

The same 16-commit repository as bisect_trials.py (real git, the real `Bisector`), with only
the measurement replaced at its boundary. Each asv run of a commit yields 2 processes of 10
samples (1 thread, 2 launches x 10 samples): the commit's level (the culprit and after
+14.6%) times a run factor (1 +- 2%; with probability `--fast` the whole run reads 13% fast,
FAST_FACTOR, as one real bad commit read 21.0 where bad commits read about 24) times a
process factor (1 +- 2%) times a sample jitter (0.3%). With `--odd P` a process is odd with
probability P: 15-25% fast or 20-60% slow (half each), as single processes read on a 2-core
VM (docs/measurements.md section 11).

    python bench/verdicts/bisect_simulate.py --trials 40 --fast 0.05 --odd 0.15

prints the tally: right (certain / uncertain), wrong (certain / uncertain), none (ends did
not differ / final pair did not), and the mean asv runs.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bisect_trials import PACKAGE, SLOW_INDEX, build_repo

from fwdasv.analysis.bisect import driver
from fwdasv.analysis.remeasure import ProcessLayout
from fwdasv.asv.scaffold import write_torch_project

LEVEL_MS, STEP = 20.8, 0.146
FAST_FACTOR = 0.87


class SimulatedBisector(driver.Bisector):
    """`Bisector` whose asv runs are drawn, not measured (everything else is the real one)."""

    rng: random.Random
    drawn: dict
    fast: float = 0.0
    odd: float = 0.0

    def resolve(self) -> driver.BenchmarkCase:
        self.target = driver.BenchmarkCase("forward.Sim.track_latency", "c", "seconds", "x")
        self.series = driver.StoredSamples(self.project, "sim", self.target)
        self.series.samples = lambda commit: list(self.drawn[commit])  # type: ignore[method-assign]
        self.layout = ProcessLayout(samples=10, launches=2)
        return self.target

    def measure(self, commits, why) -> None:
        self.runs += 1
        for commit in commits:
            level = LEVEL_MS * (1 + STEP if self.line.index(commit) >= SLOW_INDEX else 1)
            run = (FAST_FACTOR if self.rng.random() < self.fast else 1.0) * (
                1 + 0.02 * self.rng.gauss(0, 1)
            )
            for _ in range(self.layout.launches):
                process = level * run * (1 + 0.02 * self.rng.gauss(0, 1))
                if self.rng.random() < self.odd:
                    odd = self.rng.choice([(0.75, 0.85), (1.2, 1.6)])
                    process *= self.rng.uniform(*odd)
                self.drawn[commit].extend(
                    process * (1 + 0.003 * self.rng.gauss(0, 1)) for _ in range(self.layout.samples)
                )


def trial(
    project, hashes: list[str], seed: int, fast: float, max_remeasure: int, odd: float = 0.0
) -> tuple:
    SimulatedBisector.rng = random.Random(seed)
    SimulatedBisector.drawn = defaultdict(list)
    SimulatedBisector.fast = fast
    SimulatedBisector.odd = odd
    bisector = SimulatedBisector.open(
        project, hashes[0], hashes[-1], "x", "sim", echo=None, max_remeasure=max_remeasure
    )
    try:
        result = bisector.run()
    except driver.BisectError:
        return "none (ends)", bisector.runs
    if not result.reproducible:
        return "none (final pair)", result.asv_runs
    named = "right" if result.first_bad == hashes[SLOW_INDEX] else "wrong"
    return f"{named} ({'certain' if result.certain else 'uncertain'})", result.asv_runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="simulated bisects")
    parser.add_argument(
        "--fast", type=float, default=0.15, help="chance that a run reads 13%% fast"
    )
    parser.add_argument(
        "--odd",
        type=float,
        default=0.0,
        help="chance that one process reads 15-25%% fast or 20-60%% slow",
    )
    parser.add_argument("--max-remeasure", type=int, default=driver.DEFAULT_MAX_REMEASURE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hashes = build_repo(root / PACKAGE)
        project = write_torch_project(root / "asv", root / PACKAGE, PACKAGE, [])
        os.environ.setdefault("HOME", tmp)
        outcomes = [
            trial(project, hashes, seed, args.fast, args.max_remeasure, args.odd)
            for seed in range(args.trials)
        ]
    tally = Counter(o for o, _ in outcomes)
    runs = sum(r for _, r in outcomes) / len(outcomes)
    print(
        f"{args.trials} simulated bisects, {100 * args.fast:.0f}% of runs 13% fast, "
        f"{100 * args.odd:.0f}% of processes odd, "
        f"max_remeasure {args.max_remeasure}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))
        + f"; {runs:.1f} asv runs on average"
    )
    wrong = sum(n for k, n in tally.items() if k.startswith("wrong"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
