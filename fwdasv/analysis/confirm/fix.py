"""Whether a fix brought a finding's old level back: its old level and the fix re-measured.

`check_fix` measures A (the commit the finding's confirmation measured at the old level,
else its own last old commit) and FIX interleaved, A FIX A FIX ..., by confirm's A/B rule
(`fwdasv.analysis.rules.confirm.run_confirmation`, the finding's own step claimed): the
step `not-reproduced` between them is the old level back at FIX; `confirmed` is the slow
level still there; `undecided` tells neither. The processes are kept beside confirm's
(`CONFIRM_DIR`), as a confirmation's are. `fwdasv triage fixed-by` records the state only
when the level is back. FIX must be a commit git knows (`fix_commit`) after the finding's
first new commit (`refuse_fix_before_step`), said before anything is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fwdasv.analysis.confirm.processes import CONFIRM_DIR, Cursor, ProcessPool, SeriesRef, kept_dir
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.remeasure import one_process_noise, process_layout
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.status import ReMeasureStatus
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.errors import UserError


class FixError(UserError):
    """The commit given as a fix cannot be one: no commit, or not after the finding's step."""


def fix_commit(project: AsvProject, fix: str) -> str:
    """FIX's full hash through git (a branch, tag or hash prefix, as bisect resolves its
    ends); FixError, one line, when git knows no such commit: the re-measure would install
    A first, then fail to install FIX."""
    try:
        return project.resolve(fix)
    except AsvError as error:
        raise FixError(
            f"--fix {error}; give the commit that brought the old level back (a hash, branch "
            "or tag of the benchmarked repository, after the finding's first new commit)"
        ) from None


def refuse_fix_before_step(project: AsvProject, finding: Finding, fix: str) -> None:
    """FixError, one line, unless `fix` (a full hash) comes after the finding's first new
    commit (a descendant of it, not it): a "fix" older than the step, or the step itself,
    re-measures the old level against itself or the slow one, and a fixed-by recorded of it
    would take a real regression out of the gate."""
    first = finding.after_commit
    label = f"{finding.key.name} {finding.range_label}"
    if fix == first:
        raise FixError(
            f"--fix {fix[:8]} is the finding's first new commit itself ({label}); give a "
            "later commit, the one that brought the old level back"
        )
    try:
        placed = project.ancestry(first, fix)
    except AsvError as error:
        raise FixError(
            f"--fix {fix[:8]}: cannot ask git whether it follows {first[:8]}: {error}"
        ) from None
    if not placed:
        raise FixError(
            f"--fix {fix[:8]} is not after the finding's first new commit {first[:8]} "
            f"({label}; older, or on another branch); a fix is a later commit, one that has "
            "the step's commit in its history"
        )


@dataclass(frozen=True)
class FixCheck:
    """The re-measure of A (the old level) against FIX."""

    a: str
    fix: str
    verdict: confirm.Confirmation

    @property
    def level_back(self) -> bool:
        return self.verdict.status == ReMeasureStatus.NOT_REPRODUCED

    def summary(self) -> str:
        """One line: `A abcd1234 vs fix ef012345: not-reproduced: ...`."""
        return f"A {self.a[:8]} vs fix {self.fix[:8]}: {self.verdict.summary()}"


def old_level_commit(finding: Finding) -> str:
    """The commit at the finding's old level its confirmation measured, else its own."""
    record = finding.confirmation_record
    return record.a_commit if record is not None else finding.before_commit


def check_fix(
    project: AsvProject,
    finding: Finding,
    fix: str,
    all_series: Mapping[SeriesKey, Series],
    *,
    max_processes: int = confirm.MAX_PROCESSES,
    echo: Callable[[str], None] | None = print,
    bench_echo: Callable[[str], None] | None = None,
) -> FixCheck:
    """Re-measure the finding's old level against `fix` (a full hash), interleaved. `fix`
    must come after the finding's step: the caller refuses one that does not
    (`refuse_fix_before_step`), for every finding before any is measured."""
    a = old_level_commit(finding)
    ref = SeriesRef.of(finding.key)
    pool = ProcessPool(
        project,
        (ref,),
        kept_dir(project, CONFIRM_DIR, a, fix),
        echo=echo,
        bench_echo=bench_echo,
        machine=finding.key.machine,
        resume=True,  # a check cut short goes on from its processes
        since_judged=True,
    )
    series = all_series.get(finding.key)
    history = series.history if series else []
    verdict = confirm.run_confirmation(
        Cursor(pool, a, fix, ref).measure,
        one_process_noise(finding.noise, history, process_layout(project, finding.key.suite)),
        claimed_pct=finding.percent,
        min_effect_pct=finding.min_effect_pct,
        start=min(confirm.MIN_PROCESSES, max_processes),
        max_processes=max_processes,
    )
    pool.mark_judged()
    return FixCheck(a, fix, verdict)
