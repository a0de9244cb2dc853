"""The bisect driver: open a bisection (its I/O), then run its steps in order.

`Bisector.open` checks the environment and the range (GOOD, then each first-parent
commit up to BAD) and sets up a `ProcessPool` for every series followed: each bench
process measures all of them (a suite's cases, the latency or the paced ratio), so one
search serves all the series that stepped in the range; its processes are kept in
BISECT_DIR, so a bisection cut short goes on where it stopped. `run`: the ends
(`ends.check_ends`), the search (`probes.search`), a second look at a probe a burst left
unplaced in the final pair (`probes.retry`), the final pair once more and each series'
`BisectResult` (`final_pair`). The rules are pure (`rules`, `search`); how it
decides: docs/verdicts.md.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from fwdasv.analysis.bisect import ends, final_pair, probes
from fwdasv.analysis.bisect.environment import BisectError, check_environment, commit_refusal
from fwdasv.analysis.bisect.outcome import BisectResult
from fwdasv.analysis.bisect.rules import expected_probes
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed, follow_benchmark
from fwdasv.analysis.bisect.session import Session, Track
from fwdasv.analysis.confirm.processes import (
    BISECT_DIR,
    CONFIRM_DIR,
    PROCESSES_FILE,
    ProcessPool,
    kept_dir,
)
from fwdasv.analysis.remeasure import RemeasureError
from fwdasv.analysis.rules.confirm import ALPHA, MAX_PROCESSES
from fwdasv.asv.project import AsvError, AsvProject


class Bisector(Session):
    """A session opened on a project's range, run step by step (`Session` holds its state)."""

    @classmethod
    def open(
        cls,
        project: AsvProject,
        good: str,
        bad: str,
        followed: Sequence[Followed],
        machine: str,
        *,
        max_processes: int = MAX_PROCESSES,
        alpha: float = ALPHA,
        echo: Callable[[str], None] | None = print,
        bench_echo: Callable[[str], None] | None = None,
        fresh: bool = False,
    ) -> Bisector:
        """Check the environment and the range, and set up the processes' pool: it goes on
        with the processes an earlier bisection of the range kept (one cut short), unless
        `fresh`."""
        if max_processes < 1:
            raise BisectError(f"--max-processes {max_processes}: must be >= 1")
        check_environment(project)
        try:
            good_hash = project.resolve(good)
            line = (good_hash, *project.first_parent_range(good, bad))
        except AsvError as error:
            raise BisectError(str(error)) from None
        if len(line) < 2:
            raise BisectError(f"{good}..{bad}: no commit after GOOD on the first-parent line")
        refusal = commit_refusal(project)
        for label, commit in (("GOOD", line[0]), ("BAD", line[-1])):
            why = refusal(commit) if refusal else None
            if why:
                raise BisectError(f"{label} is untestable: {why}")
        workdir = kept_dir(project, BISECT_DIR, line[0], line[-1])
        if fresh:
            (workdir / PROCESSES_FILE).unlink(missing_ok=True)
        else:
            start_from_confirm(project, line[0], line[-1], workdir)
        try:
            pool = ProcessPool(
                project,
                tuple(f.ref for f in followed),
                workdir,
                echo=echo,
                bench_echo=bench_echo,
                machine=machine,
                resume=True,
            )
        except RemeasureError as error:
            raise BisectError(str(error)) from None
        tracks = [Track(f, Search(line)) for f in followed]
        return cls(
            project,
            machine,
            line,
            tracks,
            pool,
            refusal,
            max_processes=max_processes,
            alpha=alpha,
            min_effect_pct=project.verdict_settings().min_effect_pct,
            echo=echo,
        )

    def run(self) -> list[BisectResult]:
        after = len(self.line) - 1
        names = ", ".join(t.followed.ref.name for t in self.tracks)
        probes_said = (
            f"about {n} probe{'s' if n != 1 else ''}; each"
            if (n := expected_probes(after))
            else "no probe: the ends"
        )
        self.say(
            f"bisect {names} on {self.machine}: {after} commit{'s' if after != 1 else ''} after "
            f"GOOD {self.good[:8]} up to BAD {self.bad[:8]} ({probes_said} judged by confirm's "
            "rule on interleaved process medians)"
        )
        ends.check_ends(self)
        probes.search(self)
        probes.retry(self)
        final_pair.recheck(self)
        if self.pool.failed and not self.pool.measured:
            # Nothing was measured: an answer would be the failures' (every probe skipped,
            # "undecided"), and recording it would end the search of this range.
            raise BisectError(
                f"every bench process of this search failed ({self.pool.failed}; the last: "
                f"{self.pool.last_failure}); nothing recorded: fix the bench and bisect again"
            )
        if self.pool.resumed:
            self.say(
                f"{self.pool.resumed} process(es) taken from an earlier run of this range or "
                f"confirm's of its ends ({self.pool.workdir / PROCESSES_FILE}; --again "
                "measures afresh)"
            )
        return [final_pair.finish(self, t) for t in self.tracks]


def start_from_confirm(project: AsvProject, good: str, bad: str, workdir: Path) -> None:
    """A range not bisected before whose ends confirm re-measured (a confirmed finding's
    pair): its processes start the bisection's, as if an earlier run of the range had kept
    them (GOOD and BAD interleaved, the same bench): the ends are not measured again."""
    confirmed = kept_dir(project, CONFIRM_DIR, good, bad) / PROCESSES_FILE
    if (workdir / PROCESSES_FILE).exists() or not confirmed.is_file():
        return
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(confirmed, workdir / PROCESSES_FILE)


def bisect_series(
    project: AsvProject,
    good: str,
    bad: str,
    followed: Sequence[Followed],
    machine: str,
    **options: object,
) -> list[BisectResult]:
    """One search over GOOD..BAD for all `followed` series (each process measures them all)."""
    return Bisector.open(project, good, bad, followed, machine, **options).run()  # type: ignore[arg-type]


def bisect(
    project: AsvProject,
    good: str,
    bad: str,
    benchmark: str,
    machine: str,
    case: str | None = None,
    **options: object,
) -> BisectResult:
    """The first commit on the first-parent line GOOD..BAD where `benchmark` (and `case`)
    changed (hand use: the change is taken from the ends' re-measure)."""
    check_environment(project)
    followed = follow_benchmark(project, machine, benchmark, case)
    (result,) = bisect_series(project, good, bad, [followed], machine, **options)
    return result
