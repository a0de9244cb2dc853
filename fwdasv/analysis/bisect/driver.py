"""The bisect driver: the ends, then one probe at a time, each judged on interleaved processes.

`Bisector.open` checks the environment and the range (GOOD, then each first-parent
commit up to BAD) and sets up a `ProcessPool` for every series followed: each bench
process measures all of them (a suite's cases, the latency or the paced ratio), so one
search serves all the series that stepped in the range; its processes are kept in
BISECT_DIR, so a bisection cut short goes on where it stopped. `run`:

- `check_ends`: GOOD and BAD re-measured interleaved (2+2 processes for a step beyond
  ODD_PROCESS_PCT, else 3+3; more while undecided, as confirm looks) and judged
  by confirm's rule; a pair confirm re-measured starts from confirm's processes. A series whose step does not reproduce is `not reproducible`, one
  the processes cannot decide `undecided`.
- `search`: each series keeps its own `Search`; the next probe is the first open one
  (nearest the middle), and a probe serves every series it lies inside. `place`
  measures it (1 process for a step beyond ODD_PROCESS_PCT, else 3; then 3 more, with
  GOOD and BAD topped up beside it, while any series cannot place it, up to
  `max_processes`). Untestable commits (the compiled-code guard) are skipped unmeasured.
- `recheck`: below a huge step, the final pair's probes once more on fresh processes;
  one that leans against its verdict leaves the series `undecided`.
- `finish`: per series a `BisectResult`: the first bad commit when the final pair is
  adjacent and holds no skipped commit, else `undecided` with the reason.

The rules are pure (`fwdasv.analysis.bisect.rules`); how it decides: docs/verdicts.md.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fwdasv.analysis.bisect.environment import BisectError, check_environment, commit_refusal
from fwdasv.analysis.bisect.outcome import Answer, BisectResult, Probe, level
from fwdasv.analysis.bisect.rules import (
    ODD_PROCESS_PCT,
    ROBUST_PROCESSES,
    ProbeJudgment,
    expected_probes,
    judge_probe,
    judge_step,
    magnitude_pct,
    robust,
    run_noise,
    sides_agree,
)
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed, follow_benchmark
from fwdasv.analysis.confirm import ALPHA, MAX_PROCESSES, STEP_PROCESSES, Confirmation
from fwdasv.analysis.noise import Noise
from fwdasv.analysis.processes import (
    BISECT_DIR,
    CONFIRM_DIR,
    PROCESSES_FILE,
    ProcessPool,
    kept_dir,
)
from fwdasv.analysis.remeasure import RemeasureError
from fwdasv.analysis.status import Status
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.tables import human_value
from fwdasv.core.verdicts import MIN_EFFECT_PCT


@dataclass
class Track:
    """Where one followed series stands: its ends' verdict, direction, change and search."""

    followed: Followed
    search: Search
    direction: int = 1
    change_pct: float = 0.0  # the step's size as a slowdown (`magnitude_pct`), after the ends
    ends: Confirmation | None = None
    answer: Answer | None = None  # set when the series is done before its search ends
    reason: str = ""

    @property
    def active(self) -> bool:
        return self.answer is None


