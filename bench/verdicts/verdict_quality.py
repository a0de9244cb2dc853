#!/usr/bin/env python
"""How often verdicts are right: fwdasv's detector (alone, and with its confirmation
re-measure) beside asv's at 5%, 1% and 0.5% thresholds, on the same simulated histories.

    python bench/verdicts/verdict_quality.py --seed 1 --histories 2000 [--markdown]

Scenarios (`fwdasv.analysis.simulate`, 60 commits), `--histories` each: `none` (no step:
any finding is a false alarm); `step0.5`, `step1`, `step2` (one upward step of that percent,
found when a finding's first commit at the new level is the step's, +-1); `env` (machines of
8 series and a canary, all +1.5% at one commit: a finding left as `regression` counts as
reported); the edges (EDGES: a step at the head or the start of a history, found when a
finding of any status is at the step's commit, +-1). "+ confirm" counts only findings the
simulated A/B re-measure confirmed (`fwdasv.analysis.rules.confirm`, 3 processes a side, up to
12). asv's detector runs as `asv publish` runs it (`step_detect`). Every history has its
own seed (seed, scenario, index): the figures do not depend on `--workers`. The TARGET_*
constants are the rates the verdicts must meet. SHORT: histories of their own length (a
short history's first nights, a head on 30 commits, step-free 4-12 commits, a busy box's
4), judged with improvements listed; `--short-only` runs just those.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import time
from collections.abc import Iterable
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
from fwdasv.analysis.rules.drift import mark_drift
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.analysis.rules.status import TO_CONFIRM, ReMeasureStatus, Status
from fwdasv.analysis.rules.step import HEAD, START, Step

ASV_THRESHOLDS = (0.05, 0.01, 0.005)
TOLERANCE = 1  # commits: "at the right commit"
STEPS = {"step0.5": 0.5, "step1": 1.0, "step2": 2.0}


@dataclass(frozen=True)
class EdgeScenario:
    """A step at a history's edge: `at` commits from the head (HEAD) or before it (START)."""

    where: str
    at: int
    pct: float
    between_pct: float | None  # None: drawn from the simulator's range
    target: float  # the share that must be found
    as_regression: bool = False  # found only as `regression` (not `suspected`)

    def index(self, commits: int) -> int:
        return commits - self.at if self.where == HEAD else self.at


EDGES = {
    "head1-2%": EdgeScenario(HEAD, 1, 2.0, 0.2, 0.95),
    "head1-2x": EdgeScenario(HEAD, 1, 100.0, None, 1.0),
    "head2-1%": EdgeScenario(HEAD, 2, 1.0, 0.05, 0.90),
    "head3-2%": EdgeScenario(HEAD, 3, 2.0, 0.2, 0.95, as_regression=True),
    "start2-2%": EdgeScenario(START, 2, 2.0, None, 0.95),
}
# Appended: the scenarios before keep their seeds.
SCENARIOS = ("none", *STEPS, "env", *EDGES)
MIDDLE = ("none", *STEPS, "env")
SERIES_PER_MACHINE = 8

# The rates the verdicts must meet.
TARGET_STEP1 = 0.95
TARGET_STEP05 = 0.60
TARGET_FALSE_ALARM = 0.01
TARGET_ENV = 0.05
TARGET_EDGE_ANY = 0.05  # no step: histories with any finding (suspected included)
TARGET_EDGE_ALARM = 0.01  # no step: with a regression or a confirmed finding


@dataclass(frozen=True)
class ShortScenario:
    """A history of `commits` commits with a step at `at` (None: none) of `pct`."""

    commits: int
    at: int | None
    pct: float = 0.0
    between_pct: float | None = None  # None: drawn from the simulator's range
    busy: bool = False  # a busy CPU box's noise (`simulate.busy_spec`)
    target: float | None = None  # the share a step must be found in


