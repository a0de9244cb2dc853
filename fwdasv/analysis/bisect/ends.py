"""A bisection's first step: GOOD and BAD re-measured interleaved, judged per series.

`check_ends` measures 2+2 processes for a step beyond ODD_PROCESS_PCT, else 3+3 (a pair
confirm re-measured starts from confirm's processes), then more while any series is
undecided, as confirm looks, up to `max_processes`. `judge_ends` sets a series'
direction and change from its ends, by confirm's rule (`rules.judge_step`): a series
whose step does not reproduce is `not reproducible`, one the processes cannot decide
`undecided`; one decided at one look keeps that verdict. How: docs/verdicts.md.
"""

from __future__ import annotations

from fwdasv.analysis.bisect.outcome import Answer, level
from fwdasv.analysis.bisect.rules import (
    ODD_PROCESS_PCT,
    ROBUST_PROCESSES,
    judge_step,
    next_look,
    robust,
    sides_agree,
)
from fwdasv.analysis.bisect.session import Session, Track
from fwdasv.analysis.remeasure import prior_said
from fwdasv.analysis.rules.confirm import magnitude_pct
from fwdasv.analysis.rules.status import BisectStatus, ReMeasureStatus


def check_ends(session: Session) -> None:
    """GOOD and BAD interleaved, judged per series, more processes while any is undecided
    (a series decided at one look keeps that verdict, as confirm's findings do)."""
    stored = any(t.followed.prior is not None for t in session.tracks)
    # A huge step (or one not known yet, by hand) starts at two a side, a finding's
    # smaller one at three. Two, not one: a level read from one process may be an odd
    # process's (both ends read 45-55% slow once, and a bad commit that read fast
    # looked good beside them).
    claims = [t.followed.claimed_pct for t in session.tracks]
    huge = all(c is None or magnitude_pct(c) > ODD_PROCESS_PCT for c in claims)
    count = 2 if huge else ROBUST_PROCESSES
    session.say(
        f"GOOD {session.good[:8]} and BAD {session.bad[:8]}, interleaved: {count} process(es) "
        "each first" + ("" if stored else " (no stored history: the run's own spread decides)")
    )
    if stored:  # what each series is judged with, in check's words
        for track in session.tracks:
            said = prior_said(track.followed.prior, session.machine, history=True)
            session.say(f"  {track.followed.ref.name}: {said}")
    session.pool.measure([session.good, session.bad], count)
    decided: set[int] = set()
    while True:
        for track in session.tracks:
            if id(track) not in decided and judge_ends(session, track):
                decided.add(id(track))
        undecided = [t for t in session.tracks if id(t) not in decided]
        taken = min(session.pool.count(session.good), session.pool.count(session.bad))
        stepped = [t for t in session.tracks if id(t) in decided and t.active]
        if not undecided:
            return
        if stepped:
            # One step, several series: those too noisy to confirm it follow the search
            # of those that do (their own processes still judged at every probe).
            for track in undecided:
                session.say(f"  {track.followed.ref.name}: follows the series that step")
            return
        if taken >= session.max_processes:
            for track in undecided:
                track.answer = Answer.UNDECIDED
                track.reason = (
                    f"GOOD and BAD after {taken}+{taken} processes: "
                    f"{track.ends.summary() if track.ends else 'no spread to judge by'}"
                )
            return
        more = min(next_look(taken), session.max_processes) - taken
        session.say(f"  the ends undecided: {more} more process(es) each")
        session.pool.measure([session.good, session.bad], more)


def judge_ends(session: Session, track: Track) -> bool:
    """Whether the ends decide `track` (its direction, change and, unless it steps, its
    answer); False: measure more."""
    g, b = session.values(session.good, track), session.values(session.bad, track)
    noise = session.noise(track)
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
        min_effect_pct=session.min_effect_pct,
        alpha=session.alpha,
    )
    # The step bisected, as a slowdown of its slower side: the finding's change unless
    # the re-measure rules it out (then its upper bound), by hand the re-measure'session.
    change = verdict.percent
    if claimed:
        change = min(magnitude_pct(claimed), max(verdict.upper_pct, verdict.percent))
    track.ends, track.direction, track.change_pct = verdict, direction, change
    name = track.followed.ref.name
    session.say(
        f"  {name}: GOOD {session.shown(level(g), track)} (n={len(g)}) -> BAD "
        f"{session.shown(level(b), track)} (n={len(b)}): {verdict.summary()}"
    )
    # As for a probe: nearly all of each end's processes on its side of the midpoint
    # (odd processes at BAD once made a step-free range's ends "confirmed" at +12%).
    apart = sides_agree(g, b, b, BisectStatus.BAD, direction) and sides_agree(
        g, g, b, BisectStatus.GOOD, direction
    )
    if verdict.status == ReMeasureStatus.CONFIRMED and robust(b, g, noise) and apart:
        return True
    if verdict.status == ReMeasureStatus.NOT_REPRODUCED and min(len(g), len(b)) >= ROBUST_PROCESSES:
        track.answer = Answer.NOT_REPRODUCIBLE
        track.reason = (
            f"GOOD {session.good[:8]} and BAD {session.bad[:8]} re-measured interleaved do not "
            f"differ by the step ({verdict.summary()})"
        )
        return True
    return False
