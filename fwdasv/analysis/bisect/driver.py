"""Find the commit that made one benchmark case slower, measuring with asv as it goes.

`asv find` bisects on medians alone and assumes one clean step; on noisy
timings it follows noise, and on an `existing` environment (or `--python=same`)
it measures the one installed build for every commit and saves those numbers
under each hash. `fwdasv bisect` drives `asv run` itself, one commit per run,
on an asv-managed environment (virtualenv, uv, conda, rattler: asv installs the
project at each commit), and decides every step on the samples.

The rule. GOOD and BAD must differ first: Mann-Whitney p < alpha with a median
ratio beyond `factor` (the *direction* of the step, slower or faster, is taken
from them; both are re-measured up to `max_remeasure` times before giving up).
A probe M between them is compared with both ends, each comparison one of

    different  the median moved beyond `factor` in the step's direction, and p < alpha
    same       the median did not move beyond `factor` in that direction
    unknown    it moved beyond `factor` but p >= alpha (asv compare's `~`), or too
               few samples to test at all (fwdasv.core.stats.is_different gives None)

and then

    GOOD->M different, M->BAD same       M is bad (the step is at or before M)
    GOOD->M same,      M->BAD different  M is good (the step is after M)
    GOOD->M different, M->BAD different  M is part way: it goes with the end it is
                                         nearer to (in log ratio), so a process that
                                         ran 10% slow is not taken for an 80% step
    anything else                        unknown: measure M again (asv --append-samples)

So the commit found is where the benchmark crossed half of the GOOD->BAD change:
the step, for one step; the larger share of it, for several.

After `max_remeasure` extra runs a probe still unknown is decided by the closer
median (in log ratio) and the result is marked uncertain. The probes halve the
first-parent range, so a range of N commits needs about ceil(log2 N) asv runs,
plus re-measures; stored results with enough samples are reused, not re-run.
A probe whose benchmark fails is skipped (the next candidate nearest the middle
is taken), as `asv find` shifts past failed commits.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwdasv.asv.history import CommitFilter, History, param_label
from fwdasv.asv.project import AsvError, AsvProject, run_commits
from fwdasv.core import stats
from fwdasv.core.errors import UserError
from fwdasv.core.tables import human_value

DEFAULT_FACTOR = 1.05
DEFAULT_ALPHA = stats.SIGNIFICANCE
DEFAULT_MAX_REMEASURE = 2

DIFFERENT, SAME, UNKNOWN = "different", "same", "unknown"
GOOD, BAD = "good", "bad"

# asv environment types that install the project at every commit.
PER_COMMIT_ENVS = ("virtualenv", "uv", "conda", "mamba", "rattler")


class BisectError(UserError):
    """Bisect cannot start or cannot go on (refused environment, no step, bad names)."""


# --- pure logic -----------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One comparison x -> y in the direction of the regression."""

    outcome: str  # different / same / unknown
    ratio: float | None = None  # median(y) / median(x)
    p_value: float | None = None


def compare_step(
    x: Sequence[float],
    y: Sequence[float],
    direction: int,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
) -> Step:
    """x -> y in `direction` (+1: is y slower? -1: is y faster?).

    `same` when the median ratio is within `factor` that way; beyond it,
    `different` when Mann-Whitney says p < alpha, else `unknown`: a large move
    that the samples do not confirm is a reason to measure again, never
    evidence that nothing changed. Too few samples to test: `unknown`.
    """
    xs = [v for v in x if not math.isnan(v)]
    ys = [v for v in y if not math.isnan(v)]
    if not xs or not ys:
        return Step(UNKNOWN)
    ratio = stats.median(ys) / stats.median(xs)
    decided = stats.is_different(xs, ys, alpha)
    p_value = None if decided is None else stats.mann_whitney_u(xs, ys)[1]
    moved = ratio > factor if direction > 0 else ratio < 1 / factor
    if not moved:
        return Step(SAME if decided is not None else UNKNOWN, ratio, p_value)
    return Step(DIFFERENT if decided else UNKNOWN, ratio, p_value)


@dataclass(frozen=True)
class Classification:
    verdict: str  # good / bad / unknown
    from_good: Step
    to_bad: Step