# A short history's first nights (issue 32), beside step-free histories of the same lengths.
SHORT = {
    "2+2 +1.5%": ShortScenario(4, 2, 1.5, 0.05, target=0.90),
    "3+1 +1.5%": ShortScenario(4, 3, 1.5, 0.05, target=0.90),
    "3+2 +1.5%": ShortScenario(5, 3, 1.5, 0.05),
    "2+3 +1.5%": ShortScenario(5, 2, 1.5, 0.05),
    "3+3 +1.5%": ShortScenario(6, 3, 1.5, 0.05),
    "30: newest +2%": ShortScenario(30, 29, 2.0, 0.2, target=0.95),
    "none, 4": ShortScenario(4, None),
    "none, 4 (0.05%)": ShortScenario(4, None, between_pct=0.05),
    "none, 5": ShortScenario(5, None),
    "none, 6": ShortScenario(6, None),
    "none, 8": ShortScenario(8, None),
    "none, 12": ShortScenario(12, None),
    "none, 4 busy": ShortScenario(4, None, busy=True),
    "none, 6 busy": ShortScenario(6, None, busy=True),
}
TARGET_SHORT_ANY = 0.05  # no step: histories with a slower finding (suspected included)
TARGET_SHORT_ALARM = 0.01  # no step: with a regression


@dataclass(frozen=True)
class Outcome:
    """What each detector said about one series."""

    scenario: str
    found: bool  # fwdasv: a finding at the right commit (step scenarios)
    alarm: bool  # fwdasv: any finding left as regression
    found_confirmed: bool
    alarm_confirmed: bool
    asv_found: tuple[bool, ...]  # per ASV_THRESHOLDS
    asv_alarm: tuple[bool, ...]
    noise_ratio: float  # estimated / true
    processes: tuple[int, ...] = ()  # per confirmation: processes a side
    undecided: int = 0  # confirmations still undecided at the last look
    canary_caught: bool | None = None  # env: the canary's finding at the shift
    any_finding: bool = False  # fwdasv: a finding of any status (suspected included)
    found_regression: bool = False  # a finding at the right commit with status regression
    alarm_any_confirmed: bool = False  # a regression or suspected one the re-measure confirmed
    noop: str | None = None  # no step: the re-measure of its middle pair, claimed +1%


def _near(index: int, target: int | None) -> bool:
    return target is not None and abs(index - target) <= TOLERANCE


def judge_series(
    history: sim.SimHistory,
    step_index: int | None,
    rng: np.random.Generator,
    canary: sim.SimHistory | None = None,
    scenario: str = "",
) -> Outcome:
    """Run both detectors (and the confirmation) on one simulated series."""
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise, samples=history.samples)
    if canary is not None:
        findings = mark_drift(findings, canary.medians(), estimate_noise(canary.samples))
    regressions = [f for f in findings if f.status == Status.REGRESSION]
    confirmed: list[Step] = []
    processes: list[int] = []
    undecided = 0
    for finding in (f for f in findings if f.status in TO_CONFIRM):
        verdict = sim.confirm_step(history, finding, noise, rng)
        processes.append(verdict.processes_a)
        undecided += verdict.status == ReMeasureStatus.UNDECIDED
        if verdict.status == ReMeasureStatus.CONFIRMED:
            confirmed.append(finding)
    noop = None
    if scenario == "none":
        # A confirmation of a pair with no step between (claimed +1%): how often confirm
        # confirms a no-op, on fresh draws after the history's.
        middle = history.commits // 2
        fake = Step(middle - 1, middle, 1.0, 1.01, 1.0, 0.0, 0.0, noise.noise_pct, 4, 4)
        noop = str(sim.confirm_step(history, fake, noise, rng).status)
    # The middle-of-history figures count the confirmation of regressions, as before.
    confirmed_regressions = [f for f in confirmed if f.status == Status.REGRESSION]
    jumps = sim.asv_regressions(history, ASV_THRESHOLDS)
    return Outcome(
        scenario=scenario,
        found=any(_near(f.after_index, step_index) for f in findings),
        alarm=bool(regressions),
        found_confirmed=any(_near(f.after_index, step_index) for f in confirmed_regressions),
        alarm_confirmed=bool(confirmed_regressions),
        asv_found=tuple(any(_near(j[1], step_index) for j in jumps[t]) for t in ASV_THRESHOLDS),
        asv_alarm=tuple(bool(jumps[t]) for t in ASV_THRESHOLDS),
        noise_ratio=noise.noise_pct / history.spec.true_noise_pct,
        processes=tuple(processes),
        undecided=undecided,
        any_finding=bool(findings),
        found_regression=any(
            _near(f.after_index, step_index) and f.status == Status.REGRESSION for f in findings
        ),
        alarm_any_confirmed=bool(confirmed),
        noop=noop,
    )


