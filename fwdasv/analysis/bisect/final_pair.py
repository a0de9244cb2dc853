"""A bisection's last steps: the final pair checked once more, then each series' answer.

`recheck`: below a huge step (ODD_PROCESS_PCT), the final pair's probes are measured
again on ROBUST_PROCESSES fresh processes each, in one bench run, and judged on those
alone; a series whose fresh processes lean against a verdict is `undecided`. `finish`:
per series a `BisectResult`: the first bad commit when the final pair is adjacent and
holds no skipped commit, else `undecided` with the reason. How: docs/verdicts.md.
"""

from __future__ import annotations

from fwdasv.analysis.bisect.outcome import Answer, BisectResult, level
from fwdasv.analysis.bisect.rules import (
    ODD_PROCESS_PCT,
    ROBUST_PROCESSES,
    contradicts,
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
    a huge step's probes need no re-check (`robust`)."""
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
    session.say("the final pair once more, on fresh processes: " + ", ".join(c[:8] for c in owners))
    try:
        session.pool.run([c for _ in range(ROBUST_PROCESSES) for c in owners])
    except RemeasureError as error:
        for pairs in owners.values():
            for track, _ in pairs:
                track.answer = Answer.UNDECIDED
                track.reason = f"the final pair could not be measured again ({error})"
        return
    for commit, pairs in owners.items():
        for track, verdict in pairs:
            again = session.judge(session.values(commit, track)[-ROBUST_PROCESSES:], track)
            session.say(f"  {commit[:8]} {track.followed.ref.name}: {again.text()} (was {verdict})")
            if contradicts(again, verdict):
                track.answer = Answer.UNDECIDED
                track.reason = (
                    f"{commit[:8]} measured again leans against its verdict ({verdict}): "
                    f"{again.text()}"
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