def classify(
    good: Sequence[float],
    probe: Sequence[float],
    bad: Sequence[float],
    direction: int,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
) -> Classification:
    """The module's rule table for one probe between GOOD and BAD."""
    from_good = compare_step(good, probe, direction, factor, alpha)
    to_bad = compare_step(probe, bad, direction, factor, alpha)
    if from_good.outcome == DIFFERENT and to_bad.outcome == SAME:
        verdict = BAD
    elif from_good.outcome == SAME and to_bad.outcome == DIFFERENT:
        verdict = GOOD
    elif from_good.outcome == DIFFERENT and to_bad.outcome == DIFFERENT:
        verdict = closer(good, probe, bad)
    else:
        verdict = UNKNOWN
    return Classification(verdict, from_good, to_bad)


def closer(good: Sequence[float], probe: Sequence[float], bad: Sequence[float]) -> str:
    """The fallback: the end whose median is nearer the probe's, in log ratio."""
    m = math.log(stats.median(probe))
    return (
        GOOD
        if abs(m - math.log(stats.median(good))) <= abs(m - math.log(stats.median(bad)))
        else BAD
    )


def next_probe(lo: int, hi: int, skipped: frozenset[int] | set[int] = frozenset()) -> int | None:
    """The untried index strictly between lo and hi nearest the middle (None: done)."""
    middle = (lo + hi) // 2
    candidates = [i for i in range(lo + 1, hi) if i not in skipped]
    if not candidates:
        return None
    return min(candidates, key=lambda i: (abs(i - middle), i))


def expected_probes(commits: int) -> int:
    """Probes a plain binary search needs over `commits` commits after GOOD (BAD included)."""
    return math.ceil(math.log2(commits)) if commits > 1 else 0


# --- results --------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    commit: str
    subject: str | None
    verdict: str  # good / bad / failed
    median: float | None
    sample_count: int
    from_good: Step | None = None
    to_bad: Step | None = None
    remeasures: int = 0
    decided_by: str = "samples"  # samples / closer-median (uncertain) / failed


@dataclass(frozen=True)
class BisectResult:
    benchmark: str
    case: str | None
    machine: str
    env_name: str
    unit: str | None
    good: str
    bad: str
    range_size: int  # commits after GOOD up to BAD, first-parent
    direction: int  # +1: BAD is slower
    last_good: str
    first_bad: str
    subject: str | None
    before_median: float
    after_median: float
    p_value: float | None
    asv_runs: int
    remeasures: int
    probes: tuple[Probe, ...] = ()
    skipped: tuple[str, ...] = ()  # candidates between last_good and first_bad that failed

    @property
    def percent(self) -> float:
        return 100 * (self.after_median - self.before_median) / self.before_median

    @property
    def certain(self) -> bool:
        return not self.skipped and all(p.decided_by != "closer-median" for p in self.probes)

    @property
    def name(self) -> str:
        return f"{self.benchmark}({self.case})" if self.case else self.benchmark

    def summary(self) -> str:
        p = f", p={self.p_value:.2g}" if self.p_value is not None else ""
        label = self.first_bad[:8] + (f" {self.subject}" if self.subject else "")
        line = (
            f"first bad commit: {label}: {self.name} "
            f"{human_value(self.before_median, self.unit)} -> "
            f"{human_value(self.after_median, self.unit)} ({self.percent:+.1f}%{p}); "
            f"{self.asv_runs} asv run{'s' if self.asv_runs != 1 else ''} "
            f"({self.remeasures} re-measure{'s' if self.remeasures != 1 else ''}) "
            f"over {self.range_size} commits"
        )
        if self.skipped:
            line += (
                f"; could not measure {', '.join(c[:8] for c in self.skipped)}: "
                "the step may be there"
            )
        if not self.certain:
            line += " (uncertain: some probes were decided by the closer median)"
        return line

    def to_json(self) -> dict[str, Any]:
        def step(s: Step | None) -> dict[str, Any] | None:
            return None if s is None else {"outcome": s.outcome, "ratio": s.ratio, "p": s.p_value}

        return {
            "benchmark": self.benchmark,
            "case": self.case,
            "machine": self.machine,
            "env_name": self.env_name,
            "good": self.good,
            "bad": self.bad,
            "range_size": self.range_size,
            "direction": "slower" if self.direction > 0 else "faster",
            "first_bad": self.first_bad,
            "last_good": self.last_good,
            "subject": self.subject,
            "before_median": self.before_median,
            "after_median": self.after_median,
            "percent": self.percent,
            "p_value": self.p_value,
            "asv_runs": self.asv_runs,
            "remeasures": self.remeasures,
            "certain": self.certain,
            "skipped": list(self.skipped),
            "probes": [
                {
                    "commit": p.commit,
                    "subject": p.subject,
                    "verdict": p.verdict,
                    "median": p.median,
                    "sample_count": p.sample_count,
                    "from_good": step(p.from_good),
                    "to_bad": step(p.to_bad),
                    "remeasures": p.remeasures,
                    "decided_by": p.decided_by,
                }
                for p in self.probes
            ],
        }