Task = tuple[str, int, int, int, "float | None"]


def run_task(task: Task) -> list[Outcome]:
    """One history (one machine for `env`), seeded by (seed, scenario, index).

    The last item, when not None, fixes every series' run-to-run noise
    (`between_pct`) instead of drawing it from the simulator's range.
    """
    scenario, seed, index, commits, between_pct = task
    fixed: sim.SpecFields = {} if between_pct is None else {"between_pct": between_pct}
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario), index])
    confirm_rng = np.random.default_rng([seed, SCENARIOS.index(scenario), index, 1])
    if scenario == "env":
        machine = sim.simulate_machine(rng, SERIES_PER_MACHINE, commits, spec_overrides=fixed)
        canary_noise = estimate_noise(machine.canary.samples)
        canary = detect(machine.canary.medians(), canary_noise)
        caught = any(_near(c.after_index, machine.env_index) for c in canary)
        out = []
        for history in machine.series:
            outcome = judge_series(
                history, machine.env_index, confirm_rng, machine.canary, scenario
            )
            out.append(dataclasses.replace(outcome, canary_caught=caught))
        return out
    shifts = ()
    step_index = None
    if scenario in EDGES:
        edge = EDGES[scenario]
        fixed = {} if edge.between_pct is None else {"between_pct": edge.between_pct}
        step_index = edge.index(commits)
        shifts = (sim.Shift(step_index, edge.pct),)
    elif scenario in STEPS:
        step_index = sim.random_index(rng, commits)
        shifts = (sim.Shift(step_index, STEPS[scenario]),)
    history = sim.simulate(sim.random_spec(rng, **fixed), rng, commits, shifts)
    return [judge_series(history, step_index, confirm_rng, scenario=scenario)]


@dataclass(frozen=True)
class ShortOutcome:
    """What each detector said about one short scenario's history."""

    scenario: str
    found: bool  # a slower finding (any status) at the step's commit, +-1
    found_regression: bool
    found_confirmed: bool  # ... and the simulated re-measure confirmed it
    any_finding: bool  # a slower finding anywhere
    alarm: bool  # a regression anywhere
    improvement: bool  # an improvement listed anywhere (step-free: a false one)
    asv_found: tuple[bool, ...]
    asv_alarm: tuple[bool, ...]


def run_short(task: tuple[str, int, int]) -> ShortOutcome:
    """One short scenario's history, seeded by (seed, 1000 + scenario, index)."""
    name, seed, index = task
    shape = SHORT[name]
    key = 1000 + list(SHORT).index(name)
    rng = np.random.default_rng([seed, key, index])
    confirm_rng = np.random.default_rng([seed, key, index, 1])
    if shape.busy:
        spec = sim.busy_spec(rng)
    else:
        fixed: sim.SpecFields = (
            {} if shape.between_pct is None else {"between_pct": shape.between_pct}
        )
        spec = sim.random_spec(rng, **fixed)
    shifts = () if shape.at is None else (sim.Shift(shape.at, shape.pct),)
    history = sim.simulate(spec, rng, shape.commits, shifts)
    noise = estimate_noise(history.samples)
    findings = detect(history.medians(), noise, improvements=True, samples=history.samples)
    slower = [f for f in findings if f.status != Status.IMPROVEMENT]
    at = [f for f in slower if _near(f.after_index, shape.at)]
    confirmed = [
        f
        for f in at
        if f.status in TO_CONFIRM
        and sim.confirm_step(history, f, noise, confirm_rng).status == Status.CONFIRMED
    ]
    jumps = sim.asv_regressions(history, ASV_THRESHOLDS)
    return ShortOutcome(
        scenario=name,
        found=bool(at),
        found_regression=any(f.status == Status.REGRESSION for f in at),
        found_confirmed=bool(confirmed),
        any_finding=bool(slower),
        alarm=any(f.status == Status.REGRESSION for f in slower),
        improvement=any(f.status == Status.IMPROVEMENT for f in findings),
        asv_found=tuple(any(_near(j[1], shape.at) for j in jumps[t]) for t in ASV_THRESHOLDS),
        asv_alarm=tuple(bool(jumps[t]) for t in ASV_THRESHOLDS),
    )


