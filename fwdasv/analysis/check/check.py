"""`fwdasv check BASE HEAD`: would this pull request make the forward slower?

Every fwdasv suite of the project but the canary (it runs none of the code under test)
is measured at BASE and HEAD, each installed once, one bench process at a time, BASE
HEAD BASE HEAD ... (`confirm.processes.ProcessPool`), every case in each process. Each
case is judged by confirm's rule (`rules.confirm.judge_ab`). Its noise prior is the one
confirm would take: the series' stored noise on the machine as one process's median
(`stored_noise`), where the project has a history; without one (or with
`history=False`), the prior of nothing (1%, under one degree of freedom) leaves the
processes to decide. Processes are added while a case is undecided (`_judged`), up to
`max_processes` a side, unless its interval says no number of them within that could
decide; a slowdown (or a speed-up only its interval decided) stands only if it holds at
the next look too (`_held`). A paced suite is judged on its forward over the workload.
`rules.check.check_status` gives each case its word; each `worse` one is explained. vLLM
over a compiled base: a commit it cannot serve is refused.
Nothing is written to the stored results; they are read only for the noise priors.

Each process is kept as it is measured (CHECK_DIR, per pair and machine), and a check of
the same pair takes those first: a check cut short (a CI job's time limit; a vLLM
process takes most of a minute) goes on where it stopped. `fresh` sets them aside
(`processes.set_aside`) and measures anew.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fwdasv.analysis.confirm.processes import (
    Cursor,
    ProcessPool,
    SeriesRef,
    kept_dir,
    set_aside,
)
from fwdasv.analysis.explain.explain import explain_commits
from fwdasv.analysis.explain.kernel_diff import KernelDiff
from fwdasv.analysis.findings.series import CANARY_PREFIX, SeriesKey, load_series, metric_name
from fwdasv.analysis.remeasure import (
    load_suite_class,
    prior_said,
    process_layout,
    resolve_cases,
    stored_prior,
)
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.check import check_status, faster_by_interval, processes_to_decide
from fwdasv.analysis.rules.confirm import Confirmation
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus
from fwdasv.asv.project import AsvProject
from fwdasv.asv.suite import ForwardSuite
from fwdasv.asv.vllm_base import BaseError, compiled_guard
from fwdasv.core.clitools import bench_regexes
from fwdasv.core.errors import UserError

CHECK_DIR = ".fwdasv-check"  # beside asv.conf.json: each check's bench processes
HOLD_PROCESSES = confirm.STEP_PROCESSES  # a side, measured again before a slowdown stands


class CheckError(UserError):
    """The pair cannot be checked (a commit the compiled base cannot serve, no suite)."""


@dataclass(frozen=True)
class CaseCheck:
    """One case of HEAD against BASE: confirm's verdict and the check's word for it."""

    suite: str  # "forward.TinyLM"
    case: str
    relative: bool  # judged on the forward over the workload (a paced suite)
    verdict: Confirmation
    status: CompareStatus | ReMeasureStatus  # `rules.check.check_status`
    prior: Noise | None = None  # the series' stored noise it was judged with; None: none

    @property
    def series(self) -> str:
        return metric_name(self.relative)

    def to_json(self) -> dict[str, object]:
        return {
            "suite": self.suite,
            "case": self.case,
            "series": self.series,
            "status": str(self.status),
            "percent": self.verdict.percent,
            "lower_pct": self.verdict.lower_pct,
            "upper_pct": self.verdict.upper_pct,
            "processes_base": self.verdict.processes_a,
            "processes_head": self.verdict.processes_b,
            "history_commits": self.prior.commits_used if self.prior is not None else 0,
            "confirmation": self.verdict.to_json(),
        }


@dataclass(frozen=True)
class CheckOutcome:
    """What a check found: a word per case, the diff of each `worse` one, and its cost."""

    base: str
    head: str
    min_effect_pct: float
    cases: tuple[CaseCheck, ...]
    explained: tuple[tuple[CaseCheck, KernelDiff], ...] = ()
    bench_processes: int = 0
    installs: int = 0
    wall_s: float = 0.0
    explain_errors: tuple[str, ...] = field(default=())
    resumed: int = 0  # processes taken from an earlier check of the pair, not launched

    @property
    def slower(self) -> tuple[CaseCheck, ...]:
        return tuple(c for c in self.cases if COMPARISON.fails(c.status))

    @property
    def status(self) -> int:
        """The exit status: 1 on a slowdown beyond min_effect_pct, else 0."""
        return COMPARISON.exit_status(c.status for c in self.cases)


def project_suites(project: AsvProject) -> dict[str, tuple[str, ...]]:
    """The fwdasv suites of the project's benchmark_dir ("forward.TinyLM"), canary aside,
    each with its benchmarks' names as asv names them ("forward.TinyLM.track_latency")."""
    names: dict[str, tuple[str, ...]] = {}
    for path in sorted(project.benchmark_dir.glob("*.py")):
        if path.stem == "__init__":
            continue
        module_name = f"fwdasv_project_suites.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        for attribute, value in sorted(vars(module).items()):
            if (
                isinstance(value, type)
                and issubclass(value, ForwardSuite)
                and bool(getattr(value, "_parsed_cases", None))
                and not attribute.startswith(CANARY_PREFIX)
            ):
                suite = f"{path.stem}.{attribute}"
                names[suite] = tuple(
                    f"{suite}.{method}"
                    for method in sorted(dir(value))
                    if method.startswith(("track_", "time_"))
                )
    return names


