#!/usr/bin/env python
"""Verdicts over N interleaved series of one GPU kind against one machine measuring every
commit, on the same simulated histories.

    python bench/fleet/interleaved_quality.py --seed 1 --histories 500 [--markdown]

A history: 24-48 commits, GPU-like noise (`simulate.random_spec`: process offset
0.05-0.5%, 3% slow-clock commits), scenario `step` (one slower step at any commit but the
first, log-uniform 3-30x the true noise) or `none`. Each of 8 GPUs measures the whole
history with its own draws and its own offset (uniform +-1%: three H200s on one forward
differ up to 0.35%, docs/measurements.md sections 1 and 7, two H200 hosts 1.5-1.8%,
docs/verdicts.md "Drift"); one machine is GPU 0 over every commit, a fleet of N is
GPUs 0..N-1 with GPU k at commits k, k+N, ... (`fwdasv shard`'s interleave). Judged by
`fwdasv.analysis.findings.findings.judge_series`, what `fwdasv regressions` runs over the
stored series (each GPU a machine; other GPUs' commits empty), and by asv's `step_detect`
on each GPU's own points as `asv publish` weighs them. Found: a finding (any status) on
some GPU whose range (before, after] holds the step's commit; each finding confirmed on its
GPU (`simulate.confirm_step`: the A/B rule) and the best one holding the step bisected
there (bench/verdicts/bisect_simulate.py's real `Bisector`, processes drawn at the series'
noise) when its range holds more than one commit. `pooled`: the N GPUs' results under one
machine name (what per-GPU machines avoid). Seeds: (seed, scenario, index).
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verdicts"))

import bisect_simulate as bisect_sim  # type: ignore[import-not-found]
from asv._stats import get_weight
from asv.graph import Graph

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.bisect.driver import Bisector, Track
from fwdasv.analysis.bisect.outcome import Answer
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed
from fwdasv.analysis.confirm.processes import SeriesRef
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.findings import judge_series
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.rules.confirm import MAX_PROCESSES, ab_indices
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import TO_CONFIRM, Status

COMMITS = (24, 48)
STEP_NOISE = (3.0, 30.0)
GPU_OFFSET_PCT = 1.0  # each GPU's offset, uniform in +-this
FLEETS = (1, 2, 4, 8)
ASV_THRESHOLD = 0.05
BENCHMARK = "sim.Sim.track_latency"
SCENARIOS = ("step", "none")


@dataclass(frozen=True)
class Judged:
    """One way of measuring a history (one machine, a fleet of N, or N pooled)."""

    found: bool  # a finding on some GPU whose range holds the step's commit
    as_regression: bool  # ... of status regression (the gate fails on it)
    width: int  # commits in that finding's range (0: not found)
    confirmed: bool  # ... confirmed by the A/B re-measure on its GPU
    exact: bool  # ... and the commit named: a range of one, or its bisect on that GPU right
    bisect_wrong: bool  # the bisect named another commit
    false_any: bool  # a finding whose range does not hold the step's commit
    false_regression: bool
    false_confirmed: bool  # ... that the A/B re-measure on its GPU confirmed
    asv_found: bool  # asv's levels change at the GPU's first commit at or after the step
    asv_found_5: bool  # ... by 5% or more (asv publish's default)
    asv_false: bool  # a change of 5%+ elsewhere


@dataclass(frozen=True)
class Outcome:
    scenario: str
    large: bool  # the step >= 10x the noise
    commits: int
    truth: int | None  # the step's commit
    ways: dict[str, Judged]


def _series(machine: str, history: list[list[float]]) -> Series:
    key = SeriesKey(machine, "sim-env", BENCHMARK, "")
    return Series(key, "seconds", {}, history, [None] * len(history))


def _asv(history: list[list[float]], truth: int | None) -> tuple[bool, bool, bool]:
    """asv's step_detect on one series' measured points: found, found at 5%, false 5%."""
    graph = Graph(BENCHMARK, {"machine": "sim"})
    measured = [i for i, samples in enumerate(history) if samples]
    for i in measured:
        samples = sorted(history[i])
        median = statistics.median(samples)
        stored = {"median": median, "samples": samples}
        graph.add_data_point(i, median, get_weight(stored))
    steps = graph.get_steps()
    first_after = next((i for i in measured if truth is not None and i >= truth), None)
    found = found5 = false5 = False
    for a, b in itertools.pairwise(steps):
        change = b[2] / a[2] - 1
        if first_after is not None and int(b[0]) == first_after and change > 0:
            found = True
            found5 = found5 or change >= ASV_THRESHOLD
        elif abs(change) >= ASV_THRESHOLD:
            false5 = True
    return found, found5, false5


def bisect_range(width: int, culprit: int, step_pct: float, sd_pct: float, seed: int) -> str:
    """The real `Bisector` over a range of `width` commits after its good end (culprit:
    the index of the first slow commit, 1..width), processes drawn at `sd_pct`."""
    rng = random.Random(seed)
    scenario = bisect_sim.Scenario("fleet", step_pct, (sd_pct, sd_pct), width + 1, outlier=0.03)
    ref = SeriesRef("sim.Sim", "c0")
    line = tuple(f"{i:040x}" for i in range(width + 1))
    pool = bisect_sim.SimulatedPool(None, (ref,), None)  # type: ignore[arg-type]
    pool.rng, pool.culprit, pool.line, pool.scenario = rng, culprit, line, scenario
    pool.sds, pool.steps = {ref: sd_pct / 100}, {ref: step_pct}
    prior = Noise(sd_pct, sd_pct, None, 50, "history", 30.0)
    track = Track(Followed(ref, "seconds", prior, step_pct), Search(line))
    bisector = Bisector(
        None,  # type: ignore[arg-type]
        "sim",
        line,
        [track],
        pool,
        None,
        max_processes=MAX_PROCESSES,
        echo=None,
        subjects=dict.fromkeys(line),
    )
    (result,) = bisector.run()
    if result.answer != Answer.FOUND:
        return str(result.answer)
    return "right" if result.first_bad == line[culprit] else "wrong"


def findings_of(histories: dict[str, sim.SimHistory]) -> list[Finding]:
    """`judge_series` over the machines' series, as `fwdasv regressions` reads them."""
    order = [f"{i:040x}" for i in range(next(iter(histories.values())).commits)]
    every = {
        SeriesKey(m, "sim-env", BENCHMARK, ""): _series(m, [list(s) for s in h.samples])
        for m, h in histories.items()
    }
    return judge_series(order, every)


