"""A bisection's last steps: the final pair checked once more, then each series' answer.

`recheck`: below a huge step (ODD_PROCESS_PCT), the final pair's probes are measured
again on ROBUST_PROCESSES fresh processes each, in one bench run, and judged on those
alone; after a loaded process (`rules.loaded`) GOOD and BAD are measured beside them
and the fresh probe judged against those too; a series whose fresh processes lean
against a verdict either way is `undecided`. `finish`:
per series a `BisectResult`: the first bad commit when the final pair is adjacent and
holds no skipped commit, else `undecided` with the reason. How: docs/verdicts.md.
"""

from __future__ import annotations

from fwdasv.analysis.bisect.outcome import Answer, BisectResult, level
from fwdasv.analysis.bisect.rules import (
    LOADED_PCT,
    ODD_PROCESS_PCT,
    ROBUST_PROCESSES,
    contradicts,
    loaded,
)
from fwdasv.analysis.bisect.session import Session, Track
from fwdasv.analysis.findings.series import metric_name
from fwdasv.analysis.remeasure import RemeasureError
from fwdasv.analysis.rules.confirm import magnitude_pct
from fwdasv.analysis.rules.status import BisectStatus


def recheck(session: Session) -> None:
    """The final pair's probes measured once more, ROBUST_PROCESSES fresh processes each in
    one bench run, and judged on those alone: a series whose fresh processes lean against
    a verdict is `undecided`. Three processes of one commit all odd, reading at the other
    end's level, once placed a bad commit good (a step within what odd processes reach);
    a huge step's probes need no re-check (`robust`). Where a process of this bisection
    read LOADED_PCT off its commit's others, GOOD and BAD are measured in the same run,
    interleaved (G M B ...), and each fresh probe is also judged against their fresh
    processes: a load that lasts over the re-check slows both sides alike, where against
    the ends' earlier processes it can keep a good probe bad."""
    owners: dict[str, list[tuple[Track, BisectStatus]]] = {}
    last = len(session.line) - 1
    for track in session.tracks:
        if not track.active or magnitude_pct(track.change_pct) > ODD_PROCESS_PCT:
            continue
        if track.search.skipped_inside:
            continue
        for index in track.search.pair:
            if 0 < index < last:
                verdict = track.search.decisions[index]
                owners.setdefault(session.line[index], []).append((track, verdict))
    if not owners:
        return
    groups = (session.values(c, t) for t in session.tracks for c in session.pool.processes)
    ends = (session.good, session.bad) if loaded(groups) else ()
    beside = (
        f", beside GOOD and BAD (a process of this run read {LOADED_PCT:g}% or more off its "
        "commit's others: a load that lasts slows both sides alike)"
        if ends
        else ""
    )
    session.say(
        "the final pair once more, on fresh processes: " + ", ".join(c[:8] for c in owners) + beside
    )
    plan = [c for c in (session.good, *owners, session.bad) if c in owners or c in ends]
    try:
        session.pool.run([c for _ in range(ROBUST_PROCESSES) for c in plan])
    except RemeasureError as error:
        for pairs in owners.values():
            for track, _ in pairs:
                track.answer = Answer.UNDECIDED
                track.reason = f"the final pair could not be measured again ({error})"
        return
    fresh = slice(-ROBUST_PROCESSES, None)
    earlier = slice(None, -ROBUST_PROCESSES if ends else None)  # the ends before this run
    for commit, pairs in owners.items():
        for track, verdict in pairs:
            probe = session.values(commit, track)[fresh]
            name = f"{commit[:8]} {track.followed.ref.name}"
            good, bad = (session.values(end, track) for end in (session.good, session.bad))
            again = session.judge(probe, track, good=good[earlier], bad=bad[earlier])
            session.say(f"  {name}: {again.text()} (was {verdict})")
            judged = [("", again)]
            if ends:
                side = session.judge(probe, track, good=good[fresh], bad=bad[fresh])
                session.say(f"  {name} beside GOOD and BAD: {side.text()}")
                judged.append((" beside GOOD and BAD", side))
            against = [(how, j) for how, j in judged if contradicts(j, verdict)]
            if against:
                how, judgment = against[0]
                track.answer = Answer.UNDECIDED
                track.reason = (
                    f"{commit[:8]} measured again{how} leans against its verdict ({verdict}): "
                    f"{judgment.text()}"
                )


def finish(session: Session, track: Track) -> BisectResult:
    """`track`'s answer: the first bad commit, or why there is none."""
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
                f"the step is at one of {listed} or {session.line[hi][:8]}: "
                "the skipped commits could not be placed"
            )
        else:
            answer, reason = Answer.FOUND, "the final pair is adjacent, each end placed"
    g, b = session.values(session.good, track), session.values(session.bad, track)
    ref = track.followed.ref
    benchmark = f"{ref.suite}.{metric_name(ref.relative)}"
    return BisectResult(
        benchmark=benchmark,
        case=ref.case,
        machine=session.machine,
        unit=track.followed.unit,
        good=session.good,
        bad=session.bad,
        range_size=len(session.line) - 1,
        direction=track.direction,
        answer=answer,
        reason=reason,
        last_good=session.line[lo],
        first_bad=session.line[hi],
        subject=session.subject(session.line[hi]) if answer == Answer.FOUND else None,
        before_median=level(g) if g else float("nan"),
        after_median=level(b) if b else float("nan"),
        ends=track.ends.summary() if track.ends else "not measured",
        bench_runs=session.pool.rounds,
        bench_processes=session.pool.bench_processes,
        probes=search.probes,
        skipped=skipped,
        resumed=session.pool.resumed,
    )