# --- the environment ------------------------------------------------------------------


def check_environment(project: AsvProject, python: str | None = None) -> None:
    """Refuse environments where asv does not install each commit (one clear error)."""
    why = (
        "bisect needs asv to install the project at every commit it measures; an existing "
        "environment (environment_type 'existing', --python=same, or a python path) runs "
        "the one build already installed for every commit, so every commit would look "
        "the same (asv find's pitfall). Use an asv-managed environment: "
        '"environment_type": "virtualenv" (or "uv") with "pythons": ["X.Y"] and an '
        "install_command that installs {build_dir} per commit"
    )
    env_type = project.environment_type
    if env_type == "existing":
        raise BisectError(f"{project.config_path}: environment_type is 'existing': {why}")
    for spec in [python] if python else []:
        if spec == "same" or spec.startswith("existing") or "/" in spec:
            raise BisectError(f"--python={spec} selects an existing environment: {why}")
    for spec in project.raw.get("pythons") or []:
        if spec == "same" or "/" in str(spec):
            raise BisectError(
                f"{project.config_path}: pythons holds {spec!r}, an existing environment: {why}"
            )
    if env_type not in PER_COMMIT_ENVS:
        raise BisectError(
            f"{project.config_path}: environment_type {env_type!r} is not one fwdasv knows "
            f"to install per commit ({', '.join(PER_COMMIT_ENVS)})"
        )


def check_per_commit(record: dict[str, Any], commit: str) -> None:
    """A result used by bisect must be this commit's, from a per-commit environment."""
    if record["commit_hash"] != commit:
        raise BisectError(
            f"the result file for {commit[:8]} holds commit {record['commit_hash']} "
            "(two commits share the 8-character prefix asv names files by); bisect cannot "
            "tell their results apart"
        )
    env_name = record["env_name"] or ""
    if env_name.split("-", 1)[0] not in PER_COMMIT_ENVS:
        raise BisectError(
            f"the result for {commit[:8]} comes from environment {env_name!r}, not one asv "
            "builds per commit: it may be another commit's build measured under this hash "
            "(see `fwdasv bisect --help`)"
        )


def installed_commits(project: AsvProject) -> set[str]:
    """The commit each asv-managed environment in env_dir last installed.

    asv writes `asv-install-status.json` when it installs the project into an
    environment it manages; an existing environment has none.
    """
    found = set()
    for status in project.env_dir.glob("*/asv-install-status.json"):
        try:
            commit = json.loads(status.read_text()).get("commit_hash")
        except (OSError, ValueError):
            continue
        if isinstance(commit, str):
            found.add(commit)
    return found


def verify_measured(
    project: AsvProject, machine: str, commits: Sequence[str], since: float = 0.0
) -> list[str]:
    """After `asv run` of `commits`: their result files are theirs, from per-commit installs.

    Only files written since `since` (a time.time()) are checked: older results
    of other environments may sit beside them. Returns the commits asv saved no
    result for (a failed build); raises on results bisect must not use.
    """
    folder = project.results_dir / machine
    unsaved = []
    for commit in commits:
        files = [
            p
            for p in folder.glob(f"{commit[:8]}-*.json")
            if p.is_file() and p.stat().st_mtime >= since
        ]
        if not files:
            unsaved.append(commit)
        for path in files:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as error:
                raise BisectError(f"{path}: unreadable after asv run ({error})") from None
            check_per_commit(
                {"commit_hash": data.get("commit_hash"), "env_name": data.get("env_name")}, commit
            )
    saved = [c for c in commits if c not in unsaved]
    if saved and not installed_commits(project) & set(saved):
        raise BisectError(
            f"no asv-managed environment in {project.env_dir} records installing "
            f"{', '.join(c[:8] for c in saved)}: the results cannot be shown to come from "
            "a build of that commit"
        )
    return unsaved


