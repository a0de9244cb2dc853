"""Measure suite cases at chosen commits, outside `asv run`: for confirm, bisect and explain.

Each commit is installed by asv into an environment of its own
(`fwdasv.asv.install.env_dir_for`: the commits of an interleaved re-measure are
installed once each, and what confirm installed, bisect and explain find installed),
then one bench process of exactly the suite's configuration runs, narrowed to the
cases asked for (`resolve_cases`: every case of a suite that stepped, in one
process, as a vLLM bench process measures its whole suite anyway; `resolve`: one),
started the way the suite starts it (`fwdasv.backends`), with that environment's
interpreter. What comes back is that process's result: each case's median of its
per-sample medians and, for a paced suite, of its forward-over-workload ratios
(`process_values`), or, with a profile directory, kernel summaries (explain).
`process_layout` says how a suite's asv run stores a case's samples.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwdasv.analysis.rules.commit_processes import quiet_history
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.asv.install import InstalledCommit, env_dir_for, install_commit
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.asv.suite import ForwardSuite
from fwdasv.backends import RunConfig, RunOutcome, launch_bench, require_available
from fwdasv.core import results
from fwdasv.core.errors import UserError
from fwdasv.core.stats import median
from fwdasv.launch import LaunchError


class RemeasureError(UserError):
    """The benchmark or case cannot be found, or the commit cannot be measured."""


@dataclass(frozen=True)
class SuiteCase:
    """Cases of one suite of the project's benchmark_dir, and its bench configuration
    narrowed to them (one bench process measures them all)."""

    suite: str  # "forward.TinyLM"
    cases: tuple[str, ...]
    suite_class: type[ForwardSuite]
    config: RunConfig  # the suite's configuration, these cases only

    @property
    def case(self) -> str:
        """The first case (the one case of a `resolve`d target)."""
        return self.cases[0]

    @property
    def tolerance(self) -> float:
        return float(getattr(self.suite_class, "tolerance", results.DEFAULT_RELATIVE_RMS_TOLERANCE))

    @property
    def paced(self) -> bool:
        """Whether each process also times fwdasv's workload (a `track_relative` series)."""
        return bool(getattr(self.suite_class, "reference", False))


def load_suite_class(project: AsvProject, name: str) -> tuple[str, type[ForwardSuite]]:
    """The suite class a benchmark name (`forward.TinyLM.track_latency` or `forward.TinyLM`)
    belongs to, imported from the project's benchmark_dir."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = project.benchmark_dir.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            module_name = "fwdasv_project_suites." + ".".join(parts[:cut])
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            suite_class = getattr(module, parts[cut], None)
            if not (isinstance(suite_class, type) and issubclass(suite_class, ForwardSuite)):
                raise RemeasureError(
                    f"{name}: {path} has no fwdasv suite class {parts[cut]!r} "
                    "(a subclass of asvsuite.TorchSuite or VllmSuite)"
                )
            return ".".join(parts[: cut + 1]), suite_class
    raise RemeasureError(
        f"{name}: no module of it under {project.benchmark_dir} (give BENCH as asv names it, "
        "e.g. forward.TinyLM.track_latency)"
    )


def resolve(project: AsvProject, bench: str, case: str | None) -> SuiteCase:
    """One case of `bench`'s suite (`case` None: its only case)."""
    suite, suite_class = load_suite_class(project, bench)
    names = [c.name for c in suite_class._parsed_cases]
    if case is None:
        if len(names) != 1:
            raise RemeasureError(
                f"{suite} has {len(names)} cases ({', '.join(names)}): pick one with --case"
            )
        case = names[0]
    return resolve_cases(project, bench, [case])


def resolve_cases(project: AsvProject, bench: str, cases: Sequence[str]) -> SuiteCase:
    """`cases` of `bench`'s suite, all measured by each bench process (in the suite's order)."""
    suite, suite_class = load_suite_class(project, bench)
    known = {c.name: c for c in suite_class._parsed_cases}
    missing = [c for c in cases if c not in known]
    if missing or not cases:
        raise RemeasureError(
            f"{suite} has no case {', '.join(map(repr, missing)) or '(none asked)'} "
            f"(cases: {', '.join(known)})"
        )
    wanted = tuple(c for c in known.values() if c.name in set(cases))
    config = dataclasses.replace(suite_class().run_config(), cases=wanted)
    return SuiteCase(suite, tuple(c.name for c in wanted), suite_class, config)