def judge(
    histories: dict[str, sim.SimHistory],
    truth: int | None,
    step_pct: float,
    seed: tuple[int, ...],
) -> Judged:
    """`findings_of` the machines' series; each finding confirmed (A/B) on its own
    machine, the best one holding the step bisected there."""
    found = findings_of(histories)
    confirm_rng = np.random.default_rng([*seed, 1])
    confirmed = {
        id(f)
        for f in found
        if f.status in TO_CONFIRM
        and sim.confirm_step(histories[f.key.machine], f.step, f.noise, confirm_rng).status
        == Status.CONFIRMED
    }

    def holds(f: Finding) -> bool:
        return truth is not None and f.step.before_index < truth <= f.step.after_index

    hits = sorted(
        (f for f in found if holds(f)),
        key=lambda f: (
            id(f) not in confirmed,
            f.status != Status.REGRESSION,
            f.step.after_index - f.step.before_index,
        ),
    )
    false = [f for f in found if not holds(f)]
    width = hits[0].step.after_index - hits[0].step.before_index if hits else 0
    outcome = ""
    if hits and id(hits[0]) in confirmed:
        outcome = "right" if width == 1 else ""
        if width > 1:
            hit = hits[0]
            culprit = int(truth) - hit.step.before_index  # type: ignore[arg-type]
            sd_pct = histories[hit.key.machine].spec.true_noise_pct
            outcome = bisect_range(
                width, culprit, step_pct, sd_pct, int(confirm_rng.integers(2**31))
            )
    asv = [_asv([list(s) for s in h.samples], truth) for h in histories.values()]
    return Judged(
        found=bool(hits),
        as_regression=any(f.status == Status.REGRESSION for f in hits),
        width=width,
        confirmed=bool(hits) and id(hits[0]) in confirmed,
        exact=outcome == "right",
        bisect_wrong=outcome == "wrong",
        false_any=bool(false),
        false_regression=any(f.status == Status.REGRESSION for f in false),
        false_confirmed=any(id(f) in confirmed for f in false),
        asv_found=any(a[0] for a in asv),
        asv_found_5=any(a[1] for a in asv),
        asv_false=any(a[2] for a in asv),
    )