@dataclass
class Bisector:
    """One search over `line` (GOOD, then each first-parent commit up to BAD) for `tracks`."""

    project: AsvProject
    machine: str
    line: tuple[str, ...]
    tracks: list[Track]
    pool: ProcessPool
    refusal: Callable[[str], str | None] | None
    max_processes: int = MAX_PROCESSES
    alpha: float = ALPHA
    min_effect_pct: float = MIN_EFFECT_PCT
    echo: Callable[[str], None] | None = print
    subjects: dict[str, str | None] = field(default_factory=dict)

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

    @property
    def good(self) -> str:
        return self.line[0]

    @property
    def bad(self) -> str:
        return self.line[-1]

    def say(self, line: str) -> None:
        if self.echo is not None:
            self.echo(line)

    def subject(self, commit: str) -> str | None:
        if commit not in self.subjects:
            try:
                self.subjects[commit] = self.project.subject(commit)
            except AsvError:
                self.subjects[commit] = None
        return self.subjects[commit]

    def values(self, commit: str, track: Track) -> list[float]:
        return self.pool.values(commit, track.followed.ref)

    def noise(self, track: Track) -> Noise | None:
        """The floor: the history's noise per process, else this run's own spread."""
        if track.followed.prior is not None:
            return track.followed.prior
        groups = [self.values(c, track) for c in self.pool.processes]
        return run_noise([g for g in groups if len(g) >= 2])

    def shown(self, value: float, track: Track) -> str:
        return human_value(value, track.followed.unit)

    # --- the ends -------------------------------------------------------------------------

    def check_ends(self) -> None:
        """GOOD and BAD interleaved, judged per series, more processes while any is undecided
        (a series decided at one look keeps that verdict, as confirm's findings do)."""
        prior = all(t.followed.prior is not None for t in self.tracks)
        # A huge step (or one not known yet, by hand) starts at two a side, a finding's
        # smaller one at three. Two, not one: a level read from one process may be an odd
        # process's (both ends read 45-55% slow once, and a bad commit that read fast
        # looked good beside them).
        claims = [t.followed.claimed_pct for t in self.tracks]
        huge = all(c is None or magnitude_pct(c) > ODD_PROCESS_PCT for c in claims)
        count = 2 if huge else ROBUST_PROCESSES
        self.say(
            f"GOOD {self.good[:8]} and BAD {self.bad[:8]}, interleaved: {count} process(es) "
            "each first" + ("" if prior else " (no stored history: the run's own spread decides)")
        )
        self.pool.measure([self.good, self.bad], count)
        decided: set[int] = set()
        while True:
            for track in self.tracks:
                if id(track) not in decided and self.judge_ends(track):
                    decided.add(id(track))
            undecided = [t for t in self.tracks if id(t) not in decided]
            taken = min(self.pool.count(self.good), self.pool.count(self.bad))
            stepped = [t for t in self.tracks if id(t) in decided and t.active]
            if not undecided:
                return
            if stepped:
                # One step, several series: those too noisy to confirm it follow the search
                # of those that do (their own processes still judged at every probe).
                for track in undecided:
                    self.say(f"  {track.followed.ref.name}: follows the series that step")
                return
            if taken >= self.max_processes:
                for track in undecided:
                    track.answer = Answer.UNDECIDED
                    track.reason = (
                        f"GOOD and BAD after {taken}+{taken} processes: "
                        f"{track.ends.summary() if track.ends else 'no spread to judge by'}"
                    )
                return
            more = min(next_look(taken), self.max_processes) - taken
            self.say(f"  the ends undecided: {more} more process(es) each")
            self.pool.measure([self.good, self.bad], more)

    def judge_ends(self, track: Track) -> bool:
        """Whether the ends decide `track` (its direction, change and, unless it steps, its
        answer); False: measure more."""
        g, b = self.values(self.good, track), self.values(self.bad, track)
        noise = self.noise(track)
        if noise is None:
            return False
        claimed = track.followed.claimed_pct
        direction = (1 if claimed > 0 else -1) if claimed else (1 if level(b) >= level(g) else -1)
        verdict = judge_step(
            g,
            b,
            noise,
            direction,
            claimed_pct=claimed,
            min_effect_pct=self.min_effect_pct,
            alpha=self.alpha,
        )
        # The step bisected, as a slowdown of its slower side: the finding's change unless
        # the re-measure rules it out (then its upper bound), by hand the re-measure's.
        change = verdict.percent
        if claimed:
            change = min(magnitude_pct(claimed), max(verdict.upper_pct, verdict.percent))
        track.ends, track.direction, track.change_pct = verdict, direction, change
        name = track.followed.ref.name
        self.say(
            f"  {name}: GOOD {self.shown(level(g), track)} (n={len(g)}) -> BAD "
            f"{self.shown(level(b), track)} (n={len(b)}): {verdict.summary()}"
        )
        # As for a probe: nearly all of each end's processes on its side of the midpoint
        # (odd processes at BAD once made a step-free range's ends "confirmed" at +12%).
        apart = sides_agree(g, b, b, Status.BAD, direction) and sides_agree(
            g, g, b, Status.GOOD, direction
        )
        if verdict.status == Status.CONFIRMED and robust(b, g, noise) and apart:
            return True
        if verdict.status == Status.NOT_REPRODUCED and min(len(g), len(b)) >= ROBUST_PROCESSES:
            track.answer = Answer.NOT_REPRODUCIBLE
            track.reason = (
                f"GOOD {self.good[:8]} and BAD {self.bad[:8]} re-measured interleaved do not "
                f"differ by the step ({verdict.summary()})"
            )
            return True
        return False

    # --- the probes -----------------------------------------------------------------------

    def next_index(self) -> int | None:
        """The first active series' next probe (each series' search is its own)."""
        for track in self.tracks:
            if track.active and (index := track.search.next_index) is not None:
                return index
        return None

    def search(self) -> None:
        while (index := self.next_index()) is not None:
            self.place(index)

    def place(self, index: int) -> None:
        """Measure one probe for every active series it lies inside, and place it for each
        (a series placed at one look keeps that verdict)."""
        commit = self.line[index]
        tracks = [t for t in self.tracks if t.active and t.search.open(index)]
        title = self.subject(commit)
        number = 1 + max(len(t.search.probes) for t in tracks)
        why = self.refusal(commit) if self.refusal else None
        if why:
            self.say(
                f"[{number}] {commit[:8]} {title or ''}: untestable ({why}); skipped unmeasured, "
                "as `git bisect skip` does: the candidate nearest the middle is next"
            )
            probe = Probe(commit, title, Status.FAILED, text=why, decided_by="untestable")
            self.skip(index, tracks, probe)
            return
        # A step beyond what one odd process can fake is placed from one process.
        huge = all(magnitude_pct(t.change_pct) > ODD_PROCESS_PCT for t in tracks)
        judged: dict[int, tuple[ProbeJudgment, int]] = {}
        try:
            self.top_up(commit, 1 if huge else ROBUST_PROCESSES)
            while True:
                for track in tracks:
                    if id(track) not in judged or not settled(judged[id(track)][0]):
                        judgment = self.judge(commit, track)
                        judged[id(track)] = (judgment, len(self.values(commit, track)))
                taken = self.pool.count(commit)
                group = group_verdict([j for j, _ in judged.values()])
                done = all(settled(j) for j, _ in judged.values())
                if group is not None or done or taken >= self.max_processes:
                    break
                self.top_up(commit, min(next_look(taken), self.max_processes))
        except RemeasureError as error:
            self.say(f"[{number}] {commit[:8]} {title or ''}: not measured ({error}); skipped")
            probe = Probe(commit, title, Status.FAILED, text=str(error), decided_by="failed")
            self.skip(index, tracks, probe)
            return
        for track in tracks:
            judgment, count = judged[id(track)]
            values = self.values(commit, track)[:count]
            verdict, decided_by = judgment.verdict, "processes"
            if not placed(judgment):
                verdict, decided_by = Status.UNKNOWN, "undecided"
                if group is not None and not contradicts(judgment, group):
                    # One step, several series: one that cannot place the probe takes the
                    # verdict of those that do, unless its own processes lean the other way.
                    verdict, decided_by = group, "group"
            self.say(
                f"[{number}] {commit[:8]} {title or ''}: {track.followed.ref.name} "
                f"{self.shown(level(values), track)} (n={count}); {judgment.text()} -> "
                + {
                    "processes": str(verdict),
                    "group": f"{verdict} (as the series that place it)",
                    "undecided": f"not placed ({judgment.verdict}): skipped",
                }[decided_by]
            )
            probe = Probe(commit, title, verdict, count, level(values), judgment.text(), decided_by)
            track.search = track.search.placed(index, probe)
            if judgment.between:
                # Within half the step of both ends: the ends are not a step apart (a
                # step-free range's ends once read "confirmed" +7% beside odd processes).
                track.answer = Answer.NOT_REPRODUCIBLE
                track.reason = (
                    f"probe {commit[:8]} lies within half the step of both GOOD and BAD "
                    f"({judgment.text()}): the ends do not differ by the step"
                )

    def judge(self, commit: str, track: Track) -> ProbeJudgment:
        noise = self.noise(track)
        assert noise is not None, "the ends were judged with a floor"
        return judge_probe(
            self.values(self.good, track),
            self.values(commit, track),
            self.values(self.bad, track),
            noise,
            track.direction,
            change_pct=track.change_pct,
            min_effect_pct=self.min_effect_pct,
            alpha=self.alpha,
        )

    def top_up(self, commit: str, count: int) -> None:
        """The probe up to `count` processes; from its second look GOOD and BAD up to as many,
        interleaved with it (G M B G M B ...: one window of load)."""
        have = self.pool.count(commit)
        plan: list[str] = []
        for number in range(have + 1, count + 1):
            behind = {c for c in (self.good, self.bad) if self.pool.count(c) < number}
            ends = behind if have > 0 else set()
            plan += [c for c in (self.good, commit, self.bad) if c == commit or c in ends]
        self.pool.run(plan)
        if count > have:
            self.say(f"  {commit[:8]}: {self.pool.count(commit)} process(es)")

    def skip(self, index: int, tracks: Sequence[Track], probe: Probe) -> None:
        for track in tracks:
            track.search = track.search.placed(index, probe)

    # --- the answer -----------------------------------------------------------------------

    def run(self) -> list[BisectResult]:
        after = len(self.line) - 1
        names = ", ".join(t.followed.ref.name for t in self.tracks)
        self.say(
            f"bisect {names} on {self.machine}: {after} commits after GOOD {self.good[:8]} up to "
            f"BAD {self.bad[:8]} (about {expected_probes(after)} probes; each judged by "
            "confirm's rule on interleaved process medians)"
        )
        self.check_ends()
        self.search()
        self.recheck()
        if self.pool.resumed:
            self.say(
                f"{self.pool.resumed} process(es) taken from an earlier run of this range or "
                f"confirm's of its ends ({self.pool.workdir / PROCESSES_FILE}; --again "
                "measures afresh)"
            )
        return [self.finish(t) for t in self.tracks]

    def recheck(self) -> None:
        """The final pair's probes measured once more, ROBUST_PROCESSES fresh processes each in
        one bench run, and judged on those alone: a series whose fresh processes lean against
        a verdict is `undecided`. Three processes of one commit all odd, reading at the other
        end's level, once placed a bad commit good (a step within what odd processes reach);
        a huge step's probes need no re-check (`robust`)."""
        owners: dict[str, list[tuple[Track, Status]]] = {}
        last = len(self.line) - 1
        for track in self.tracks:
            if not track.active or magnitude_pct(track.change_pct) > ODD_PROCESS_PCT:
                continue
            if track.search.skipped_inside:
                continue
            for index in track.search.pair:
                if 0 < index < last:
                    verdict = track.search.decisions[index]
                    owners.setdefault(self.line[index], []).append((track, verdict))
        if not owners:
            return
        self.say(
            "the final pair once more, on fresh processes: " + ", ".join(c[:8] for c in owners)
        )
        try:
            self.pool.run([c for _ in range(ROBUST_PROCESSES) for c in owners])
        except RemeasureError as error:
            for pairs in owners.values():
                for track, _ in pairs:
                    track.answer = Answer.UNDECIDED
                    track.reason = f"the final pair could not be measured again ({error})"
            return
        for commit, pairs in owners.items():
            for track, verdict in pairs:
                fresh = self.values(commit, track)[-ROBUST_PROCESSES:]
                noise = self.noise(track)
                assert noise is not None, "the ends were judged with a floor"
                again = judge_probe(
                    self.values(self.good, track),
                    fresh,
                    self.values(self.bad, track),
                    noise,
                    track.direction,
                    change_pct=track.change_pct,
                    min_effect_pct=self.min_effect_pct,
                    alpha=self.alpha,
                )
                self.say(
                    f"  {commit[:8]} {track.followed.ref.name}: {again.text()} (was {verdict})"
                )
                if contradicts(again, verdict):
                    track.answer = Answer.UNDECIDED
                    track.reason = (
                        f"{commit[:8]} measured again leans against its verdict ({verdict}): "
                        f"{again.text()}"
                    )

    def finish(self, track: Track) -> BisectResult:
        search = track.search
        lo, hi = search.pair
        answer, reason = track.answer, track.reason
        skipped = search.skipped_inside
        if answer is None:
            if skipped:
                kinds = {p.commit: p.decided_by for p in search.probes}
                listed = ", ".join(f"{c[:8]} ({kinds.get(c, 'skipped')})" for c in skipped)
                answer = Answer.UNDECIDED
                reason = (
                    f"the step is at one of {listed} or {self.line[hi][:8]}: "
                    "the skipped commits could not be placed"
                )
            else:
                answer, reason = Answer.FOUND, "the final pair is adjacent, each end placed"
        g, b = self.values(self.good, track), self.values(self.bad, track)
        ref = track.followed.ref
        benchmark = f"{ref.suite}.{'track_relative' if ref.relative else 'track_latency'}"
        return BisectResult(
            benchmark=benchmark,
            case=ref.case,
            machine=self.machine,
            unit=track.followed.unit,
            good=self.good,
            bad=self.bad,
            range_size=len(self.line) - 1,
            direction=track.direction,
            answer=answer,
            reason=reason,
            last_good=self.line[lo],
            first_bad=self.line[hi],
            subject=self.subject(self.line[hi]) if answer == Answer.FOUND else None,
            before_median=level(g) if g else float("nan"),
            after_median=level(b) if b else float("nan"),
            ends=track.ends.summary() if track.ends else "not measured",
            bench_runs=self.pool.rounds,
            bench_processes=self.pool.bench_processes,
            probes=search.probes,
            skipped=skipped,
        )