def evaluate_short(seed: int, histories: int, workers: int = 1) -> list[ShortOutcome]:
    todo = [(name, seed, i) for name in SHORT for i in range(histories)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(run_short, todo, chunksize=64)
    return [run_short(t) for t in todo]


SHORT_HEADERS = (
    "short history",
    "fwdasv: found / any finding (slower)",
    "as regression",
    "+ confirm",
    "improvement listed",
    *(f"asv publish {100 * t:g}%" for t in ASV_THRESHOLDS),
)


def short_rows(outcomes: list[ShortOutcome]) -> list[list[str]]:
    rows = []
    for name, shape in SHORT.items():
        mine = [o for o in outcomes if o.scenario == name]
        if not mine:
            continue
        step = shape.at is not None
        rows.append(
            [
                f"{name} ({shape.commits} commits{', busy' if shape.busy else ''})",
                _rate(o.found if step else o.any_finding for o in mine).label(),
                _rate(o.found_regression if step else o.alarm for o in mine).label(),
                _rate(o.found_confirmed for o in mine).label() if step else "",
                _rate(o.improvement for o in mine).label(),
                *(
                    _rate(o.asv_found[k] if step else o.asv_alarm[k] for o in mine).label()
                    for k in range(len(ASV_THRESHOLDS))
                ),
            ]
        )
    return rows


def short_targets(outcomes: list[ShortOutcome]) -> list[tuple[str, bool]]:
    out = []
    for name, shape in SHORT.items():
        mine = [o for o in outcomes if o.scenario == name]
        if not mine:
            continue
        if shape.target is not None:
            rate = _rate(o.found for o in mine)
            out.append((f">= {shape.target:.0%} of {name} found", rate.value >= shape.target))
        elif shape.at is None:
            any_rate, alarm = _rate(o.any_finding for o in mine), _rate(o.alarm for o in mine)
            out.append(
                (
                    f"<= {TARGET_SHORT_ANY:.0%} of {name} with a finding",
                    any_rate.value <= TARGET_SHORT_ANY,
                )
            )
            out.append(
                (
                    f"<= {TARGET_SHORT_ALARM:.0%} of {name} with a regression",
                    alarm.value <= TARGET_SHORT_ALARM,
                )
            )
    return out


def format_short(outcomes: list[ShortOutcome], markdown: bool) -> str:
    rows = short_rows(outcomes)
    targets = short_targets(outcomes)
    if markdown:
        table = ["| " + " | ".join(SHORT_HEADERS) + " |", "|" + "---|" * len(SHORT_HEADERS)]
        table += ["| " + " | ".join(row) + " |" for row in rows]
        marks = [f"- {'met' if ok else '**missed**'}: {name}" for name, ok in targets]
        return "\n".join(["Short histories (issue 32):", "", *table, "", *marks, ""])
    widths = [max(len(str(x)) for x in col) for col in zip(SHORT_HEADERS, *rows, strict=True)]
    lines = [
        "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True))
        for row in [list(SHORT_HEADERS), *rows]
    ]
    lines += ["", *(f"{'met ' if ok else 'MISS'} {name}" for name, ok in targets)]
    return "\n".join(lines)


def tasks(
    seed: int,
    histories: int,
    commits: int,
    between_pct: float | None = None,
    only: tuple[str, ...] = (),
) -> list[Task]:
    """`histories` per scenario (those of `only`, else all); for `env`, histories /
    SERIES_PER_MACHINE machines."""
    out = []
    for scenario in SCENARIOS:
        if only and scenario not in only:
            continue
        count = histories
        if scenario == "env":
            count = max(1, histories // SERIES_PER_MACHINE)
        out.extend((scenario, seed, i, commits, between_pct) for i in range(count))
    return out


def evaluate(
    seed: int,
    histories: int,
    commits: int = sim.COMMITS,
    workers: int = 1,
    between_pct: float | None = None,
    only: tuple[str, ...] = (),
) -> Report:
    """Every scenario's outcomes (those of `only`, else all), with at most `workers` processes."""
    todo = tasks(seed, histories, commits, between_pct, only)
    started = time.perf_counter()
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(run_task, todo, chunksize=16)
    else:
        results = [run_task(t) for t in todo]
    outcomes = [o for batch in results for o in batch]
    return Report(seed, histories, commits, outcomes, time.perf_counter() - started, workers)


@dataclass(frozen=True)
class Rate:
    hits: int
    total: int

    @property
    def value(self) -> float:
        return self.hits / self.total if self.total else float("nan")

    def label(self) -> str:
        return f"{100 * self.value:.1f}% ({self.hits}/{self.total})"


def _rate(flags: Iterable[bool]) -> Rate:
    values = list(flags)
    return Rate(sum(values), len(values))


@dataclass(frozen=True)
class Report:
    seed: int
    histories: int
    commits: int
    outcomes: list[Outcome]
    seconds: float
    workers: int

    def of(self, scenario: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.scenario == scenario]

    def rows(self) -> list[tuple[str, list[Rate]]]:
        """Per detector: found 0.5%, 1%, 2%; false alarms; env shift reported."""

        def column(pick_found, pick_alarm) -> list[Rate]:
            return [
                *(_rate(pick_found(o) for o in self.of(s)) for s in STEPS),
                _rate(pick_alarm(o) for o in self.of("none")),
                _rate(pick_alarm(o) for o in self.of("env")),
            ]

        rows = [
            ("fwdasv detect", column(lambda o: o.found, lambda o: o.alarm)),
            (
                "fwdasv detect + confirm",
                column(lambda o: o.found_confirmed, lambda o: o.alarm_confirmed),
            ),
        ]
        for k, threshold in enumerate(ASV_THRESHOLDS):
            rows.append(
                (
                    f"asv publish, threshold {100 * threshold:g}%",
                    column(lambda o, k=k: o.asv_found[k], lambda o, k=k: o.asv_alarm[k]),
                )
            )
        return rows

    def edge_rows(self) -> list[tuple[str, list[Rate]]]:
        """Per edge scenario and detector: found (any status), found as regression."""
        out = []
        for name in EDGES:
            cases = self.of(name)
            if not cases:
                continue
            out.append(
                (
                    name,
                    [
                        _rate(o.found for o in cases),
                        _rate(o.found_regression for o in cases),
                        *(_rate(o.asv_found[k] for o in cases) for k in range(len(ASV_THRESHOLDS))),
                    ],
                )
            )
        none = self.of("none")
        out.append(
            (
                "none (false alarms)",
                [
                    _rate(o.any_finding for o in none),
                    _rate(o.alarm for o in none),
                    *(_rate(o.asv_alarm[k] for o in none) for k in range(len(ASV_THRESHOLDS))),
                ],
            )
        )
        return out

    def edge_confirm_line(self) -> str:
        none = self.of("none")
        return (
            "no step, after the simulated re-measure of every regression and suspected "
            f"finding (fresh draws): {_rate(o.alarm_any_confirmed for o in none).label()} "
            "histories with a confirmed finding"
        )

    def edge_targets(self) -> list[tuple[str, bool]]:
        rows = dict(self.edge_rows())
        out = []
        for name, edge in EDGES.items():
            if name not in rows:
                continue
            rate = rows[name][1 if edge.as_regression else 0]
            kind = " as regression" if edge.as_regression else ""
            out.append((f">= {edge.target:.0%} of {name} found{kind}", rate.value >= edge.target))
        none_any, none_alarm = rows["none (false alarms)"][:2]
        none = self.of("none")
        confirmed = _rate(o.alarm_any_confirmed for o in none)
        out += [
            (
                f"<= {TARGET_EDGE_ANY:.0%} of no-step histories with any finding",
                none_any.value <= TARGET_EDGE_ANY,
            ),
            (
                f"<= {TARGET_EDGE_ALARM:.0%} of no-step histories with a regression",
                none_alarm.value <= TARGET_EDGE_ALARM,
            ),
            (
                f"<= {TARGET_EDGE_ALARM:.0%} of no-step histories confirmed (suspected re-measured)",
                confirmed.value <= TARGET_EDGE_ALARM,
            ),
        ]
        return out

    def noise_lines(self) -> list[str]:
        ratios = np.array([o.noise_ratio for o in self.outcomes if o.scenario in MIDDLE[:-1]])
        if ratios.size == 0:
            return []
        low, mid, high = np.percentile(ratios, [5, 50, 95])
        within = [np.mean((ratios <= f) & (ratios >= 1 / f)) for f in (1.25, 1.5, 2.0)]
        return [
            f"noise estimate / true noise over {ratios.size} series: median {mid:.3f}, "
            f"90% in [{low:.3f}, {high:.3f}]; within x1.25: {100 * within[0]:.1f}%, "
            f"x1.5: {100 * within[1]:.1f}%, x2: {100 * within[2]:.1f}%"
        ]

    def confirm_lines(self) -> list[str]:
        processes = [p for o in self.outcomes for p in o.processes]
        undecided = sum(o.undecided for o in self.outcomes)
        env = self.of("env")
        caught = _rate(bool(o.canary_caught) for o in env[::SERIES_PER_MACHINE])
        if not processes:
            return ["no confirmation runs"]
        counts = {n: processes.count(n) for n in sorted(set(processes))}
        spread = ", ".join(f"{n}: {c}" for n, c in counts.items())
        noops = [o.noop for o in self.of("none") if o.noop is not None]
        noop_line = (
            f"a no-op pair re-measured (each step-free history's middle pair, claimed +1%): "
            f"{_rate(n == Status.CONFIRMED for n in noops).label()} confirmed, "
            f"{_rate(n == Status.NOT_REPRODUCED for n in noops).label()} not-reproduced"
        )
        return [
            noop_line,
            f"confirmation runs: {len(processes)}, processes a side: mean "
            f"{np.mean(processes):.1f} ({spread}); undecided at the last look: {undecided}",
            f"canary found the +1.5% environment shift at its commit (+-1) on "
            f"{caught.label()} machines",
        ]

    def targets(self) -> list[tuple[str, bool]]:
        by_name = dict(self.rows())
        detect_only, confirmed = by_name["fwdasv detect"], by_name["fwdasv detect + confirm"]
        return [
            (
                f">= {TARGET_STEP1:.0%} of 1% steps found (detect)",
                detect_only[1].value >= TARGET_STEP1,
            ),
            (
                f">= {TARGET_STEP05:.0%} of 0.5% steps found (detect)",
                detect_only[0].value >= TARGET_STEP05,
            ),
            (
                f"<= {TARGET_FALSE_ALARM:.0%} of no-step histories with a finding (detect)",
                detect_only[3].value <= TARGET_FALSE_ALARM,
            ),
            (
                f"<= {TARGET_FALSE_ALARM:.0%} of no-step histories confirmed",
                confirmed[3].value <= TARGET_FALSE_ALARM,
            ),
            (
                f"<= {TARGET_ENV:.0%} of env-shifted series reported as regression (detect)",
                detect_only[4].value <= TARGET_ENV,
            ),
        ]

    def header(self) -> str:
        machines = len(self.of("env")) // SERIES_PER_MACHINE
        return (
            f"seed {self.seed}, {self.commits} commits, {self.histories} histories per scenario "
            f"(none, 0.5%, 1%, 2% steps) + {machines} machines x {SERIES_PER_MACHINE} series "
            f"with a +1.5% environment shift + {len(EDGES)} edge scenarios of {self.histories} "
            f"histories; {len(self.outcomes)} series, "
            f"{self.seconds:.0f} s on {self.workers} worker{'s' if self.workers > 1 else ''}"
        )


EDGE_HEADERS = (
    "edge scenario",
    "fwdasv: found (any status)",
    "fwdasv: found as regression",
    *(f"asv publish {100 * t:g}%" for t in ASV_THRESHOLDS),
)

HEADERS = (
    "detector",
    "0.5% steps found",
    "1% steps found",
    "2% steps found",
    "no step: any finding",
    "+1.5% env shift: regression",
)


def format_text(report: Report) -> str:
    rows = [[name, *(r.label() for r in rates)] for name, rates in report.rows()]
    widths = [max(len(str(x)) for x in col) for col in zip(HEADERS, *rows, strict=True)]
    lines = [report.header(), ""]
    for row in [list(HEADERS), *rows]:
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
    lines += ["", *report.noise_lines(), *report.confirm_lines(), ""]
    lines += [f"{'met ' if ok else 'MISS'} {name}" for name, ok in report.targets()]
    edge_rows = [[name, *(r.label() for r in rates)] for name, rates in report.edge_rows()]
    widths = [max(len(str(x)) for x in col) for col in zip(EDGE_HEADERS, *edge_rows, strict=True)]
    lines.append("")
    for row in [list(EDGE_HEADERS), *edge_rows]:
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
    lines += ["", report.edge_confirm_line(), ""]
    lines += [f"{'met ' if ok else 'MISS'} {name}" for name, ok in report.edge_targets()]
    return "\n".join(lines)


def format_markdown(report: Report, command: str) -> str:
    rows = [[f"{name}", *(r.label() for r in rates)] for name, rates in report.rows()]
    table = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [*report.noise_lines(), *report.confirm_lines()]
    targets = [f"- {'met' if ok else '**missed**'}: {name}" for name, ok in report.targets()]
    edge_table = ["| " + " | ".join(EDGE_HEADERS) + " |", "|" + "---|" * len(EDGE_HEADERS)]
    edge_table += [
        "| " + " | ".join([name, *(r.label() for r in rates)]) + " |"
        for name, rates in report.edge_rows()
    ]
    edge_targets = [
        f"- {'met' if ok else '**missed**'}: {name}" for name, ok in report.edge_targets()
    ]
    return "\n".join(
        [
            f"Command: `{command}` ({report.header()}).",
            "",
            *table,
            "",
            *(f"- {line}" for line in notes),
            "",
            "Targets:",
            "",
            *targets,
            "",
            "Edges (issue 19):",
            "",
            *edge_table,
            "",
            f"- {report.edge_confirm_line()}",
            "",
            *edge_targets,
            "",
        ]
    )


@click.command()
@click.option("--seed", default=1, show_default=True, help="Seed of every simulated history.")
@click.option(
    "--histories",
    default=2000,
    show_default=True,
    help="Histories per scenario (the env scenario: this many series, 8 per machine).",
)
@click.option("--commits", default=sim.COMMITS, show_default=True, help="Commits per history.")
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(1, 2),
    help="Processes (at most 2: the machine is shared).",
)
@click.option(
    "--between-pct",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Fix every series' run-to-run noise of a commit's median at this percent "
    "[default: drawn per series, log-uniform in 0.05-0.5%].",
)
@click.option(
    "--scenario",
    "only",
    multiple=True,
    type=click.Choice(SCENARIOS),
    help="Run only this scenario (repeatable; seeds are the same as in a full run) [default: all].",
)
@click.option("--markdown", is_flag=True, help="Emit a Markdown table for docs/measurements.md.")
@click.option(
    "--short/--no-short",
    "short",
    default=True,
    show_default=True,
    help="The short histories' table (SHORT) after the others.",
)
@click.option("--short-only", is_flag=True, help="Only the short histories' table.")
def main(
    seed: int,
    histories: int,
    commits: int,
    workers: int,
    between_pct: float | None,
    only: tuple[str, ...],
    markdown: bool,
    short: bool,
    short_only: bool,
) -> None:
    """Detection and false-alarm rates of fwdasv's verdicts beside asv's."""
    if short_only:
        click.echo(format_short(evaluate_short(seed, histories, workers), markdown))
        return
    report = evaluate(seed, histories, commits, workers, between_pct, only)
    if markdown:
        fixed = "" if between_pct is None else f" --between-pct {between_pct:g}"
        fixed += "".join(f" --scenario {s}" for s in only)
        command = (
            f"python bench/verdicts/verdict_quality.py --seed {seed} --histories {histories} "
            f"--commits {commits} --workers {workers}{fixed} --markdown"
        )
        click.echo(format_markdown(report, command))
    else:
        click.echo(format_text(report))
    if short and not only:
        click.echo("\n" + format_short(evaluate_short(seed, histories, workers), markdown))


if __name__ == "__main__":
    main()