Judge = Callable[[dict[str, sim.SimHistory], int | None, float, tuple[int, ...]], Judged]


def run(task: tuple[str, int, int], judge_with: Judge = judge) -> Outcome:
    """One history of `task` measured each way (one machine, N GPUs, pooled), each judged
    by `judge_with`."""
    scenario, seed, index = task
    task_seed = (seed, SCENARIOS.index(scenario), index)
    rng = np.random.default_rng(task_seed)
    commits = int(rng.integers(COMMITS[0], COMMITS[1] + 1))
    spec = sim.random_spec(rng)
    noise = spec.true_noise_pct
    truth: int | None = None
    step_pct, size = 0.0, 0.0
    shifts: list[sim.Shift] = []
    if scenario == "step":
        truth = int(rng.integers(1, commits))
        size = math.exp(rng.uniform(math.log(STEP_NOISE[0]), math.log(STEP_NOISE[1])))
        step_pct = 100 * (math.exp(size * noise / 100) - 1)
        shifts = [sim.Shift(truth, step_pct)]
    gpus = []
    for _ in range(max(FLEETS)):
        offset = 1 + rng.uniform(-GPU_OFFSET_PCT, GPU_OFFSET_PCT) / 100
        drawn = sim.simulate(spec, rng, commits, shifts)
        gpus.append([tuple(v * offset for v in samples) for samples in drawn.samples])
    base = sim.SimHistory(spec, tuple(shifts), ())

    def history(samples: list[tuple[float, ...]]) -> sim.SimHistory:
        return replace(base, samples=tuple(samples))

    ways = {}
    for n in FLEETS:
        each = {
            f"gpu{k}": history([gpus[k][i] if i % n == k else () for i in range(commits)])
            for k in range(n)
        }
        ways[f"{n}"] = judge_with(each, truth, step_pct, (*task_seed, n))
        if n > 1:
            pooled = {"pooled": history([gpus[i % n][i] for i in range(commits)])}
            ways[f"{n} pooled"] = judge_with(pooled, truth, step_pct, (*task_seed, n, 0))
    return Outcome(scenario, size >= 10, commits, truth, ways)


def _share(flags: list[bool]) -> str:
    if not flags:
        return "-"
    return f"{100 * sum(flags) / len(flags):.1f}% ({sum(flags)}/{len(flags)})"


HEADERS = (
    "measured by",
    "step found (range holds it)",
    "of steps >= 10x noise",
    "as regression",
    "range, commits (median, max)",
    "confirmed on its GPU",
    "at the commit: confirmed, then bisected on its GPU",
    "bisect wrong",
    "false finding (step histories)",
    "false finding (step-free)",
    "false regression (step-free)",
    "false finding confirmed (step-free)",
    "asv: found (any size)",
    "asv: found at 5%",
    "asv: false change >= 5% (step-free)",
)


def _label(way: str) -> str:
    if way == "1":
        return "one machine, every commit"
    n, _, pooled = way.partition(" ")
    if pooled:
        return f"{n} GPUs pooled under one machine name"
    return f"{n} GPUs interleaved (one kind)"


