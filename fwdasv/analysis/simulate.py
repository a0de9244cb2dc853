"""Seeded simulations of GPU-like latency histories, to measure what verdicts get right.

Research tooling, not part of any command: bench/verdicts/verdict_quality.py (the
verdict-quality figures of docs/measurements.md), bench/verdicts/busy_verdicts.py and
the tests use it to calibrate and check the rules of `noise`, `detect` and
`confirm`; it stays in the package beside them so that both run the same code.
Per commit one process stores `samples` per-block medians,
sample_j = level_i * o_i * exp(b_i + w_ij): the true level times every shift at or
before i (the project's, CODE, or the machine's, ENV), a process offset b_i (sd
`between_pct`), the in-run spread w_ij (sd `within_pct`) and now and then a
whole-commit outlier o_i. `remeasure` runs new processes at two commits' code levels
(the machine as it is now), `confirm_step` runs `confirm` that way, and
`asv_regressions` runs asv's own detector on a history as `asv publish` does.
The model and its ranges: docs/verdicts.md, "The simulator".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from asv import step_detect
from asv._stats import get_weight
from asv.graph import Graph
from asv.util import truncate_float_list
from asv_runner.statistics import compute_stats

from fwdasv.analysis.rules.confirm import Confirmation, ab_indices, run_confirmation
from fwdasv.analysis.rules.noise import Noise, commit_medians
from fwdasv.analysis.rules.step import Step

if TYPE_CHECKING:
    from typing_extensions import Unpack

COMMITS = 60
SAMPLES = 10
MIN_BEFORE = 10  # commits before a random step
MIN_AFTER = 5  # commits at the new level, the first included
BASE_S = (20e-6, 50e-3)  # log-uniform: tens of us to tens of ms
BETWEEN_PCT = (0.05, 0.5)  # log-uniform: quiet decodes to noisy prefills on an H200
WITHIN_PCT = (0.1, 0.3)  # uniform
OUTLIER_RATE = 0.03  # commits in a slow clock state or beside a noisy neighbour
OUTLIER_PCT = (1.0, 3.0)  # how much slower such a commit is
ENV_SHIFT_PCT = 1.5  # a machine's shift: the offset measured between two H200 hosts
# A busy 2-core CPU box (bench/verdicts/busy_verdicts.py): a commit's process offset
# log-uniform 3-12%, in-run spread 2-6%, 20 samples, 10% of commits +10-40% slow.
BUSY_BETWEEN_PCT = (3.0, 12.0)
BUSY_WITHIN_PCT = (2.0, 6.0)
BUSY_SAMPLES = 20
BUSY_OUTLIER_RATE = 0.10
BUSY_OUTLIER_PCT = (10.0, 40.0)

CODE, ENV = "code", "env"


@functools.lru_cache(maxsize=64)
def median_variance_factor(n: int) -> float:
    """n * var(median of n standard normals), by a fixed-seed Monte Carlo (200,000 draws)."""
    if n == 1:
        return 1.0
    rng = np.random.default_rng(12345)
    draws = np.median(rng.standard_normal((200_000, n)), axis=1)
    return float(n * draws.var())


@dataclass(frozen=True)
class SeriesSpec:
    """One series' noise model (percentages are relative sds)."""

    base_s: float
    between_pct: float
    within_pct: float
    samples: int = SAMPLES
    outlier_rate: float = OUTLIER_RATE
    outlier_pct: tuple[float, float] = OUTLIER_PCT
    fail_rate: float = 0.0

    def __post_init__(self) -> None:
        assert self.base_s > 0 and self.samples >= 1, f"bad spec {self}"
        assert self.between_pct >= 0 and self.within_pct >= 0, f"bad spec {self}"

    @property
    def true_noise_pct(self) -> float:
        """sd of a commit's ln median, %, outliers aside."""
        within_se2 = median_variance_factor(self.samples) * self.within_pct**2 / self.samples
        return math.sqrt(self.between_pct**2 + within_se2)


@dataclass(frozen=True)
class Shift:
    """From commit `index` on, the level is multiplied by 1 + pct / 100."""

    index: int
    pct: float
    kind: str = CODE  # CODE: the project's; ENV: the machine's