def start_from_confirm(project: AsvProject, good: str, bad: str, workdir: Path) -> None:
    """A range not bisected before whose ends confirm re-measured (a confirmed finding's
    pair): its processes start the bisection's, as if an earlier run of the range had kept
    them (GOOD and BAD interleaved, the same bench): the ends are not measured again."""
    confirmed = kept_dir(project, CONFIRM_DIR, good, bad) / PROCESSES_FILE
    if (workdir / PROCESSES_FILE).exists() or not confirmed.is_file():
        return
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(confirmed, workdir / PROCESSES_FILE)


def placed(judgment: ProbeJudgment) -> bool:
    return judgment.verdict in (Status.GOOD, Status.BAD)


def settled(judgment: ProbeJudgment) -> bool:
    """Placed, or shown to lie between ends that are not a step apart: no more processes."""
    return placed(judgment) or judgment.between


def group_verdict(judgments: Sequence[ProbeJudgment]) -> Status | None:
    """The probe's verdict for all the series of one search: that of the series that place
    it, when they agree and none of the others leans the other way; None otherwise."""
    verdicts = {j.verdict for j in judgments if placed(j)}
    if len(verdicts) != 1:
        return None
    (verdict,) = verdicts
    if any(contradicts(j, verdict) for j in judgments if not placed(j)):
        return None
    return verdict


def contradicts(judgment: ProbeJudgment, verdict: Status) -> bool:
    """Whether one series' comparisons lean against `verdict` (bad: the probe is not beyond
    GOOD, or BAD is beyond it; good: the other way round)."""
    confirmed, ruled_out = Status.CONFIRMED, Status.NOT_REPRODUCED
    up, down = judgment.from_good.status, judgment.to_bad.status
    if verdict == Status.BAD:
        return up == ruled_out or down == confirmed
    return up == confirmed or down == ruled_out


def next_look(taken: int) -> int:
    """Processes a side at the next look: ROBUST_PROCESSES, then STEP_PROCESSES more each."""
    return ROBUST_PROCESSES if taken < ROBUST_PROCESSES else taken + STEP_PROCESSES


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
