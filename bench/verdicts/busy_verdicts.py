#!/usr/bin/env python
"""Verdicts on short histories from a busy CPU box: fwdasv's detector beside asv's, on the
same simulated histories.

    python bench/verdicts/busy_verdicts.py --seed 1 --histories 2000 [--commits 8] [--markdown]

A new user's first history is short and, on a shared 2-core VM, noisy (the doubled MLP's
8-commit history in tests/analysis/commands/test_regressions_command.py: 8.9% estimated noise). Each history is
`fwdasv.analysis.simulate`'s noise model at a busy box's ranges: a commit's process offset
log-uniform 3-12% (`simulate.busy_spec`), the in-run spread of its block medians 2-6%,
20 samples a commit, slow whole-commit outliers (+10-40%) in 10% of commits. Scenarios:
`none` (any `regression` is a false alarm), `head3+60%`, `head2+60%`, `head1+60%` (the
newest commits +60%: the doubled MLP's size), `head3+25%`, `mid+60%`. "Found": a finding at
the step's commit (+-1); "regression": those the default gate fails on; "+ confirm": those
the simulated A/B re-measure (`fwdasv.analysis.rules.confirm`, 3 processes a side, up to 12)
confirms. asv's detector runs as `asv publish` runs it, at its 5% default threshold.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

try:
    import fwdasv  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fwdasv.analysis import simulate as sim
from fwdasv.analysis.rules.detect import detect
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.analysis.rules.status import TO_CONFIRM, Status

ASV_THRESHOLD = 0.05
TOLERANCE = 1

# name: (commits from the head, or "mid"; percent); None: no step
SCENARIOS: dict[str, tuple[int | str, float] | None] = {
    "none": None,
    "head3+60%": (3, 60.0),
    "head2+60%": (2, 60.0),
    "head1+60%": (1, 60.0),
    "head3+25%": (3, 25.0),
    "mid+60%": ("mid", 60.0),
}


@dataclass(frozen=True)
class Outcome:
    scenario: str
    found: bool  # a finding of any status at the step's commit
    found_regression: bool  # ... left as regression (the default gate fails)
    found_confirmed: bool  # ... confirmed by the simulated A/B re-measure
    alarm: bool  # any finding left as regression (no-step: a false alarm)
    any_finding: bool
    alarm_confirmed: bool  # any finding the re-measure confirmed
    asv_found: bool
    asv_alarm: bool


def spec(rng: np.random.Generator) -> sim.SeriesSpec:
    return sim.busy_spec(rng)


def step_index(scenario: str, commits: int) -> int | None:
    shape = SCENARIOS[scenario]
    if shape is None:
        return None
    at, _ = shape
    return commits // 2 if at == "mid" else commits - int(at)


def run_one(task: tuple[str, int, int, int]) -> Outcome:
    scenario, seed, index, commits = task
    rng = np.random.default_rng([seed, list(SCENARIOS).index(scenario), index])
    confirm_rng = np.random.default_rng([seed, list(SCENARIOS).index(scenario), index, 1])
    where = step_index(scenario, commits)
    shape = SCENARIOS[scenario]
    shifts = () if shape is None else (sim.Shift(int(where), shape[1]),)  # type: ignore[arg-type]
    history = sim.simulate(spec(rng), rng, commits, shifts)
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise)
    confirmed = [
        f
        for f in findings
        if f.status in TO_CONFIRM
        and sim.confirm_step(history, f, noise, confirm_rng).status == Status.CONFIRMED
    ]

    def near(i: int) -> bool:
        return where is not None and abs(i - where) <= TOLERANCE

    jumps = sim.asv_regressions(history, (ASV_THRESHOLD,))[ASV_THRESHOLD]
    return Outcome(
        scenario=scenario,
        found=any(near(f.after_index) for f in findings),
        found_regression=any(
            near(f.after_index) and f.status == Status.REGRESSION for f in findings
        ),
        found_confirmed=any(near(f.after_index) for f in confirmed),
        alarm=any(f.status == Status.REGRESSION for f in findings),
        any_finding=bool(findings),
        alarm_confirmed=bool(confirmed),
        asv_found=any(near(j[1]) for j in jumps),
        asv_alarm=bool(jumps),
    )


def evaluate(seed: int, histories: int, commits: int, workers: int) -> list[Outcome]:
    todo = [(s, seed, i, commits) for s in SCENARIOS for i in range(histories)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(run_one, todo, chunksize=16)
    return [run_one(t) for t in todo]


def _pct(flags: list[bool]) -> str:
    return f"{100 * sum(flags) / len(flags):.1f}% ({sum(flags)}/{len(flags)})"


def table(outcomes: list[Outcome]) -> list[list[str]]:
    rows = []
    for scenario in SCENARIOS:
        mine = [o for o in outcomes if o.scenario == scenario]
        if SCENARIOS[scenario] is None:
            rows.append(
                [
                    f"{scenario} (false alarms)",
                    _pct([o.any_finding for o in mine]),
                    _pct([o.alarm for o in mine]),
                    _pct([o.alarm_confirmed for o in mine]),
                    _pct([o.asv_alarm for o in mine]),
                ]
            )
        else:
            rows.append(
                [
                    scenario,
                    _pct([o.found for o in mine]),
                    _pct([o.found_regression for o in mine]),
                    _pct([o.found_confirmed for o in mine]),
                    _pct([o.asv_found for o in mine]),
                ]
            )
    return rows


HEADER = ["scenario", "fwdasv: any finding", "regression (gate fails)", "+ confirm", "asv 5%"]


@click.command(help=__doc__.split("\n\n")[0])
@click.option("--seed", default=1, show_default=True, help="Seed of every history.")
@click.option("--histories", default=500, show_default=True, help="Histories per scenario.")
@click.option("--commits", default=8, show_default=True, help="Commits per history (>= 6).")
@click.option("--workers", default=1, show_default=True, help="Processes.")
@click.option("--markdown", is_flag=True, help="A markdown table.")
def main(seed: int, histories: int, commits: int, workers: int, markdown: bool) -> None:
    if commits < 6:
        raise click.BadParameter(f"{commits} commits: need >= 6 (3 at the head, 3 before)")
    started = time.perf_counter()
    rows = table(evaluate(seed, histories, commits, workers))
    took = time.perf_counter() - started
    if markdown:
        click.echo("| " + " | ".join(HEADER) + " |")
        click.echo("|" + "---|" * len(HEADER))
        for row in rows:
            click.echo("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
        for row in [HEADER, *rows]:
            click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    click.echo(
        f"\n{histories} histories a scenario, {commits} commits, seed {seed}; {took:.0f} s",
        err=True,
    )


if __name__ == "__main__":
    main()
