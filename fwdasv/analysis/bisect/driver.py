"""The bisect driver: one `asv run` per probe on the first-parent line, each decided on samples.

`Bisector.open` checks the rule, the environment and the ends (the I/O of starting),
and `run` bisects in steps, each a method: `measure` (one asv run into bisect's own
results dir), `check_ends` (GOOD and BAD must differ), `place` (one probe, measured
again while the samples cannot place it), `recheck` (the decisions behind a final
pair that does not differ) and `finish` (the answer, a `BisectResult`). Where the
search stands is a pure `Search` value; the rules are pure too
(`fwdasv.analysis.bisect.rules`). How it decides: docs/verdicts.md ("bisect").
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fwdasv.analysis.bisect.environment import (
    BisectError,
    check_environment,
    commit_refusal,
    verify_measured,
)
from fwdasv.analysis.bisect.final_pair import recheck
from fwdasv.analysis.bisect.outcome import BisectResult, Probe
from fwdasv.analysis.bisect.rules import (
    DEFAULT_MAX_REMEASURE,
    Classification,
    Processes,
    StepTest,
    both_text,
    classify,
    closer,
    compare_step,
    expected_probes,
    step_text,
)
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import (
    BenchmarkCase,
    StoredSamples,
    remeasure_project,
    resolve_benchmark,
)
from fwdasv.analysis.judgment import DEFAULT_ALPHA, check_rule, pooled_spread, process_medians
from fwdasv.analysis.remeasure import ProcessLayout, process_layout
from fwdasv.analysis.status import Status
from fwdasv.asv.history import History
from fwdasv.asv.project import AsvError, AsvProject, run_commits
from fwdasv.asv.suite import ENV_CASES
from fwdasv.core import stats
from fwdasv.core.tables import human_value

B = TypeVar("B", bound="Bisector")


@dataclass
class Bisector:
    """One bisection of `bench` (and `case`) over `line` (GOOD, then each first-parent commit
    up to BAD) on `machine`; built by `Bisector.open`.

    `need`: the samples a stored result must have to be reused without running asv.
    `refusal`: why a commit is untestable (vLLM over a compiled base), None otherwise.
    `target`, `series` and `layout` are known once `resolve` has named the benchmark;
    `layout` None: not a fwdasv suite, judged on samples rather than process medians.
    Its own measurements go to `store`, a results dir of its own (`remeasure_project`).
    """

    project: AsvProject
    bench: str
    machine: str
    case: str | None
    factor: float
    alpha: float
    max_remeasure: int
    need: int
    python: str | None
    line: tuple[str, ...]
    store: AsvProject
    refusal: Callable[[str], str | None] | None
    echo: Callable[[str], None] | None = print
    asv_echo: Callable[[str], None] | None = None
    asv_python: str = sys.executable
    target: BenchmarkCase | None = None
    series: StoredSamples | None = None
    layout: ProcessLayout | None = None
    seen: set[str] = field(default_factory=set)  # commits whose samples were read
    runs: int = 0  # asv runs made
    remeasures: int = 0  # of those, runs made again for commits already measured

    @classmethod
    def open(
        cls: type[B],
        project: AsvProject,
        good: str,
        bad: str,
        bench: str,
        machine: str,
        case: str | None = None,
        factor: float | None = None,
        alpha: float = DEFAULT_ALPHA,
        max_remeasure: int = DEFAULT_MAX_REMEASURE,
        min_samples: int | None = None,
        python: str | None = None,
        echo: Callable[[str], None] | None = print,
        asv_echo: Callable[[str], None] | None = None,
        asv_python: str = sys.executable,
    ) -> B:
        """Check the rule, the environment and the ends, and set up bisect's results dir.

        `min_samples` (default: the fewest for which Mann-Whitney can reach `alpha`);
        `python` is passed to asv as `--python`; `factor` None: the project's probe
        floor (`VerdictSettings.probe_factor`)."""
        if factor is None:
            factor = project.verdict_settings().probe_factor
        check_rule(factor, alpha)
        if max_remeasure < 0:
            raise BisectError(f"--max-remeasure {max_remeasure}: must be >= 0")
        check_environment(project, python)
        need = min_samples or stats.min_samples_for_significance(alpha)
        try:
            good_hash = project.resolve(good)
            after_good = project.first_parent_range(good, bad)
        except AsvError as error:
            raise BisectError(str(error)) from None
        line = (good_hash, *after_good)
        store = remeasure_project(project)
        refusal = commit_refusal(project)
        for label, commit in (("GOOD", line[0]), ("BAD", line[-1])):
            why = refusal(commit) if refusal else None
            if why:
                raise BisectError(f"{label} is untestable: {why}")
        return cls(
            project,
            bench,
            machine,
            case,
            factor,
            alpha,
            max_remeasure,
            need,
            python,
            line,
            store,
            refusal,
            echo=echo,
            asv_echo=asv_echo,
            asv_python=asv_python,
        )

    @property
    def good_hash(self) -> str:
        return self.line[0]

    @property
    def bad_hash(self) -> str:
        return self.line[-1]

    @property
    def resolved(self) -> tuple[BenchmarkCase, StoredSamples]:
        """The benchmark case followed and its stored samples (after `resolve`)."""
        assert self.target is not None and self.series is not None, "resolve() first"
        return self.target, self.series

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
        _, series = self.resolved
        self.seen.add(commit)
        return series.samples(commit)

    def processes(self, robust: bool = False) -> Processes | None:
        """Process-level judging (a fwdasv suite): the spread between processes of one commit,
        pooled over every commit this bisection has read (`robust`: leaving out a well
        measured commit's odd processes, `judgment.pooled_spread`)."""
        if self.layout is None:
            return None
        _, series = self.resolved
        groups = [process_medians(series.samples(c), self.layout.samples) for c in self.seen]
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

    def classify(
        self, commit: str, direction: int, probe: Sequence[float] | None = None
    ) -> Classification:
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
        target, _ = self.resolved
        ends = (self.good_hash, self.bad_hash)
        missing = [c for c in ends if len(self.samples(c)) < self.need]
        if missing:
            self.measure(missing, "GOOD/BAD without enough stored samples")
        for label, commit in zip(("GOOD", "BAD"), ends, strict=True):
            if not self.samples(commit):
                raise BisectError(
                    f"{label} {commit[:8]}: no samples of {target.name} after measuring "
                    "(the benchmark fails or is skipped there; see asv's output with --show-asv)"
                )
        if self.layout is not None and any(self.one_run(self.samples(c)) for c in ends):
            # One run of an end is no more certain than one run of a probe: a run that read
            # fast at BAD (or slow at GOOD) would hide the step or turn its direction.
            self.remeasures += 1
            self.measure(list(ends), "GOOD/BAD from one run: a second run")
        for attempt in range(self.max_remeasure + 1):
            g, b = self.samples(self.good_hash), self.samples(self.bad_hash)
            direction = 1 if stats.median(b) >= stats.median(g) else -1
            # The ends only gate the search (the final pair names the commit): judged
            # with the robust spread, a process that ran fast does not hide the step.
            step = self.step(self.good_hash, self.bad_hash, direction, robust=True)
            self.say(
                f"GOOD {self.good_hash[:8]} {human_value(stats.median(g), target.unit)} "
                f"(n={len(g)}) -> BAD {self.bad_hash[:8]} "
                f"{human_value(stats.median(b), target.unit)} (n={len(b)}): {step_text(step)}"
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

    def placed_text(
        self, samples: Sequence[float], decision: Classification, verdict: Status
    ) -> str:
        """A placed commit's median, sample count, both comparisons and verdict."""
        target, _ = self.resolved
        return (
            f"{human_value(stats.median(samples), target.unit)} (n={len(samples)}); "
            f"{both_text(decision)} -> {verdict}"
        )

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
            self.measure_again(commit, count, tries, decision, unconfirmed)
        uncertain = {
            "closer-median": " (closer median: uncertain)",
            "unconfirmed": " (runs disagree: uncertain)",
        }
        self.say(
            f"[{count}] {commit[:8]} {title or ''}: {self.placed_text(s, decision, verdict)}"
            + uncertain.get(decided_by, "")
        )
        return Probe.placed(commit, title, verdict, s, decision, tries, decided_by)

    def measure_again(
        self, commit: str, count: int, tries: int, decision: Classification, unconfirmed: bool
    ) -> None:
        """One more run of a probe the samples do not place yet, with GOOD and BAD in the same
        run (one window of load)."""
        verdict = decision.verdict
        if verdict == Status.PART_WAY:
            # It differs from both ends: measure the ends again (the machine may
            # have moved since they were measured), and the probe with them.
            state = f"differs from both ends ({both_text(decision)})"
            then, why = "measuring GOOD, the probe and BAD again", f"probe {count}, ends again"
        else:
            if unconfirmed:
                state = f"{verdict} ({both_text(decision)}), not yet agreed by a second run"
            else:
                state = f"unclear ({both_text(decision)})"
            then = "measuring it again, with GOOD and BAD in the same run"
            why = f"probe {count}, re-measure {tries}"
        self.say(f"[{count}] {commit[:8]}: {state}: {then}")
        self.measure([self.good_hash, commit, self.bad_hash], why)

    def search(self, search: Search, direction: int) -> Search:
        """Probe inside the pair until no untried commit is left."""
        while (index := search.next_index) is not None:
            probe = self.place(self.line[index], len(search.probes) + 1, direction)
            search = search.placed(index, probe)
        return search

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
        return self.finish(self.search(Search(self.line), direction), direction)

    def finish(self, search: Search, direction: int) -> BisectResult:
        """The answer, if the final pair shows the step: a commit is named only when the last
        good and the first bad differ significantly (after re-checking the decisions that
        led there when they do not)."""
        search, effect = recheck(self, search, direction)
        lo, hi = search.pair
        before, after = self.samples(self.line[lo]), self.samples(self.line[hi])
        target, series = self.resolved
        for note in dict.fromkeys(series.notes):
            self.say(f"note: {note}")
        return BisectResult(
            benchmark=target.name,
            case=target.case,
            machine=self.machine,
            env_name=series.env_name or "",
            unit=target.unit,
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
            probes=search.probes,
            skipped=search.skipped_inside,
            reproducible=effect.outcome == Status.DIFFERENT,
            final_step=effect,
        )


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
    return Bisector.open(project, good, bad, benchmark, machine, case, **options).run()