@dataclass(frozen=True)
class SimHistory:
    """A simulated series: per commit the samples asv would store (empty: failed)."""

    spec: SeriesSpec
    shifts: tuple[Shift, ...]
    samples: tuple[tuple[float, ...], ...]
    outliers: tuple[int, ...] = ()
    name: str = ""

    @property
    def commits(self) -> int:
        return len(self.samples)

    def level(self, index: int, kinds: Sequence[str] = (CODE, ENV)) -> float:
        """The true level at a commit, from the shifts of `kinds`."""
        value = self.spec.base_s
        for shift in self.shifts:
            if shift.kind in kinds and shift.index <= index:
                value *= 1 + shift.pct / 100
        return value

    def medians(self) -> list[float | None]:
        return commit_medians(self.samples)

    def asv_stored(self) -> list[dict[str, float | list[float]] | None]:
        """What asv's results would hold per commit: median, stats (truncated), samples."""
        out: list[dict[str, float | list[float]] | None] = []
        for samples in self.samples:
            if not samples:
                out.append(None)
                continue
            median, stats = compute_stats(list(samples), 1)
            stats = {k: truncate_float_list(v) for k, v in stats.items()}
            out.append({"median": median, **stats, "samples": list(samples)})
        return out


class SpecFields(TypedDict, total=False):
    """`SeriesSpec`'s fields, as keywords that fix them (`random_spec`)."""

    base_s: float
    between_pct: float
    within_pct: float
    samples: int
    outlier_rate: float
    outlier_pct: tuple[float, float]
    fail_rate: float


def random_spec(rng: np.random.Generator, **overrides: Unpack[SpecFields]) -> SeriesSpec:
    """A series drawn from the module's ranges; keyword arguments fix fields."""
    drawn = SeriesSpec(
        base_s=_log_uniform(rng, *BASE_S),
        between_pct=_log_uniform(rng, *BETWEEN_PCT),
        within_pct=float(rng.uniform(*WITHIN_PCT)),
    )
    return replace(drawn, **overrides)


def busy_spec(rng: np.random.Generator) -> SeriesSpec:
    """A series of a busy 2-core CPU box (the BUSY_* ranges), 2 ms."""
    return SeriesSpec(
        base_s=2e-3,
        between_pct=_log_uniform(rng, *BUSY_BETWEEN_PCT),
        within_pct=float(rng.uniform(*BUSY_WITHIN_PCT)),
        samples=BUSY_SAMPLES,
        outlier_rate=BUSY_OUTLIER_RATE,
        outlier_pct=BUSY_OUTLIER_PCT,
    )


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_index(
    rng: np.random.Generator,
    commits: int = COMMITS,
    min_before: int = MIN_BEFORE,
    min_after: int = MIN_AFTER,
) -> int:
    """A step's first commit at the new level: min_before <= index <= commits - min_after."""
    if commits - min_after < min_before:
        raise ValueError(f"{commits} commits cannot hold {min_before} before and {min_after} after")
    return int(rng.integers(min_before, commits - min_after + 1))


def _process(
    spec: SeriesSpec, level: float, rng: np.random.Generator, outliers: bool = True
) -> tuple[tuple[float, ...], bool]:
    """One process's samples at `level`, and whether it was an outlier."""
    factor = 1.0
    outlier = outliers and rng.random() < spec.outlier_rate
    if outlier:
        factor += rng.uniform(*spec.outlier_pct) / 100
    offset = rng.normal(0.0, spec.between_pct / 100)
    spread = rng.normal(0.0, spec.within_pct / 100, spec.samples)
    samples = level * factor * np.exp(offset + spread)
    return tuple(float(s) for s in samples), outlier


def simulate(
    spec: SeriesSpec,
    rng: np.random.Generator,
    commits: int = COMMITS,
    shifts: Sequence[Shift] = (),
    name: str = "",
) -> SimHistory:
    """A history of `commits` commits with `shifts`, one process per commit."""
    shifts = tuple(shifts)
    for shift in shifts:
        assert 0 <= shift.index < commits, f"shift at {shift.index} outside {commits} commits"
    history: list[tuple[float, ...]] = []
    outliers: list[int] = []
    partial = SimHistory(spec, shifts, ())
    for i in range(commits):
        if spec.fail_rate and rng.random() < spec.fail_rate:
            history.append(())
            continue
        samples, outlier = _process(spec, partial.level(i), rng)
        history.append(samples)
        if outlier:
            outliers.append(i)
    return SimHistory(spec, shifts, tuple(history), tuple(outliers), name)