def chosen_suites(
    suites: Mapping[str, Sequence[str]], patterns: Sequence[re.Pattern[str]]
) -> list[str]:
    """The suites a `--bench` regex matches (every one when there is none): by the suite's
    name or by one of its benchmarks' (asv's `--bench` matches those), so `Qwen3_0_6B$`
    and `^forward\\.Qwen3_0_6B\\.` both choose forward.Qwen3_0_6B."""
    return [
        suite
        for suite, benchmarks in suites.items()
        if not patterns or any(p.search(n) for p in patterns for n in (suite, *benchmarks))
    ]


def refuse_uncompiled(project: AsvProject, commits: Sequence[tuple[str, str]]) -> None:
    """On vLLM over a compiled base: CheckError, one line, for a commit it cannot serve."""
    try:
        guard = compiled_guard(project)
    except BaseError as error:
        raise CheckError(str(error)) from None
    if guard is None:
        return
    for label, commit in commits:
        reason = guard(commit)
        if reason is not None:
            raise CheckError(
                f"{label} {commit[:8]} cannot be checked over the compiled base: {reason}; "
                "point asv.conf.json's fwdasv.vllm_base at such a base to check it"
            )


def case_line(case: CaseCheck) -> str:
    """A case's progress line: its word, then the re-measure's summary ("worse: confirmed:
    HEAD +53.01% vs BASE ..."), the re-measure's word dropped where the two are one."""
    return _line(str(case.status), case.verdict)


# A pull request's sides, as its header names them (confirm's A and B elsewhere).
SIDES = ("BASE", "HEAD")


def _line(word: str, verdict: Confirmation) -> str:
    """`word: ` and the verdict's summary ("worse: confirmed: HEAD +1.25% vs BASE ..."). Where
    the summary's word is confirm's and would mislead in a pull request, which re-measures
    no finding, the numbers and why instead: a speed-up only its interval decided ("the
    whole interval below zero"), a step ruled out ("a +0.3% step ruled out", not
    "not-reproduced"), a real change under the min effect ("above zero, under the +0.3%
    min effect", not "confirmed")."""
    if faster_by_interval(verdict):
        why = "the whole interval below zero"
    elif verdict.status == ReMeasureStatus.NOT_REPRODUCED:
        why = f"a {verdict.tested_pct:+g}% step ruled out"
    elif verdict.status == ReMeasureStatus.CONFIRMED and word != CompareStatus.WORSE:
        why = f"above zero, under the {verdict.min_effect_pct:+g}% min effect"
    else:
        return f"{word}: {verdict.summary(*SIDES).removeprefix(f'{word}: ')}"
    return f"{word}: {verdict.measured(*SIDES)}; {why}"


