"""The bisect driver: one `asv run` per probe on the first-parent line, each decided on samples.

`Bisector` holds one bisection's state (the line of commits, the series it
follows, the runs made) and does it in steps, each a method: `measure` (one
asv run), `check_ends` (GOOD and BAD must differ), `place` (one probe, measured
again while the samples cannot place it) and `finish` (the answer). The rules
themselves are pure (`fwdasv.analysis.bisect.rules`).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwdasv.analysis.bisect.environment import (
    PER_COMMIT_ENVS,
    BisectError,
    check_environment,
    check_per_commit,
    verify_measured,
)
from fwdasv.analysis.bisect.outcome import BisectResult, Probe
from fwdasv.analysis.bisect.rules import (
    DEFAULT_MAX_REMEASURE,
    Classification,
    Processes,
    StepTest,
    bounds,
    classify,
    closer,
    compare_step,
    expected_probes,
    next_probe,
    recheck_order,
    step_text,
)
from fwdasv.analysis.findings import CANARY_PREFIX
from fwdasv.analysis.judgment import DEFAULT_ALPHA, check_rule, pooled_spread, process_medians
from fwdasv.analysis.remeasure import ProcessLayout, process_layout
from fwdasv.analysis.status import Status
from fwdasv.asv.history import (
    BenchmarkInfo,
    CommitFilter,
    History,
    HistoryError,
    Record,
    param_label,
    remeasure_results_dir,
)
from fwdasv.asv.project import AsvError, AsvProject, run_commits
from fwdasv.asv.suite import ENV_CASES
from fwdasv.core import stats
from fwdasv.core.tables import human_value


@dataclass
class BenchmarkCase:
    """The benchmark (and case) a bisection follows."""

    name: str
    case: str | None
    unit: str | None
    pattern: str  # for asv run --bench: this benchmark (and case) only


def _is_canary(name: str) -> bool:
    """A benchmark of the environment canary's suite (`module.CanaryX.track_latency`)."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[-2].startswith(CANARY_PREFIX)


def resolve_benchmark(
    benchmarks: Mapping[str, BenchmarkInfo], bench: str, case: str | None
) -> BenchmarkCase:
    """asv find's rule: an exact name, else a regex that matches exactly one benchmark.

    The environment canary (a `Canary*` suite, beside the project's own in every
    `fwdasv init` project) is set aside when the regex also matches a benchmark of the
    project's: `track_latency` names the model's latency, not the canary's. Only an
    exact name or a regex that matches the canary alone bisects the canary.
    """
    if bench in benchmarks:
        names = [bench]
    else:
        try:
            pattern = re.compile(bench)
        except re.error as error:
            raise BisectError(f"BENCH {bench!r}: bad regular expression: {error}") from None
        names = sorted(n for n in benchmarks if pattern.search(n))
        names = [n for n in names if not _is_canary(n)] or names
    if len(names) != 1:
        found = ", ".join(names[:10]) if names else "none"
        raise BisectError(f"BENCH {bench!r} must name exactly one benchmark (matches: {found})")
    name = names[0]
    info = benchmarks[name]
    params = info.params
    combos = [", ".join(c) for c in _product(params)]
    labels = [", ".join(param_label(v) for v in c) for c in _product(params)]
    if not params:
        if case is not None:
            raise BisectError(f"{name} has no parameters: drop --case")
        return BenchmarkCase(name, None, info.unit, f"^{re.escape(name)}$")
    if case is None:
        if len(labels) != 1:
            raise BisectError(
                f"{name} has {len(labels)} cases ({', '.join(labels)}): pick one with --case"
            )
        case = labels[0]
    if case not in labels:
        raise BisectError(f"{name} has no case {case!r} (cases: {', '.join(labels)})")
    combo = combos[labels.index(case)]
    pattern = f"^{re.escape(name)}\\({re.escape(combo)}\\)$"
    return BenchmarkCase(name, case, info.unit, pattern)