@dataclass(frozen=True)
class Machine:
    """Series of one machine sharing an environment shift, and its canary."""

    series: tuple[SimHistory, ...]
    canary: SimHistory
    env_index: int | None
    env_pct: float = field(default=ENV_SHIFT_PCT)


def simulate_machine(
    rng: np.random.Generator,
    series: int = 8,
    commits: int = COMMITS,
    env_pct: float = ENV_SHIFT_PCT,
    env_index: int | None = None,
    code_shifts: Sequence[Sequence[Shift]] = (),
    spec_overrides: SpecFields | None = None,
) -> Machine:
    """`series` random series and a canary, all shifted by `env_pct` at one commit.

    `env_index` None draws it with `random_index`; `code_shifts[k]` adds the
    project's own shifts to series k (the canary has none: it does not depend
    on the project); `spec_overrides` fixes fields of every drawn series
    (`random_spec`'s keywords).
    """
    fixed: SpecFields = spec_overrides or {}
    index = random_index(rng, commits) if env_index is None else env_index
    env = (Shift(index, env_pct, ENV),) if env_pct else ()
    out = []
    for k in range(series):
        own = tuple(code_shifts[k]) if k < len(code_shifts) else ()
        spec = random_spec(rng, **fixed)
        out.append(simulate(spec, rng, commits, env + own, name=f"series{k}"))
    canary = simulate(random_spec(rng, **fixed), rng, commits, env, name="canary")
    return Machine(tuple(out), canary, index if env_pct else None, env_pct)


def remeasure(
    history: SimHistory,
    a_index: int,
    b_index: int,
    processes: int,
    rng: np.random.Generator,
) -> tuple[list[float], list[float]]:
    """Medians of `processes` new processes at commits A and B, interleaved on one machine.

    The machine is as it is now, the same for both: only code shifts differ.
    """
    level_a = history.level(a_index, (CODE,))
    level_b = history.level(b_index, (CODE,))
    a: list[float] = []
    b: list[float] = []
    for _ in range(processes):
        for level, side in ((level_a, a), (level_b, b)):
            samples, _ = _process(history.spec, level, rng)
            side.append(float(np.median(samples)))
    return a, b


def asv_regressions(
    history: SimHistory, thresholds: Sequence[float]
) -> dict[float, list[tuple[int, int]]]:
    """asv publish's regressions of the series: per threshold, (before_index, after_index) jumps.

    As `asv publish`: per commit (revision = index) the stored median with
    weight 2 / |ci_99_b - ci_99_a| (None when infinite), a failed commit as a
    missing point, `Graph.get_steps()`, then `detect_regressions(steps, threshold)`.
    `before_index` is the last revision at the old level (asv's `rev_before`,
    before publish replaces a one-commit range by null).
    """
    graph = Graph("sim.track_latency", {"machine": "sim"})
    for revision, stored in enumerate(history.asv_stored()):
        if stored is None:
            graph.add_data_point(revision, None, None)
            continue
        graph.add_data_point(revision, stored["median"], get_weight(stored))
    steps = graph.get_steps()
    out: dict[float, list[tuple[int, int]]] = {}
    for threshold in thresholds:
        _, _, jumps = step_detect.detect_regressions(steps, threshold)
        out[threshold] = [(int(j[0]), int(j[1])) for j in jumps or []]
    return out


class ConfirmOptions(TypedDict, total=False):
    """`run_confirmation`'s keywords that `confirm_step` passes on."""

    min_effect_pct: float
    alpha: float
    start: int
    max_processes: int


def confirm_step(
    history: SimHistory,
    step: Step,
    noise: Noise,
    rng: np.random.Generator,
    **options: Unpack[ConfirmOptions],
) -> Confirmation:
    """The confirmation re-measure of a finding, run as `fwdasv.analysis.rules.confirm` would run it.

    A and B are `fwdasv.analysis.rules.confirm.ab_indices(step)`; processes are added
    while the verdict is undecided (`run_confirmation`). `options` go to it.
    """
    a_index, b_index = ab_indices(step, history.medians())

    def measure(processes: int) -> tuple[list[float], list[float]]:
        return remeasure(history, a_index, b_index, processes, rng)

    return run_confirmation(measure, noise, claimed_pct=step.percent, **options)
