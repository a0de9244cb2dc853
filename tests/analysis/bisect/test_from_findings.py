"""`fwdasv.analysis.bisect.from_findings`: which ranges are bisected, and which not again."""

from __future__ import annotations

from dataclasses import replace

from fwdasv.analysis.bisect.from_findings import range_groups, settled
from fwdasv.analysis.findings.finding import Commit, Finding
from fwdasv.analysis.findings.series import SeriesKey
from fwdasv.analysis.findings.verdict_file import (
    ConfirmationRecord,
    CulpritRecord,
    FindingVerdict,
)
from fwdasv.analysis.rules.confirm import judge_ab
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import Step
from fwdasv.demo.run import recorded_culprit

A, B, C, D, E = ("a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40)
NOISE = Noise(0.2, 0.2, 0.05, 60, "history", 35.0)


def _finding(verdict: FindingVerdict | None = None) -> Finding:
    """A confirmed step B..D (commits C, D unmeasured between), its confirmation widened to A..E."""
    key = SeriesKey("box", "env", "forward.S.track_latency", "decode")
    step = Step(1, 2, 1.0, 1.4, 40.0, 9.0, 3.0, 1.0, 4, 4, Status.CONFIRMED)
    finding = Finding(key, "seconds", {}, step, NOISE, B, D, 1.4, Status.CONFIRMED)
    return replace(finding, commits=(Commit(C), Commit(D)), verdict=verdict)


def _verdict(culprit: CulpritRecord | None) -> FindingVerdict:
    finding = _finding()
    confirmation = ConfirmationRecord.of(judge_ab([1.0] * 3, [1.4] * 3, NOISE), A, E)
    return FindingVerdict(
        finding.ident, "2026-12-04", B, (C, D), Status.CONFIRMED, confirmation, culprit=culprit
    )


def test_a_range_whose_culprit_an_earlier_bisect_named_is_not_searched_again() -> None:
    fresh = _finding(_verdict(None))
    (group,) = range_groups([fresh])
    assert (group.good, group.bad) == (A, E)  # the confirmation's pair
    # The demo (and `bisect G..B`) searched the finding's own pair B..D: that answers it too.
    own_pair = _finding(_verdict(CulpritRecord(D, "slower", "ends ...", "found", B, D)))
    assert settled(own_pair) and range_groups([own_pair]) == []
    (again,) = range_groups([own_pair], again=True)
    assert again.findings == (own_pair,)
    # A search of some other range that named no commit here does not.
    elsewhere = _finding(_verdict(CulpritRecord(None, None, "", "undecided", C, E)))
    assert not settled(elsewhere) and len(range_groups([elsewhere])) == 1


def test_a_demo_re_run_takes_the_recorded_culprit_and_its_parent() -> None:
    named = _finding(_verdict(CulpritRecord(D, "slower", "ends ...", "found", B, D)))
    assert recorded_culprit(named) == (C, D)
    assert recorded_culprit(_finding(_verdict(None))) is None
    unnamed = _finding(_verdict(CulpritRecord(None, None, "", "not reproducible", B, D)))
    assert recorded_culprit(unnamed) is None