# --- the driver -----------------------------------------------------------------------


@dataclass
class _Benchmark:
    name: str
    case: str | None
    unit: str | None
    pattern: str  # for asv run --bench: this benchmark (and case) only


def resolve_benchmark(
    benchmarks: dict[str, dict[str, Any]], bench: str, case: str | None
) -> _Benchmark:
    """asv find's rule: an exact name, else a regex that matches exactly one benchmark."""
    if bench in benchmarks:
        names = [bench]
    else:
        try:
            pattern = re.compile(bench)
        except re.error as error:
            raise BisectError(f"BENCH {bench!r}: bad regular expression: {error}") from None
        names = sorted(n for n in benchmarks if pattern.search(n))
    if len(names) != 1:
        found = ", ".join(names[:10]) if names else "none"
        raise BisectError(f"BENCH {bench!r} must name exactly one benchmark (matches: {found})")
    name = names[0]
    info = benchmarks[name]
    params = info.get("params") or []
    combos = [", ".join(c) for c in _product(params)]
    labels = [", ".join(param_label(v) for v in c) for c in _product(params)]
    if not params:
        if case is not None:
            raise BisectError(f"{name} has no parameters: drop --case")
        return _Benchmark(name, None, info.get("unit"), f"^{re.escape(name)}$")
    if case is None:
        if len(labels) != 1:
            raise BisectError(
                f"{name} has {len(labels)} cases ({', '.join(labels)}): pick one with --case"
            )
        case = labels[0]
    if case not in labels:
        raise BisectError(f"{name} has no case {case!r} (cases: {', '.join(labels)})")
    combo = combos[labels.index(case)]
    return _Benchmark(name, case, info.get("unit"), f"^{re.escape(name)}\\({re.escape(combo)}\\)$")


def _product(params: list[list[str]]) -> list[tuple[str, ...]]:
    return list(itertools.product(*params)) if params else [()]


@dataclass
class _Series:
    """Samples of one benchmark case per commit, read back from the results dir."""

    project: AsvProject
    machine: str
    benchmark: _Benchmark | None = None
    env_name: str | None = None
    notes: list[str] = field(default_factory=list)

    def read(self, commit: str) -> dict[str, Any] | None:
        """The record of this commit (the chosen env), or None when there is none."""
        assert self.benchmark is not None
        history = History(
            self.project.results_dir,
            machines=[self.machine],
            bench=[f"^{re.escape(self.benchmark.name)}$"],
            commits=CommitFilter(frozenset([commit])),
            samples=True,
        )
        records = [
            r
            for r in history.records()
            if self.benchmark.case is None or r["case"] == self.benchmark.case
        ]
        per_commit = [
            r for r in records if (r["env_name"] or "").split("-", 1)[0] in PER_COMMIT_ENVS
        ]
        if len(per_commit) < len(records):
            self.notes.append(f"{commit[:8]}: ignored stored results from an existing environment")
        if self.env_name is not None:
            per_commit = [r for r in per_commit if r["env_name"] == self.env_name]
        envs = sorted({r["env_name"] for r in per_commit})
        if len(envs) > 1:
            raise BisectError(
                f"{commit[:8]} has results in several environments ({', '.join(envs)}); "
                "bisect follows one: limit the configuration to one python/matrix entry"
            )
        if not per_commit:
            return None
        record = per_commit[0]
        check_per_commit(record, commit)
        if self.env_name is None:
            self.env_name = record["env_name"]
        return record


def samples_of(record: dict[str, Any] | None) -> list[float]:
    if record is None or record["status"] != "ok":
        return []
    return [s for s in record.get("samples") or [] if s is not None and not math.isnan(s)]


