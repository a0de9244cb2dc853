"""A bisection's search: one probe at a time, each placed good or bad for every series.

Each series keeps its own `Search`; the next probe is the first active series' next one
(nearest the middle), and a probe serves every series it lies inside. `place` measures
it (1 process for a step beyond ODD_PROCESS_PCT, else ROBUST_PROCESSES; then more, GOOD
and BAD topped up beside it, while any series cannot place it, up to `max_processes`),
judged by `rules.judge_probe`. A series that cannot place it takes the verdict of those
that do (`rules.group_verdict`). Untestable commits (the compiled-code guard) and failed
measures are skipped, as `git bisect skip` does; a probe a burst left unplaced inside the
final pair is measured once more (`retry`). How: docs/verdicts.md ("bisect").
"""

from __future__ import annotations

from collections.abc import Sequence

from fwdasv.analysis.bisect.outcome import Answer, Probe, level
from fwdasv.analysis.bisect.rules import (
    ODD_PROCESS_PCT,
    ROBUST_PROCESSES,
    ProbeJudgment,
    contradicts,
    group_verdict,
    next_look,
    placed,
    settled,
    vetoed,
)
from fwdasv.analysis.bisect.session import Session, Track
from fwdasv.analysis.remeasure import RemeasureError
from fwdasv.analysis.rules.confirm import magnitude_pct
from fwdasv.analysis.rules.status import BisectStatus


def next_index(session: Session) -> int | None:
    """The first active series' next probe (each series' search is its own)."""
    for track in session.tracks:
        if track.active and (index := track.search.next_index) is not None:
            return index
    return None


def search(session: Session) -> None:
    while (index := next_index(session)) is not None:
        place(session, index)


def retry(session: Session) -> None:
    """Each skipped probe left inside a series' final pair whose comparisons placed it but
    a guard on its processes did not (`rules.vetoed`: a burst's mark) is measured once
    more on fresh processes (its first ones set aside), then the search goes on; otherwise
    the answer would be "the step is at one of" it and the first bad commit. Once a
    commit; the fresh processes are judged by the same rules as any probe's, and the
    final pair is re-checked after (`final_pair.recheck`). A probe the noise left
    undecided is not measured again: more processes there are `--max-processes`' to give
    (docs/verdicts.md, "A second look")."""
    retried: set[int] = set()
    while (index := _undecided_inside(session, retried)) is not None:
        retried.add(index)
        commit = session.line[index]
        count = session.pool.set_aside(commit)
        session.say(
            f"{commit[:8]}: not placed by {count} process(es) and left inside the final pair: "
            "measured again on fresh processes"
        )
        for track in session.tracks:
            if track.active and index in track.search.skipped:
                track.search = track.search.unskipped(index)
        place(session, index)
        search(session)


def _undecided_inside(session: Session, retried: set[int]) -> int | None:
    """A commit inside an active series' final pair that its processes left unplaced, its
    comparisons placing it (`vetoed`; not one untestable or failed), not measured again."""
    for track in session.tracks:
        if not track.active:
            continue
        lo, hi = track.search.pair
        undecided = {p.commit for p in track.search.probes if p.decided_by == "undecided"}
        for index in sorted(track.search.skipped):
            commit = session.line[index]
            if not (lo < index < hi and index not in retried and commit in undecided):
                continue
            if vetoed(session.judge(session.values(commit, track), track)):
                return index
    return None


def place(session: Session, index: int) -> None:
    """Measure one probe for every active series it lies inside, and place it for each
    (a series placed at one look keeps that verdict)."""
    commit = session.line[index]
    tracks = [t for t in session.tracks if t.active and t.search.open(index)]
    title = session.subject(commit)
    number = 1 + max(len(t.search.probes) for t in tracks)
    why = session.refusal(commit) if session.refusal else None
    if why:
        session.say(
            f"[{number}] {commit[:8]} {title or ''}: untestable ({why}); skipped unmeasured, "
            "as `git bisect skip` does: the candidate nearest the middle is next"
        )
        probe = Probe(commit, title, BisectStatus.FAILED, text=why, decided_by="untestable")
        skip(index, tracks, probe)
        return
    # A step beyond what one odd process can fake is placed from one process.
    huge = all(magnitude_pct(t.change_pct) > ODD_PROCESS_PCT for t in tracks)
    judged: dict[int, tuple[ProbeJudgment, int]] = {}
    try:
        top_up(session, commit, 1 if huge else ROBUST_PROCESSES)
        while True:
            for track in tracks:
                if id(track) not in judged or not settled(judged[id(track)][0]):
                    judgment = session.judge(session.values(commit, track), track)
                    judged[id(track)] = (judgment, len(session.values(commit, track)))
            taken = session.pool.count(commit)
            group = group_verdict([j for j, _ in judged.values()])
            done = all(settled(j) for j, _ in judged.values())
            if group is not None or done or taken >= session.max_processes:
                break
            top_up(session, commit, min(next_look(taken), session.max_processes))
    except RemeasureError as error:
        session.say(f"[{number}] {commit[:8]} {title or ''}: not measured ({error}); skipped")
        probe = Probe(commit, title, BisectStatus.FAILED, text=str(error), decided_by="failed")
        skip(index, tracks, probe)
        return
    for track in tracks:
        judgment, count = judged[id(track)]
        values = session.values(commit, track)[:count]
        verdict, decided_by = judgment.verdict, "processes"
        if not placed(judgment):
            verdict, decided_by = BisectStatus.UNKNOWN, "undecided"
            if group is not None and not contradicts(judgment, group):
                # One step, several series: one that cannot place the probe takes the
                # verdict of those that do, unless its own processes lean the other way.
                verdict, decided_by = group, "group"
        session.say(
            f"[{number}] {commit[:8]} {title or ''}: {track.followed.ref.name} "
            f"{session.shown(level(values), track)} (n={count}); {judgment.text()} -> "
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


def top_up(session: Session, commit: str, count: int) -> None:
    """The probe up to `count` processes; from its second look GOOD and BAD up to as many,
    interleaved with it (G M B G M B ...: one window of load)."""
    have = session.pool.count(commit)
    plan: list[str] = []
    for number in range(have + 1, count + 1):
        behind = {c for c in (session.good, session.bad) if session.pool.count(c) < number}
        ends = behind if have > 0 else set()
        plan += [c for c in (session.good, commit, session.bad) if c == commit or c in ends]
    session.pool.run(plan)
    if count > have:
        session.say(f"  {commit[:8]}: {session.pool.count(commit)} process(es)")


def skip(index: int, tracks: Sequence[Track], probe: Probe) -> None:
    for track in tracks:
        track.search = track.search.placed(index, probe)
