"""`fwdasv.analysis.bisect.search`: where a bisection stands, as a value, without measuring."""

from __future__ import annotations

from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.status import Status


def test_search_narrows_skips_and_reopens_without_measuring() -> None:
    """The state of a bisection as a value: each probe narrows the pair, a failed one is
    skipped (the next candidate nearest the middle), a re-check that changes a decision
    reopens the range, and the skipped commits inside the final pair are named."""
    from fwdasv.analysis.bisect.outcome import Probe

    def probe(index: int, verdict: Status) -> Probe:
        return Probe(f"c{index}", None, verdict, None, 0)

    search = Search(tuple(f"c{i}" for i in range(9)))
    assert search.pair == (0, 8) and search.next_index == 4 and not search.done
    search = search.placed(4, probe(4, Status.GOOD))
    assert search.pair == (4, 8) and search.next_index == 6
    search = search.placed(6, probe(6, Status.FAILED))
    assert search.skipped == {6} and search.next_index == 5
    search = search.placed(5, probe(5, Status.BAD))
    assert search.pair == (4, 5) and search.done and search.skipped_inside == ()
    assert search.to_recheck(set()) == [4, 5] and search.to_recheck({4, 5}) == []
    search = search.rechecked(5, probe(5, Status.GOOD))
    assert search.pair == (5, 8) and search.next_index == 7
    assert [p.verdict for p in search.probes] == [Status.GOOD, Status.FAILED, Status.GOOD]
    search = search.placed(7, probe(7, Status.BAD))
    assert search.pair == (5, 7) and search.done and search.skipped_inside == ("c6",)