def bisect(
    project: AsvProject,
    good: str,
    bad: str,
    benchmark: str,
    machine: str,
    case: str | None = None,
    *,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    max_remeasure: int = DEFAULT_MAX_REMEASURE,
    min_samples: int | None = None,
    python: str | None = None,
    echo: Callable[[str], None] | None = print,
    asv_echo: Callable[[str], None] | None = None,
    asv_python: str = sys.executable,
) -> BisectResult:
    """Find the first commit on the first-parent line GOOD..BAD where `benchmark` changed.

    Each measurement is one `asv run` of exactly that benchmark (and case) at one
    commit, with samples recorded or appended. `min_samples` (default: the fewest
    for which Mann-Whitney can reach `alpha`) is what a stored result must have
    to be reused without running asv. `python` is passed to asv as `--python`.
    """
    say = echo or (lambda line: None)
    if factor < 1:
        raise BisectError(f"--factor {factor}: must be >= 1 (1.05 = 5%)")
    if not 0 < alpha < 1:
        raise BisectError(f"--alpha {alpha}: must be between 0 and 1")
    if max_remeasure < 0:
        raise BisectError(f"--max-remeasure {max_remeasure}: must be >= 0")
    check_environment(project, python)
    need = min_samples or stats.min_samples_for_significance(alpha)
    try:
        good_hash = project.resolve(good)
        after_good = project.first_parent_range(good, bad)
    except AsvError as error:
        raise BisectError(str(error)) from None
    line = [good_hash, *after_good]
    bad_hash = line[-1]
    extra = ["--python", python] if python else []
    series = _Series(project, machine)
    runs = 0

    def subject(commit: str) -> str | None:
        try:
            return project.subject(commit)
        except AsvError:
            return None

    def measure(commits: Sequence[str], why: str) -> None:
        nonlocal runs
        runs += 1
        labels = ", ".join(c[:8] for c in commits)
        say(f"  asv run {runs}: {labels} ({why})")
        bench = [series.benchmark.pattern] if series.benchmark else [benchmark]
        started = time.time() - 1  # file times may be coarser than the clock
        run_commits(
            project,
            list(commits),
            machine,
            bench=bench,
            append_samples=True,
            skip_existing=False,
            extra=extra,
            echo=asv_echo,
            python=asv_python,
        )
        for commit in verify_measured(project, machine, commits, started):
            say(f"  {commit[:8]}: asv saved no result (the build or install failed?)")

    # Which benchmark: benchmarks.json names it; before any run there is none, so
    # the ends are measured with BENCH as given, then it is resolved.
    benchmarks_json = project.results_dir / "benchmarks.json"
    if not benchmarks_json.is_file():
        measure([good_hash, bad_hash], "no results yet; GOOD and BAD first")
    series.benchmark = resolve_benchmark(_benchmarks(project), benchmark, case)
    target = series.benchmark
    unit = target.unit
    expected = expected_probes(len(after_good))
    say(
        f"bisect {target.name}{f'({target.case})' if target.case else ''} on {machine}: "
        f"{len(after_good)} commits after GOOD {good_hash[:8]} up to BAD {bad_hash[:8]} "
        f"(about {expected} probes; factor {factor}, alpha {alpha})"
    )

    # The ends: measured (one run for both) unless stored with enough samples.
    records = {c: series.read(c) for c in (good_hash, bad_hash)}
    missing = [c for c, r in records.items() if len(samples_of(r)) < need]
    if missing:
        measure(missing, "GOOD/BAD without enough stored samples")
        records = {c: series.read(c) for c in (good_hash, bad_hash)}
    for label, commit in (("GOOD", good_hash), ("BAD", bad_hash)):
        if not samples_of(records[commit]):
            raise BisectError(
                f"{label} {commit[:8]}: no samples of {target.name} after measuring "
                f"(the benchmark fails or is skipped there; see asv's output with --show-asv)"
            )
    remeasures = 0
    direction = 1
    for attempt in range(max_remeasure + 1):
        g, b = samples_of(records[good_hash]), samples_of(records[bad_hash])
        direction = 1 if stats.median(b) >= stats.median(g) else -1
        ends = compare_step(g, b, direction, factor, alpha)
        say(
            f"GOOD {good_hash[:8]} {human_value(stats.median(g), unit)} (n={len(g)}) -> "
            f"BAD {bad_hash[:8]} {human_value(stats.median(b), unit)} (n={len(b)}): "
            f"{_step_text(ends)}"
        )
        if ends.outcome == DIFFERENT:
            break
        if attempt == max_remeasure:
            raise BisectError(
                f"GOOD {good_hash[:8]} and BAD {bad_hash[:8]} do not differ beyond factor "
                f"{factor} at alpha {alpha} ({_step_text(ends)}) after {attempt} re-measures: "
                "nothing to bisect (check the range, or raise --max-remeasure on a noisy machine)"
            )
        remeasures += 1
        measure([good_hash, bad_hash], "GOOD and BAD not clearly different: more samples")
        records = {c: series.read(c) for c in (good_hash, bad_hash)}
    say(
        "looking for the first commit that is "
        + ("slower" if direction > 0 else "faster")
        + " like BAD"
    )

    lo, hi = 0, len(line) - 1
    skipped: set[int] = set()
    probes: list[Probe] = []

    def skip(index: int, commit: str, title: str | None, count: int) -> None:
        skipped.add(index)
        probes.append(Probe(commit, title, "failed", None, 0, decided_by="failed"))
        say(
            f"[{count}] {commit[:8]} {title or ''}: no samples (the build or the benchmark "
            "failed, or it was skipped) -> failed; the candidate nearest the middle is next"
        )

    while (mid := next_probe(lo, hi, skipped)) is not None:
        commit = line[mid]
        title = subject(commit)
        count = len(probes) + 1
        record = series.read(commit)
        stored = len(samples_of(record))
        if stored < need:
            measure([commit], f"probe {count}")
            record = series.read(commit)
        else:
            say(f"  {commit[:8]}: {stored} stored samples, reused")
        if not samples_of(record):
            skip(mid, commit, title, count)
            continue
        tries = 0
        while True:
            g = samples_of(series.read(good_hash))
            b = samples_of(series.read(bad_hash))
            s = samples_of(record)
            decision = classify(g, s, b, direction, factor, alpha)
            verdict, decided_by = decision.verdict, "samples"
            if verdict != UNKNOWN:
                break
            if tries == max_remeasure:
                verdict, decided_by = closer(g, s, b), "closer-median"
                break
            say(
                f"[{count}] {commit[:8]}: unclear (GOOD->M {_step_text(decision.from_good)}; "
                f"M->BAD {_step_text(decision.to_bad)}): measuring again"
            )
            tries += 1
            remeasures += 1
            measure([commit], f"probe {count}, re-measure {tries}")
            record = series.read(commit)
            if not samples_of(record):
                break
        if not samples_of(record):
            skip(mid, commit, title, count)
            continue
        probes.append(
            Probe(
                commit,
                title,
                verdict,
                stats.median(s),
                len(s),
                decision.from_good,
                decision.to_bad,
                tries,
                decided_by,
            )
        )
        say(
            f"[{count}] {commit[:8]} {title or ''}: {human_value(stats.median(s), unit)} "
            f"(n={len(s)}); GOOD->M {_step_text(decision.from_good)}; "
            f"M->BAD {_step_text(decision.to_bad)} -> {verdict}"
            + (" (closer median: uncertain)" if decided_by != "samples" else "")
        )
        if verdict == BAD:
            hi = mid
        else:
            lo = mid

    before = samples_of(series.read(line[lo]))
    after = samples_of(series.read(line[hi]))
    effect = compare_step(before, after, direction, factor, alpha)
    result = BisectResult(
        benchmark=target.name,
        case=target.case,
        machine=machine,
        env_name=series.env_name or "",
        unit=unit,
        good=good_hash,
        bad=bad_hash,
        range_size=len(after_good),
        direction=direction,
        last_good=line[lo],
        first_bad=line[hi],
        subject=subject(line[hi]),
        before_median=stats.median(before),
        after_median=stats.median(after),
        p_value=effect.p_value,
        asv_runs=runs,
        remeasures=remeasures,
        probes=tuple(probes),
        skipped=tuple(line[i] for i in sorted(skipped) if lo < i < hi),
    )
    for note in dict.fromkeys(series.notes):
        say(f"note: {note}")
    return result


def _benchmarks(project: AsvProject) -> dict[str, dict[str, Any]]:
    history = History(project.results_dir)
    return history.benchmarks


def _step_text(step: Step) -> str:
    if step.ratio is None:
        return step.outcome
    p = f", p={step.p_value:.2g}" if step.p_value is not None else ""
    return f"{100 * (step.ratio - 1):+.1f}%{p}: {step.outcome}"