def run_check(
    project: AsvProject,
    base: str,
    head: str,
    *,
    bench: Sequence[str] = (),
    cases: Sequence[str] = (),
    machine: str | None = None,
    max_processes: int = confirm.MAX_PROCESSES,
    run_explain: bool = True,
    fresh: bool = False,
    history: bool = True,
    echo: Callable[[str], None] | None = None,
    bench_echo: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """Measure and judge every case (see the module); `bench`: regexes one of which a
    suite's name or one of its benchmarks' must match (`chosen_suites`; all suites when
    empty); `cases`: only these cases of those suites (all when empty); `fresh`: set an
    earlier check's processes of the pair aside; `history`: each
    series' stored noise as the prior (`stored_noise`), else the prior of nothing."""
    started = time.perf_counter()
    patterns = bench_regexes(bench, CheckError)  # a typo is said before anything else
    base_hash, head_hash = project.resolve(base), project.resolve(head)
    if base_hash == head_hash:
        raise CheckError(f"BASE {base!r} and HEAD {head!r} are one commit, {base_hash[:8]}")
    refuse_uncompiled(project, (("BASE", base_hash), ("HEAD", head_hash)))
    found = project_suites(project)
    suites = chosen_suites(found, patterns)
    if not suites:
        raise CheckError(
            f"no fwdasv suite under {project.benchmark_dir}"
            + (
                f" matches --bench {' '.join(bench)} (its suites: "
                f"{', '.join(found) or 'none'}); pass a regex of one of those names"
                if bench
                else ""
            )
        )
    refs = _chosen_cases(_series(project, suites), cases)
    min_effect = project.verdict_settings().min_effect_pct
    workdir = kept_dir(project, CHECK_DIR, base_hash, head_hash)
    aside = set_aside(workdir) if fresh else None
    if aside is not None and echo is not None:
        echo(f"an earlier check's processes of this pair set aside in {aside}")
    pool = ProcessPool(
        project,
        tuple(refs),
        workdir,
        echo=echo,
        bench_echo=bench_echo,
        machine=machine,
        resume=True,
    )
    if pool.kept and echo is not None:
        echo(
            f"{pool.kept} process(es) of an earlier check of this pair, kept in {workdir}: "
            "taken first (--fresh measures anew)"
        )
    priors = stored_noise(project, refs, machine, echo) if history else {}
    checked: list[CaseCheck] = []
    for ref in refs:
        prior = priors.get(ref)
        noise = prior if prior is not None else estimate_noise(())
        if echo is not None:
            echo(
                f"{ref.suite}({ref.case}): BASE {base_hash[:8]} and HEAD {head_hash[:8]}, "
                f"interleaved; {prior_said(prior, machine, history)}"
            )

        def shown(n: int, a: float, b: float, ref: SeriesRef = ref) -> None:
            if echo is not None:
                echo(f"  process {n}: BASE {ref.shown(a)}, HEAD {ref.shown(b)}")

        cursor = Cursor(pool, base_hash, head_hash, ref, on_round=shown)
        verdict = _judged(cursor, noise, min_effect, max_processes, echo)
        verdict = _held(verdict, cursor, noise, min_effect, max_processes, echo)
        case = CaseCheck(
            ref.suite, ref.case, ref.relative, verdict, check_status(verdict, min_effect), prior
        )
        if echo is not None:
            echo(f"  {case_line(case)}")
        checked.append(case)
    explained, errors = (
        _explain(project, base_hash, head_hash, checked, echo, bench_echo)
        if run_explain
        else ((), ())
    )
    return CheckOutcome(
        base_hash,
        head_hash,
        min_effect,
        tuple(checked),
        explained,
        pool.bench_processes,
        pool.installs,
        time.perf_counter() - started,
        errors,
        pool.resumed,
    )


def stored_noise(
    project: AsvProject,
    refs: Sequence[SeriesRef],
    machine: str | None,
    echo: Callable[[str], None] | None = None,
) -> dict[SeriesRef, Noise]:
    """Each series' noise from its stored history on `machine`, as `fwdasv confirm` judges
    the series' findings with it: `estimate_noise` over the history with each commit's
    loaded processes left out (`quiet_history`, the findings' noise), as one process's
    median (`Noise.per_process`: a commit that pooled P processes varies sqrt(P) times
    less than one). Only for the series whose history says something beyond the prior of
    nothing; of several environments, the one with the most measured commits. None
    without a machine (other machines' GPUs are not this one's) or without results;
    stored results that cannot be read are said, and the check goes on without them."""
    if machine is None or not (project.results_dir / machine).is_dir():
        return {}  # no history on this machine: not a failure to read one
    try:
        _, series = load_series(project, machine)
    except UserError as error:
        if echo is not None:
            echo(f"stored results not read ({error}): judged without their noise")
        return {}
    wanted = set(refs)
    chosen: dict[SeriesRef, tuple[int, SeriesKey]] = {}
    for key, stored in series.items():
        ref = SeriesRef.of(key)
        if ref not in wanted or key.metric != metric_name(ref.relative):
            continue  # another case's, or a series check does not judge (load_series: one machine)
        measured = sum(1 for samples in stored.history if samples)
        if measured > chosen.get(ref, (0, key))[0]:
            chosen[ref] = (measured, key)
    # One import of each suite for its layout, not one a case.
    layouts = {b: process_layout(project, b) for b in {key.benchmark for _, key in chosen.values()}}
    found: dict[SeriesRef, Noise] = {}
    for ref, (_, key) in chosen.items():
        prior = stored_prior(series[key].history, layouts[key.benchmark])
        if prior is not None:  # None: too few commits to say more than the prior of nothing
            found[ref] = prior
    return found


def _judged(
    cursor: Cursor,
    noise: Noise,
    min_effect: float,
    max_processes: int,
    echo: Callable[[str], None] | None = None,
) -> Confirmation:
    """confirm's looks (MIN_PROCESSES a side, STEP_PROCESSES more while undecided, up to
    `max_processes`), stopped early when the run's own spread needs more processes than
    `max_processes` (`rules.check.processes_to_decide`): a busy box's no-op pull request
    costs one look, not twelve; a quiet GPU's takes the looks that decide it."""
    a, b = (list(side) for side in cursor.measure(min(confirm.MIN_PROCESSES, max_processes)))
    while True:
        verdict = confirm.judge_ab(a, b, noise, min_effect_pct=min_effect)
        left = max_processes - min(len(a), len(b))
        if (
            check_status(verdict, min_effect) != ReMeasureStatus.UNDECIDED
            or left < 1
            or processes_to_decide(verdict, max_processes) > max_processes
        ):
            return verdict
        more = min(confirm.STEP_PROCESSES, left)
        if echo is not None:  # the next look is minutes away on vLLM: say why it is taken
            echo(f"  {verdict.summary(*SIDES)}; {more} more a side")
        more_a, more_b = cursor.measure(more)
        a.extend(more_a)
        b.extend(more_b)


def _held(
    verdict: Confirmation,
    cursor: Cursor,
    noise: Noise,
    min_effect: float,
    max_processes: int,
    echo: Callable[[str], None] | None,
) -> Confirmation:
    """A slowdown that holds at the next look too: HOLD_PROCESSES more a side, judged with
    all the processes. On a shared box a neighbour's burst can slow one side's few
    processes (seen: +15.7% on a README-only pair at 3 a side); it rarely does so twice.
    A speed-up that only its interval decided (`faster_by_interval`: a burst on BASE's
    processes reads as one) holds the same way; one `judge_ab` ruled a step out does not
    (it costs a quiet GPU's speed-up nothing more; docs/measurements.md, section 41)."""
    more = min(HOLD_PROCESSES, max_processes - cursor.taken)
    by_interval = faster_by_interval(verdict)  # its word is `improved`
    if (check_status(verdict, min_effect) != CompareStatus.WORSE and not by_interval) or more < 1:
        return verdict
    if echo is not None:
        said = _line("improved", verdict) if by_interval else verdict.summary(*SIDES)
        what = "a speed-up" if by_interval else "a slowdown"
        echo(f"  {said}; {more} more a side: {what} must hold")
    cursor.measure(more)
    pool, taken = cursor.pool, cursor.taken
    return confirm.judge_ab(
        pool.values(cursor.a, cursor.ref)[:taken],
        pool.values(cursor.b, cursor.ref)[:taken],
        noise,
        min_effect_pct=min_effect,
    )


def _series(project: AsvProject, suites: Sequence[str]) -> list[SeriesRef]:
    """Each suite's judged series, every case: the forward over the workload where paced."""
    refs: list[SeriesRef] = []
    for suite in suites:
        _, suite_class = load_suite_class(project, suite)
        target = resolve_cases(project, suite, [c.name for c in suite_class._parsed_cases])
        refs += [SeriesRef(target.suite, case, target.paced) for case in target.cases]
    return refs


def _chosen_cases(refs: Sequence[SeriesRef], cases: Sequence[str]) -> list[SeriesRef]:
    """The series of `cases` (every one when none is named); CheckError, one line, for a
    case none of the chosen suites has."""
    if not cases:
        return list(refs)
    known = list(dict.fromkeys(ref.case for ref in refs))
    unknown = [case for case in dict.fromkeys(cases) if case not in known]
    if unknown:
        suites = ", ".join(dict.fromkeys(ref.suite for ref in refs))
        raise CheckError(
            f"--case {', '.join(unknown)}: no such case in {suites} (its cases: "
            f"{', '.join(known)}); pass one of those, or --bench a suite that has it"
        )
    return [ref for ref in refs if ref.case in cases]


def _explain(
    project: AsvProject,
    base: str,
    head: str,
    checked: Sequence[CaseCheck],
    echo: Callable[[str], None] | None,
    bench_echo: Callable[[str], None] | None,
) -> tuple[tuple[tuple[CaseCheck, KernelDiff], ...], tuple[str, ...]]:
    """The op (kernel) diff of each `worse` case; a failure is said, never the verdict's end."""
    done: list[tuple[CaseCheck, KernelDiff]] = []
    errors: list[str] = []
    for case in (c for c in checked if COMPARISON.fails(c.status)):
        try:
            explained = explain_commits(
                project, base, head, case.suite, case.case, echo=echo, bench_echo=bench_echo
            )
        except Exception as error:  # explaining must not lose the verdict
            why = f"{type(error).__name__}: {error}"
            errors.append(f"{case.suite}({case.case}): explain failed: {why}")
            continue
        done.append((case, explained.diff))
    return tuple(done), tuple(errors)
