"""Measure one suite case at chosen commits, outside `asv run`: for confirm and explain.

Each commit is installed by asv into an environment of its own
(`fwdasv.asv.install.env_dir_for`: A and B of an interleaved re-measure are
installed once each, and what confirm installed, explain finds installed), then
one bench process of exactly the suite's configuration and one case runs, started
the way the suite starts it (`fwdasv.backends`), with that environment's
interpreter. `per_commit_envs=False` uses the configuration's one environment,
reinstalling at every switch of commit. What comes back is that process's result:
its per-sample medians (confirm judges process medians) or, with a profile
directory, its kernel summary (explain diffs them). `process_layout` says how a
suite's asv run stores a case's samples (processes of `samples` each).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwdasv.asv.install import InstalledCommit, env_dir_for, install_commit
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.asv.suite import ForwardSuite
from fwdasv.backends import RunConfig, RunOutcome, launch_bench, require_available
from fwdasv.core import results
from fwdasv.core.errors import UserError
from fwdasv.core.stats import median


class RemeasureError(UserError):
    """The benchmark or case cannot be found, or the commit cannot be measured."""


@dataclass(frozen=True)
class SuiteCase:
    """One case of one suite of the project's benchmark_dir, and its bench configuration."""

    suite: str  # "forward.TinyLM"
    case: str
    suite_class: type[ForwardSuite]
    config: RunConfig  # the suite's configuration, this case only

    @property
    def tolerance(self) -> float:
        return float(getattr(self.suite_class, "tolerance", results.DEFAULT_RELATIVE_RMS_TOLERANCE))


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
    suite, suite_class = load_suite_class(project, bench)
    cases = {c.name: c for c in suite_class._parsed_cases}
    if case is None:
        if len(cases) != 1:
            raise RemeasureError(
                f"{suite} has {len(cases)} cases ({', '.join(cases)}): pick one with --case"
            )
        case = next(iter(cases))
    if case not in cases:
        raise RemeasureError(f"{suite} has no case {case!r} (cases: {', '.join(cases)})")
    config = dataclasses.replace(suite_class().run_config(), cases=(cases[case],))
    return SuiteCase(suite, case, suite_class, config)


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
        self.say(f"  installing {commit[:8]} into {where}")
        done = install_commit(self.project, commit, echo=self.bench_echo, env_dir=env_dir)
        self.installs += int(done.installed)
        self.install_s += done.seconds
        if not done.installed:
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
        """One bench process of the case at `commit`; a failed or refused case is an error."""
        config = self.config_for(commit, extra)
        require_available(config)
        self.runs += 1
        from fwdasv.launch import LaunchError

        try:
            outcome = launch_bench(config, self.workdir, echo=self.bench_echo, tag=tag)
        except LaunchError as error:
            raise RemeasureError(f"{commit[:8]}: the bench failed: {error.summary}") from None
        got = results.by_case(outcome.results).get(self.target.case)
        problems = outcome.problems.get(self.target.case, [])
        if got is None or not got.ok or problems:
            why = got.error if got is not None and got.error else "; ".join(problems)
            raise RemeasureError(f"{commit[:8]} {self.target.case}: the case failed: {why}")
        refused = results.refusals(got, self.target.tolerance)
        if refused:
            detail = "; ".join(f"{v.check}: {v.detail}" for v in refused)
            raise RemeasureError(f"{commit[:8]} {self.target.case}: no latency recorded: {detail}")
        return outcome

    def process_median(self, commit: str, tag: str) -> float:
        """One bench process's median, as asv's samples: of its per-sample medians (seconds),
        or, `relative`, of its per-sample forward-over-workload ratios (`track_relative`)."""
        outcome = self.run(commit, tag)
        got = results.by_case(outcome.results)[self.target.case]
        samples = self.target.config.samples
        if not self.relative:
            return median(got.latency.block_medians(samples)) * 1e-6
        pace = got.ranks[0].reference if got.ranks else None
        if pace is None:
            raise RemeasureError(
                f"{commit[:8]} {self.target.case}: the bench wrote no reference workload times "
                "(a track_relative finding needs the suite's `reference = True`)"
            )
        try:
            return median(pace.relative(got.ranks[0].latency, samples))
        except results.ResultsError as error:
            raise RemeasureError(f"{commit[:8]} {self.target.case}: {error}") from None


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
