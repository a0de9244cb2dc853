"""The final pair: a commit is named only when the last good and the first bad commit differ.

`pair_step` judges the pair; for a fwdasv suite it measures both once more in one run
(one window of load, as confirm's A/B) and counts them as differing only when that
run alone moves beyond the factor too. `recheck`, while the pair does not differ,
re-checks the decisions that led there, nearest the pair first, each once; a
decision that changes reopens the search (`Bisector.search`). Under load a probe can
be put on the wrong side, and the final pair is where that shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwdasv.analysis.bisect.outcome import Probe
from fwdasv.analysis.bisect.rules import StepTest, compare_step, step_text
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.status import Status

if TYPE_CHECKING:  # the driver calls these with itself
    from fwdasv.analysis.bisect.driver import Bisector


def recheck(bisector: Bisector, search: Search, direction: int) -> tuple[Search, StepTest]:
    """While the final pair does not differ: re-check the decisions that led there,
    nearest the pair first, each once (one more run, then placed on all its samples);
    a decision that changes reopens the search. Returns the search and the pair's step."""
    effect = pair_step(bisector, search.pair, direction)
    done: set[int] = set()
    while effect.outcome != Status.DIFFERENT and bisector.max_remeasure > 0:
        todo = search.to_recheck(done)
        if not todo:
            break
        index = todo[0]
        done.add(index)
        commit = bisector.line[index]
        last_good, first_bad = (bisector.line[i] for i in search.pair)
        was = search.decisions[index]
        bisector.say(
            f"final pair {last_good[:8]} -> {first_bad[:8]}: {step_text(effect)}; "
            f"re-checking the decisions that led there, nearest first: {commit[:8]} "
            f"(was {was})"
        )
        bisector.remeasures += 1
        bisector.measure([commit], f"re-check of {commit[:8]}")
        decision = bisector.classify(commit, direction)
        verdict = decision.verdict
        if verdict in (Status.UNKNOWN, Status.PART_WAY):
            verdict = was  # no clearer than before: the decision stands
        s = bisector.samples(commit)
        bisector.say(f"  {commit[:8]}: {bisector.placed_text(s, decision, verdict)}")
        old = next(p for p in search.probes if p.commit == commit)
        decided_by = old.decided_by if verdict == old.verdict else "re-check"
        probe = Probe.placed(
            commit, old.subject, verdict, s, decision, old.remeasures + 1, decided_by
        )
        search = search.rechecked(index, probe)
        if verdict != was:
            search = bisector.search(search, direction)
        effect = pair_step(bisector, search.pair, direction)
    return search, effect


def pair_step(bisector: Bisector, pair: tuple[int, int], direction: int) -> StepTest:
    """The final pair's step. Judged by processes, the pair is also measured once more
    in one run (both commits in the same window of load, as confirm's A/B): it differs
    only when all its samples say so and that run alone moves beyond the factor too."""
    first, second = bisector.line[pair[0]], bisector.line[pair[1]]
    effect = bisector.step(first, second, direction)
    layout = bisector.layout
    if effect.outcome != Status.DIFFERENT or layout is None or bisector.max_remeasure == 0:
        return effect
    bisector.say(
        f"final pair {first[:8]} -> {second[:8]}: {step_text(effect)}; measuring both "
        "in one run to confirm"
    )
    bisector.remeasures += 1
    bisector.measure([first, second], "the final pair, in one run")
    effect = bisector.step(first, second, direction)
    size = layout.samples * layout.launches
    alone = compare_step(
        bisector.samples(first)[-size:],
        bisector.samples(second)[-size:],
        direction,
        bisector.factor,
        bisector.alpha,
        bisector.processes(),
    )
    if effect.outcome == Status.DIFFERENT and alone.outcome == Status.SAME:
        bisector.say(f"  in one run: {step_text(alone)}: the pair does not differ there")
        return StepTest(Status.UNKNOWN, effect.ratio, effect.p_value)
    return effect