@dataclass
class Remeasurer:
    """Installs commits into the project's asv environment and runs one bench process each."""

    project: AsvProject
    target: SuiteCase
    workdir: Path
    echo: Callable[[str], None] | None = None
    bench_echo: Callable[[str], None] | None = None
    installed: InstalledCommit | None = None
    runs: int = 0
    per_commit_envs: bool = True
    # A paced suite's `track_relative` finding: each process gives the median of its
    # forward-over-workload ratios, not of its latency.
    relative: bool = False
    installs: int = 0  # installs that did work (a commit new to its environment)
    install_s: float = 0.0  # seconds spent in install_commit, reuses included
    _envs: dict[str, InstalledCommit] = dataclasses.field(default_factory=dict)

    def install(self, commit: str) -> InstalledCommit:
        if self.per_commit_envs:
            if commit not in self._envs:
                self._envs[commit] = self._install(commit, env_dir_for(self.project, commit))
            self.installed = self._envs[commit]
        elif self.installed is None or self.installed.commit != commit:
            self.installed = self._install(commit, None)
        return self.installed

    def _install(self, commit: str, env_dir: Path | None) -> InstalledCommit:
        where = "its own environment" if env_dir is not None else "asv's environment"
        self.say(f"  {commit[:8]}: {where}, installing it unless it is there")
        done = install_commit(self.project, commit, echo=self.bench_echo, env_dir=env_dir)
        self.installs += int(done.installed)
        self.install_s += done.seconds
        if done.installed:
            self.say(f"  {commit[:8]}: installed in {done.seconds:.1f} s")
        else:
            self.say(f"  {commit[:8]}: already installed there")
        return done

    def say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def config_for(self, commit: str, extra: Sequence[str] = ()) -> RunConfig:
        installed = self.install(commit)
        return dataclasses.replace(
            self.target.config,
            python=installed.python,
            extra_args=(*self.target.config.extra_args, *extra),
        )

    def run(self, commit: str, tag: str, extra: Sequence[str] = ()) -> RunOutcome:
        """One bench process of the cases at `commit`; a failed or refused case is an error."""
        config = self.config_for(commit, extra)
        require_available(config)
        self.runs += 1
        try:
            outcome = launch_bench(config, self.workdir, echo=self.bench_echo, tag=tag)
        except LaunchError as error:
            raise RemeasureError(f"{commit[:8]}: the bench failed: {error.summary}") from None
        for case in self.target.cases:
            got = results.by_case(outcome.results).get(case)
            problems = outcome.problems.get(case, [])
            if got is None or not got.ok or problems:
                why = got.error if got is not None and got.error else "; ".join(problems)
                raise RemeasureError(f"{commit[:8]} {case}: the case failed: {why}")
            refused = results.refusals(got, self.target.tolerance)
            if refused:
                detail = "; ".join(f"{v.check}: {v.detail}" for v in refused)
                raise RemeasureError(f"{commit[:8]} {case}: no latency recorded: {detail}")
        return outcome

    def process_values(self, commit: str, tag: str) -> dict[tuple[str, bool], float]:
        """One bench process at `commit`: per (case, relative) its median, as asv's samples:
        of the per-sample medians in seconds (relative False) and, for a paced suite, of
        the per-sample forward-over-workload ratios (relative True, `track_relative`)."""
        outcome = self.run(commit, tag)
        by_case = results.by_case(outcome.results)
        samples = self.target.config.samples
        out: dict[tuple[str, bool], float] = {}
        for case in self.target.cases:
            got = by_case[case]
            out[case, False] = median(got.latency.block_medians(samples)) * 1e-6
            pace = got.ranks[0].reference if got.ranks else None
            if pace is None:
                continue
            try:
                out[case, True] = median(pace.relative(got.ranks[0].latency, samples))
            except results.ResultsError as error:
                raise RemeasureError(f"{commit[:8]} {case}: {error}") from None
        return out

    def process_median(self, commit: str, tag: str) -> float:
        """One bench process's median of the (first) case: `process_values`' latency or,
        `relative`, its forward-over-workload ratio (`track_relative`)."""
        values = self.process_values(commit, tag)
        key = (self.target.case, self.relative)
        if key not in values:
            raise RemeasureError(
                f"{commit[:8]} {self.target.case}: the bench wrote no reference workload times "
                "(a track_relative finding needs the suite's `reference = True`)"
            )
        return values[key]