def rows(outcomes: list[Outcome]) -> list[list[str]]:
    steps = [o for o in outcomes if o.scenario == "step"]
    clean = [o for o in outcomes if o.scenario == "none"]
    out = []
    for way in outcomes[0].ways:
        widths = [o.ways[way].width for o in steps if o.ways[way].found]
        out.append(
            [
                _label(way),
                _share([o.ways[way].found for o in steps]),
                _share([o.ways[way].found for o in steps if o.large]),
                _share([o.ways[way].as_regression for o in steps]),
                f"{statistics.median(widths):.0f}, {max(widths)}" if widths else "-",
                _share([o.ways[way].confirmed for o in steps]),
                _share([o.ways[way].exact for o in steps]),
                _share([o.ways[way].bisect_wrong for o in steps]),
                _share([o.ways[way].false_any for o in steps]),
                _share([o.ways[way].false_any for o in clean]),
                _share([o.ways[way].false_regression for o in clean]),
                _share([o.ways[way].false_confirmed for o in clean]),
                _share([o.ways[way].asv_found for o in steps]),
                _share([o.ways[way].asv_found_5 for o in steps]),
                _share([o.ways[way].asv_false for o in clean]),
            ]
        )
    return out


def misplaced(seed: int, histories: int) -> dict[tuple[int, str], int]:
    """Over the step histories, each fleet's findings whose range misses the step: placed
    one of its GPU's points late at an edge (`start` or `head`), or elsewhere; and whether
    the pair confirm would re-measure (`ab_indices`) holds the step all the same."""
    counts: dict[tuple[int, str], int] = {}

    def counting(
        machines: dict[str, sim.SimHistory], truth: int | None, step_pct: float, at: tuple[int, ...]
    ) -> Judged:
        n = 0 if "pooled" in machines else len(machines)
        for f in findings_of(machines) if n and truth is not None else ():
            if f.step.before_index < truth <= f.step.after_index:  # type: ignore[operator]
                continue
            late = f.step.edge is not None and 0 <= f.step.before_index - truth < n  # type: ignore[operator]
            where = f"one point late at the {f.step.edge} edge" if late else "elsewhere"
            a, b = ab_indices(f.step, machines[f.key.machine].medians())
            held = "its A/B pair holds the step" if a < truth <= b else "its A/B pair misses it"  # type: ignore[operator]
            counts[(n, f"{where}; {held}")] = counts.get((n, f"{where}; {held}"), 0) + 1
        return judge(machines, truth, step_pct, at)

    for index in range(histories):
        run(("step", seed, index), counting)
    return counts


def evaluate(seed: int, histories: int, workers: int) -> list[Outcome]:
    todo = [(s, seed, i) for s in SCENARIOS for i in range(histories)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(run, todo, chunksize=8)
    return [run(t) for t in todo]


@click.command()
@click.option("--seed", default=1, show_default=True)
@click.option("--histories", default=500, show_default=True, help="Histories per scenario.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 2))
@click.option("--markdown", is_flag=True, help="A Markdown table for docs/measurements.md.")
@click.option("--misplaced", "count_misplaced", is_flag=True, help="Count the false findings.")
def main(seed: int, histories: int, workers: int, markdown: bool, count_misplaced: bool) -> None:
    """N interleaved series of one GPU kind against one full series."""
    started = time.perf_counter()
    if count_misplaced:
        for (n, where), count in sorted(misplaced(seed, histories).items()):
            click.echo(f"{n} GPU(s): {count} false finding(s) {where}")
        click.echo(
            f"seed {seed}, {histories} step histories, {time.perf_counter() - started:.0f} s"
        )
        return
    table = rows(evaluate(seed, histories, workers))
    seconds = time.perf_counter() - started
    if markdown:
        lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(r) + " |" for r in table]
    else:
        lines = [" | ".join(HEADERS), *(" | ".join(r) for r in table)]
    lines.append(
        f"\nseed {seed}, {histories} histories per scenario, {seconds:.0f} s on {workers} worker(s)"
    )
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