def _product(params: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    return list(itertools.product(*params)) if params else [()]


@dataclass
class StoredSamples:
    """Samples of one benchmark case per commit: the history's (the results dir) followed by
    bisect's own re-measures (`remeasures`, a results dir of their own)."""

    project: AsvProject
    machine: str
    benchmark: BenchmarkCase
    env_name: str | None = None
    notes: list[str] = field(default_factory=list)
    remeasures: AsvProject | None = None

    def samples(self, commit: str) -> list[float]:
        """The history's samples of `commit`, then bisect's re-measures of it."""
        out = samples_of(self.read(commit))
        if self.remeasures is not None and (self.remeasures.results_dir / self.machine).is_dir():
            out += samples_of(self.read(commit, self.remeasures))
        return out

    def read(self, commit: str, where: AsvProject | None = None) -> Record | None:
        """The record of this commit (the chosen env), or None when there is none."""
        project = where or self.project
        if not (project.results_dir / self.machine).is_dir():
            return None
        history = History(
            project.results_dir,
            machines=[self.machine],
            bench=[f"^{re.escape(self.benchmark.name)}$"],
            commits=CommitFilter(frozenset([commit])),
            samples=True,
        )
        records = [
            r
            for r in history.records()
            if self.benchmark.case is None or r.case == self.benchmark.case
        ]
        per_commit = [r for r in records if (r.env_name or "").split("-", 1)[0] in PER_COMMIT_ENVS]
        if len(per_commit) < len(records):
            self.notes.append(f"{commit[:8]}: ignored stored results from an existing environment")
        if self.env_name is not None:
            per_commit = [r for r in per_commit if r.env_name == self.env_name]
        envs = sorted({r.env_name or "" for r in per_commit})
        if len(envs) > 1:
            raise BisectError(
                f"{commit[:8]} has results in several environments ({', '.join(envs)}); "
                "bisect follows one: limit the configuration to one python/matrix entry"
            )
        if not per_commit:
            return None
        record = per_commit[0]
        check_per_commit(record.commit_hash, record.env_name, commit)
        if self.env_name is None:
            self.env_name = record.env_name
        return record


def samples_of(record: Record | None) -> list[float]:
    if record is None or record.status != "ok":
        return []
    return record.sample_values()


@dataclass
class Bisector:
    """One bisection of `bench` (and `case`) over GOOD..BAD on `machine`.

    `min_samples` (default: the fewest for which Mann-Whitney can reach
    `alpha`) is what a stored result must have to be reused without running
    asv. `python` is passed to asv as `--python`. `factor` None: the project's
    probe floor (`VerdictSettings.probe_factor`, 1.05 by default).

    Its own measurements go to a results dir of their own
    (`fwdasv.asv.history.remeasure_results_dir`), never into the history's:
    a re-measure from a quieter (or busier) window appended to the stored
    results would move their medians and make (or hide) a finding.
    """

    project: AsvProject
    good: str
    bad: str
    bench: str
    machine: str
    case: str | None = None
    factor: float | None = None
    alpha: float = DEFAULT_ALPHA
    max_remeasure: int = DEFAULT_MAX_REMEASURE
    min_samples: int | None = None
    python: str | None = None
    echo: Callable[[str], None] | None = print
    asv_echo: Callable[[str], None] | None = None
    asv_python: str = sys.executable
    runs: int = field(default=0, init=False)
    remeasures: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.factor is None:
            self.factor = self.project.verdict_settings().probe_factor
        check_rule(self.factor, self.alpha)
        if self.max_remeasure < 0:
            raise BisectError(f"--max-remeasure {self.max_remeasure}: must be >= 0")
        check_environment(self.project, self.python)
        self.need = self.min_samples or stats.min_samples_for_significance(self.alpha)
        try:
            good_hash = self.project.resolve(self.good)
            after_good = self.project.first_parent_range(self.good, self.bad)
        except AsvError as error:
            raise BisectError(str(error)) from None
        self.line = [good_hash, *after_good]
        self.target: BenchmarkCase | None = None
        self.series: StoredSamples | None = None
        self.layout: ProcessLayout | None = None
        self.store = remeasure_project(self.project)
        self.seen: set[str] = set()
        # vLLM over a compiled base: commits it cannot serve are untestable, skipped unmeasured.
        from fwdasv.asv.vllm_base import BaseError, project_guard

        try:
            self.refusal = project_guard(
                self.project.config_path, self.project.raw.get("fwdasv"), self.project.repo
            )
        except BaseError as error:
            raise BisectError(str(error)) from None
        for label, commit in (("GOOD", self.good_hash), ("BAD", self.bad_hash)):
            why = self.refusal(commit) if self.refusal else None
            if why:
                raise BisectError(f"{label} is untestable: {why}")

    @property
    def good_hash(self) -> str:
        return self.line[0]

    @property
    def bad_hash(self) -> str:
        return self.line[-1]

    def say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def subject(self, commit: str) -> str | None:
        try:
            return self.project.subject(commit)
        except AsvError:
            return None

    def measure(self, commits: Sequence[str], why: str) -> None:
        """One `asv run` of exactly this benchmark at `commits`, samples appended to bisect's
        own results dir."""
        self.runs += 1
        self.say(f"  asv run {self.runs}: {', '.join(c[:8] for c in commits)} ({why})")
        started = time.time() - 1  # file times may be coarser than the clock
        run_commits(
            self.store,
            list(commits),
            self.machine,
            bench=[self.target.pattern if self.target else self.bench],
            append_samples=True,
            skip_existing=False,
            extra=["--python", self.python] if self.python else [],
            echo=self.asv_echo,
            python=self.asv_python,
            # The suite's bench times this case only (its other cases are not asked for).
            env={ENV_CASES: self.target.case} if self.target and self.target.case else None,
        )
        for commit in verify_measured(self.store, self.machine, commits, started):
            self.say(f"  {commit[:8]}: asv saved no result (the build or install failed?)")

    def samples(self, commit: str) -> list[float]:
        assert self.series is not None
        self.seen.add(commit)
        return self.series.samples(commit)

    def processes(self, robust: bool = False) -> Processes | None:
        """Process-level judging (a fwdasv suite): the spread between processes of one commit,
        pooled over every commit this bisection has read (`robust`: leaving out a well
        measured commit's odd processes, `judgment.pooled_spread`)."""
        if self.layout is None:
            return None
        groups = [process_medians(self.series.samples(c), self.layout.samples) for c in self.seen]
        return Processes(
            self.layout.samples, pooled_spread([g for g in groups if g], robust=robust)
        )

    def step(self, x: str, y: str, direction: int, robust: bool = False) -> StepTest:
        return compare_step(
            self.samples(x),
            self.samples(y),
            direction,
            self.factor,
            self.alpha,
            self.processes(robust),
        )

    def classify(self, commit: str, direction: int, probe: Sequence[float] | None = None):
        g, b = self.samples(self.good_hash), self.samples(self.bad_hash)
        s = self.samples(commit) if probe is None else probe
        return classify(g, s, b, direction, self.factor, self.alpha, self.processes())

    def resolve(self) -> BenchmarkCase:
        """Which benchmark: benchmarks.json names it; before any run there is none, so
        the ends are measured with BENCH as given, then it is resolved."""
        known = [
            p.results_dir
            for p in (self.project, self.store)
            if (p.results_dir / "benchmarks.json").is_file()
        ]
        if not known:
            self.measure([self.good_hash, self.bad_hash], "no results yet; GOOD and BAD first")
            known = [self.store.results_dir]
        self.target = resolve_benchmark(History(known[0]).benchmarks, self.bench, self.case)
        self.series = StoredSamples(self.project, self.machine, self.target, remeasures=self.store)
        self.layout = process_layout(self.project, self.target.name)
        return self.target

    def check_ends(self) -> int:
        """GOOD and BAD must differ (measured, or re-measured, until they do); the direction."""
        ends = (self.good_hash, self.bad_hash)
        missing = [c for c in ends if len(self.samples(c)) < self.need]
        if missing:
            self.measure(missing, "GOOD/BAD without enough stored samples")
        for label, commit in zip(("GOOD", "BAD"), ends, strict=True):
            if not self.samples(commit):
                raise BisectError(
                    f"{label} {commit[:8]}: no samples of {self.target.name} after measuring "
                    "(the benchmark fails or is skipped there; see asv's output with --show-asv)"
                )
        if self.layout is not None and any(self.one_run(self.samples(c)) for c in ends):
            # One run of an end is no more certain than one run of a probe: a run that read
            # fast at BAD (or slow at GOOD) would hide the step or turn its direction.
            self.remeasures += 1
            self.measure(list(ends), "GOOD/BAD from one run: a second run")
        unit = self.target.unit
        for attempt in range(self.max_remeasure + 1):
            g, b = self.samples(self.good_hash), self.samples(self.bad_hash)
            direction = 1 if stats.median(b) >= stats.median(g) else -1
            # The ends only gate the search (the final pair names the commit): judged
            # with the robust spread, a process that ran fast does not hide the step.
            step = self.step(self.good_hash, self.bad_hash, direction, robust=True)
            self.say(
                f"GOOD {self.good_hash[:8]} {human_value(stats.median(g), unit)} (n={len(g)}) -> "
                f"BAD {self.bad_hash[:8]} {human_value(stats.median(b), unit)} (n={len(b)}): "
                f"{step_text(step)}"
            )
            if step.outcome == Status.DIFFERENT:
                return direction
            if attempt == self.max_remeasure:
                raise BisectError(
                    f"GOOD {self.good_hash[:8]} and BAD {self.bad_hash[:8]} do not differ beyond "
                    f"factor {self.factor} at alpha {self.alpha} ({step_text(step)}) after "
                    f"{attempt} re-measures: nothing to bisect (check the range, or raise "
                    "--max-remeasure on a noisy machine)"
                )
            self.remeasures += 1
            self.measure(list(ends), "GOOD and BAD not clearly different: more samples")
        raise AssertionError("unreachable")

    def one_run(self, samples: Sequence[float]) -> bool:
        """Whether a probe's samples come from one asv run (its launches) or fewer."""
        assert self.layout is not None
        return len(samples) <= self.layout.samples * self.layout.launches

    def last_run_agrees(
        self, commit: str, samples: Sequence[float], verdict: Status, direction: int
    ) -> bool:
        """The newest run's processes alone, against the ends, give `verdict` too."""
        assert self.layout is not None
        last = list(samples[-self.layout.samples * self.layout.launches :])
        return self.classify(commit, direction, last).verdict == verdict

    def place(self, commit: str, count: int, direction: int) -> Probe:
        """Measure one probe until the samples place it (or re-measures run out); verdict
        `failed` when it cannot be measured (a failed build or benchmark).

        Judged by process-level variation (a fwdasv suite), a probe decided from one
        run is uncertain until a re-measure agrees: it is measured again until the
        newest run alone and all its runs together give the same verdict."""
        title = self.subject(commit)
        why = self.refusal(commit) if self.refusal else None
        if why:
            self.say(
                f"[{count}] {commit[:8]} {title or ''}: untestable ({why}); skipped unmeasured, "
                "as `git bisect skip` does: the candidate nearest the middle is next"
            )
            return Probe(commit, title, Status.FAILED, None, 0, decided_by="untestable")
        stored = len(self.samples(commit))
        if stored < self.need:
            self.measure([commit], f"probe {count}")
        else:
            self.say(f"  {commit[:8]}: {stored} stored samples, reused")
        tries = 0
        while True:
            s = self.samples(commit)
            if not s:
                self.say(
                    f"[{count}] {commit[:8]} {title or ''}: no samples (the build or the "
                    "benchmark failed, or it was skipped) -> failed; the candidate nearest "
                    "the middle is next"
                )
                return Probe(commit, title, Status.FAILED, None, 0, decided_by="failed")
            g, b = self.samples(self.good_hash), self.samples(self.bad_hash)
            decision = self.classify(commit, direction)
            verdict, decided_by = decision.verdict, "samples"
            undecided = verdict in (Status.UNKNOWN, Status.PART_WAY)
            unconfirmed = (
                not undecided
                and self.layout is not None
                and (self.one_run(s) or not self.last_run_agrees(commit, s, verdict, direction))
            )
            if tries == self.max_remeasure:
                if undecided:
                    verdict, decided_by = closer(g, s, b), "closer-median"
                elif unconfirmed:
                    decided_by = "unconfirmed"
                break
            if not undecided and not unconfirmed:
                break
            tries += 1
            self.remeasures += 1
            if verdict == Status.PART_WAY:
                # It differs from both ends: measure the ends again (the machine may
                # have moved since they were measured), and the probe with them.
                self.say(
                    f"[{count}] {commit[:8]}: differs from both ends ({_both(decision)}): "
                    "measuring GOOD, the probe and BAD again"
                )
                self.measure([self.good_hash, commit, self.bad_hash], f"probe {count}, ends again")
            elif unconfirmed:
                self.say(
                    f"[{count}] {commit[:8]}: {verdict} ({_both(decision)}), not yet agreed "
                    "by a second run: measuring it again, with GOOD and BAD in the same run"
                )
                self.measure(
                    [self.good_hash, commit, self.bad_hash], f"probe {count}, re-measure {tries}"
                )
            else:
                self.say(
                    f"[{count}] {commit[:8]}: unclear ({_both(decision)}): measuring it again, "
                    "with GOOD and BAD in the same run"
                )
                self.measure(
                    [self.good_hash, commit, self.bad_hash], f"probe {count}, re-measure {tries}"
                )
        uncertain = {
            "closer-median": " (closer median: uncertain)",
            "unconfirmed": " (runs disagree: uncertain)",
        }
        self.say(
            f"[{count}] {commit[:8]} {title or ''}: {human_value(stats.median(s), self.target.unit)} "
            f"(n={len(s)}); {_both(decision)} -> {verdict}" + uncertain.get(decided_by, "")
        )
        return Probe(
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

    def search(
        self,
        lo: int,
        hi: int,
        direction: int,
        probes: list[Probe],
        decisions: dict[int, Status],
        skipped: set[int],
    ) -> tuple[int, int]:
        """Probe between lo and hi until no untried commit is left; the final pair."""
        while (mid := next_probe(lo, hi, skipped | set(decisions))) is not None:
            probe = self.place(self.line[mid], len(probes) + 1, direction)
            probes.append(probe)
            if probe.verdict == Status.FAILED:
                skipped.add(mid)
            else:
                decisions[mid] = probe.verdict
            lo, hi = bounds(decisions, len(self.line) - 1)
        return lo, hi

    def run(self) -> BisectResult:
        target = self.resolve()
        after_good = len(self.line) - 1
        self.say(
            f"bisect {target.name}{f'({target.case})' if target.case else ''} on {self.machine}: "
            f"{after_good} commits after GOOD {self.good_hash[:8]} up to BAD {self.bad_hash[:8]} "
            f"(about {expected_probes(after_good)} probes; factor {self.factor}, alpha {self.alpha}"
            + (
                f"; judged on process medians, {self.layout.samples} samples a process"
                if self.layout
                else ""
            )
            + ")"
        )
        direction = self.check_ends()
        self.say(
            "looking for the first commit that is "
            + ("slower" if direction > 0 else "faster")
            + " like BAD"
        )
        probes: list[Probe] = []
        decisions: dict[int, Status] = {}
        skipped: set[int] = set()
        lo, hi = self.search(0, len(self.line) - 1, direction, probes, decisions, skipped)
        return self.finish(lo, hi, direction, probes, decisions, skipped)

    def recheck(
        self,
        lo: int,
        hi: int,
        direction: int,
        probes: list[Probe],
        decisions: dict[int, Status],
        skipped: set[int],
    ) -> tuple[int, int, StepTest]:
        """While the final pair does not differ: re-check the decisions that led there,
        nearest the pair first, each once (one more run, then placed on all its samples);
        a decision that changes reopens the search. Returns the final pair and its step."""
        effect = self.pair_step(lo, hi, direction)
        done: set[int] = set()
        while effect.outcome != Status.DIFFERENT and self.max_remeasure > 0:
            todo = [i for i in recheck_order(list(decisions), lo, hi) if i not in done]
            if not todo:
                break
            index = todo[0]
            done.add(index)
            commit = self.line[index]
            self.say(
                f"final pair {self.line[lo][:8]} -> {self.line[hi][:8]}: {step_text(effect)}; "
                f"re-checking the decisions that led there, nearest first: {commit[:8]} "
                f"(was {decisions[index]})"
            )
            self.remeasures += 1
            self.measure([commit], f"re-check of {commit[:8]}")
            decision = self.classify(commit, direction)
            verdict = decision.verdict
            if verdict in (Status.UNKNOWN, Status.PART_WAY):
                verdict = decisions[index]  # no clearer than before: the decision stands
            s = self.samples(commit)
            self.say(
                f"  {commit[:8]}: {human_value(stats.median(s), self.target.unit)} (n={len(s)}); "
                f"{_both(decision)} -> {verdict}"
            )
            position = next(k for k, p in enumerate(probes) if p.commit == commit)
            old = probes[position]
            probes[position] = Probe(
                commit,
                old.subject,
                verdict,
                stats.median(s),
                len(s),
                decision.from_good,
                decision.to_bad,
                old.remeasures + 1,
                old.decided_by if verdict == old.verdict else "re-check",
            )
            if verdict != decisions[index]:
                decisions[index] = verdict
                lo, hi = bounds(decisions, len(self.line) - 1)
                lo, hi = self.search(lo, hi, direction, probes, decisions, skipped)
            else:
                lo, hi = bounds(decisions, len(self.line) - 1)
            effect = self.pair_step(lo, hi, direction)
        return lo, hi, effect

    def pair_step(self, lo: int, hi: int, direction: int) -> StepTest:
        """The final pair's step. Judged by processes, the pair is also measured once more
        in one run (both commits in the same window of load, as confirm's A/B): it differs
        only when all its samples say so and that run alone moves beyond the factor too."""
        effect = self.step(self.line[lo], self.line[hi], direction)
        if effect.outcome != Status.DIFFERENT or self.layout is None or self.max_remeasure == 0:
            return effect
        pair = [self.line[lo], self.line[hi]]
        self.say(
            f"final pair {pair[0][:8]} -> {pair[1][:8]}: {step_text(effect)}; measuring both "
            "in one run to confirm"
        )
        self.remeasures += 1
        self.measure(pair, "the final pair, in one run")
        effect = self.step(pair[0], pair[1], direction)
        size = self.layout.samples * self.layout.launches
        alone = compare_step(
            self.samples(pair[0])[-size:],
            self.samples(pair[1])[-size:],
            direction,
            self.factor,
            self.alpha,
            self.processes(),
        )
        if effect.outcome == Status.DIFFERENT and alone.outcome == Status.SAME:
            self.say(f"  in one run: {step_text(alone)}: the pair does not differ there")
            return StepTest(Status.UNKNOWN, effect.ratio, effect.p_value)
        return effect

    def finish(
        self,
        lo: int,
        hi: int,
        direction: int,
        probes: list[Probe],
        decisions: dict[int, Status],
        skipped: set[int],
    ) -> BisectResult:
        """The answer, if the final pair shows the step: a commit is named only when the last
        good and the first bad differ significantly (after re-checking the decisions that
        led there when they do not)."""
        lo, hi, effect = self.recheck(lo, hi, direction, probes, decisions, skipped)
        before, after = self.samples(self.line[lo]), self.samples(self.line[hi])
        assert self.target is not None and self.series is not None
        for note in dict.fromkeys(self.series.notes):
            self.say(f"note: {note}")
        return BisectResult(
            benchmark=self.target.name,
            case=self.target.case,
            machine=self.machine,
            env_name=self.series.env_name or "",
            unit=self.target.unit,
            good=self.good_hash,
            bad=self.bad_hash,
            range_size=len(self.line) - 1,
            direction=direction,
            last_good=self.line[lo],
            first_bad=self.line[hi],
            subject=self.subject(self.line[hi]),
            before_median=stats.median(before),
            after_median=stats.median(after),
            p_value=effect.p_value,
            asv_runs=self.runs,
            remeasures=self.remeasures,
            probes=tuple(probes),
            skipped=tuple(self.line[i] for i in sorted(skipped) if lo < i < hi),
            reproducible=effect.outcome == Status.DIFFERENT,
            final_step=effect,
        )


def remeasure_project(project: AsvProject) -> AsvProject:
    """The asv project bisect measures into: the same configuration, environments and
    benchmarks, with a results dir of its own (`remeasure_results_dir`)."""
    root = remeasure_results_dir(project.results_dir)
    config = dict(project.raw)
    config.update(
        repo=project.repo,
        results_dir=str(root / "results"),
        html_dir=str(root / "html"),
        env_dir=str(project.env_dir),
        benchmark_dir=str(project.benchmark_dir),
    )
    root.mkdir(parents=True, exist_ok=True)
    path = root / "asv.conf.json"
    text = json.dumps(config, indent=2) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    try:
        return AsvProject.load(path)
    except (AsvError, HistoryError) as error:
        raise BisectError(f"bisect's results dir {root}: {error}") from None


def _both(decision: Classification) -> str:
    return f"GOOD->M {step_text(decision.from_good)}; M->BAD {step_text(decision.to_bad)}"


def bisect(
    project: AsvProject,
    good: str,
    bad: str,
    benchmark: str,
    machine: str,
    case: str | None = None,
    **options: Any,
) -> BisectResult:
    """Find the first commit on the first-parent line GOOD..BAD where `benchmark` changed.

    Each measurement is one `asv run` of exactly that benchmark (and case) at
    one commit, with samples recorded or appended (see `Bisector`).
    """
    return Bisector(project, good, bad, benchmark, machine, case, **options).run()
