"""`fwdasv.analysis.bisect.search`: where a bisection stands, as a value, without measuring."""

from __future__ import annotations

from fwdasv.analysis.bisect.outcome import Probe
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.rules.status import BisectStatus


def _probe(index: int, verdict: BisectStatus) -> Probe:
    return Probe(f"c{index}", None, verdict)


def test_search_narrows_and_skips_without_measuring() -> None:
    """Each probe narrows the pair; one that failed, was untestable or that its processes
    could not place is skipped (the next candidate nearest the middle), and the skipped
    commits left inside the final pair are named."""
    search = Search(tuple(f"c{i}" for i in range(9)))
    assert search.pair == (0, 8) and search.next_index == 4 and not search.done
    assert search.open(4) and not search.open(0) and not search.open(8)
    search = search.placed(4, _probe(4, BisectStatus.GOOD))
    assert search.pair == (4, 8) and search.next_index == 6 and not search.open(3)
    search = search.placed(6, _probe(6, BisectStatus.FAILED))
    assert search.skipped == {6} and search.next_index == 5 and not search.open(6)
    search = search.placed(5, _probe(5, BisectStatus.UNKNOWN))  # not placed by its processes
    assert search.skipped == {5, 6} and search.next_index == 7
    search = search.placed(7, _probe(7, BisectStatus.BAD))
    assert search.pair == (4, 7) and search.done
    assert search.skipped_inside == ("c5", "c6")
    assert [p.verdict for p in search.probes] == [
        BisectStatus.GOOD,
        BisectStatus.FAILED,
        BisectStatus.UNKNOWN,
        BisectStatus.BAD,
    ]