def resolve_commits(project: AsvProject, *revs: str) -> list[str]:
    try:
        return [project.resolve(rev) for rev in revs]
    except AsvError as error:
        raise RemeasureError(str(error)) from None


@dataclass(frozen=True)
class ProcessLayout:
    """How one asv run of a fwdasv suite stores a case's samples: `launches` bench processes,
    `samples` each, one process after another (`fwdasv.backends.measure.pool`)."""

    samples: int  # per process
    launches: int  # processes per asv run


def process_layout(project: AsvProject, benchmark: str) -> ProcessLayout | None:
    """The layout of `benchmark`'s suite, from the project's benchmark_dir; None when it is
    not a fwdasv suite (its samples cannot be split into processes)."""
    try:
        _, suite_class = load_suite_class(project, benchmark)
        config = suite_class().run_config()
    except Exception:  # not a fwdasv suite, or one that cannot be imported here
        return None
    launches = getattr(suite_class, "launches", 1)
    if not isinstance(launches, int) or launches < 1 or config.samples < 1:
        return None
    return ProcessLayout(int(config.samples), launches)


def processes_per_commit(
    history: Sequence[Sequence[float]], samples_per_process: int, launches: int
) -> int:
    """How many bench processes each history commit pooled: its stored samples over the
    samples one process gives (the median commit), so commits that asv's
    `--append-samples` measured again count all their processes; `launches` (the
    suite's) when nothing is stored."""
    counts = sorted(len(samples) for samples in history if samples)
    if not counts or samples_per_process < 1:
        return launches
    return max(1, round(counts[len(counts) // 2] / samples_per_process))


def one_process_noise(
    noise: Noise, history: Sequence[Sequence[float]], layout: ProcessLayout | None
) -> Noise:
    """`noise` of the stored commits' medians as the noise of one bench process's median,
    the unit confirm, bisect and check re-measure in: a commit that pooled P processes
    (`processes_per_commit`) varies sqrt(P) times less than one (`Noise.per_process`).
    Unscaled where the layout is unknown (not a fwdasv suite)."""
    if layout is None:
        return noise
    return noise.per_process(processes_per_commit(history, layout.samples, layout.launches))


def stored_prior(history: Sequence[Sequence[float]], layout: ProcessLayout | None) -> Noise | None:
    """A series' stored noise as the prior of a re-measure (check, bisect): `estimate_noise`
    over `history` with each commit's loaded processes left out (`quiet_history`, the noise
    the series' findings are judged with), as one process's median (`one_process_noise`).
    None where the history says nothing beyond the prior of nothing (too few commits)."""
    size = layout.samples if layout is not None else None
    noise = estimate_noise(quiet_history(history, size).history)
    if noise.source == "prior":
        return None
    return one_process_noise(noise, history, layout)


def prior_said(prior: Noise | None, machine: str | None, history: bool) -> str:
    """How a series' noise prior was chosen, for the progress lines of check and bisect:
    the prior `stored_prior` gave on `machine`, else why there is none (`history`: whether
    a stored history was asked for)."""
    if prior is not None:
        return (
            f"noise prior {prior.noise_pct:.3g}% from {prior.commits_used} stored commit(s) "
            f"of the series on {machine}"
        )
    if not history:
        return "no stored history asked for (--no-history): the processes decide"
    return f"no stored history of the series on {machine or 'this machine'}: the processes decide"


def process_sizes(project: AsvProject, benchmarks: Iterable[str]) -> dict[str, int]:
    """Samples per bench process of each benchmark that is a fwdasv suite's."""
    out = {}
    for name in sorted(benchmarks):
        layout = process_layout(project, name)
        if layout is not None:
            out[name] = layout.samples
    return out
