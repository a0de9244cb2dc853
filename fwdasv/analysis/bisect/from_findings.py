"""Bisect from the findings: every range of several commits searched once, its culprit recorded.

`range_groups` picks the `regression` and `confirmed` findings whose range holds more
than one commit (after `asv run --steps N` the commits between two measured ones were
never measured) and groups them by machine and range: a confirmed finding's range is
the pair its confirmation re-measured (the step is inside it), any other its own pair.
A finding bisected before is left out (`settled`: a culprit recorded over its range, its
own pair or its confirmation's, or naming a commit in it; `again` takes it too, and
measures afresh rather than going on with the processes an earlier search kept).
`bisect_findings` runs one search per group for all its series (each bench process
measures them all, `fwdasv.analysis.bisect.driver`) and appends each finding's answer to
the verdicts file as its culprit (`CulpritRecord`): the first bad commit, or none with
why ("not reproducible", "undecided").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fwdasv.analysis.bisect.driver import bisect_series
from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.bisect.outcome import BisectResult
from fwdasv.analysis.bisect.series import follow_finding
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import Status
from fwdasv.asv.project import AsvProject

# The findings bisect searches: detected or confirmed slowdowns (not one ruled out).
TO_BISECT = (Status.REGRESSION, Status.CONFIRMED)


@dataclass(frozen=True)
class RangeGroup:
    """The findings of one machine whose step lies in GOOD..BAD: one search for them all."""

    machine: str
    good: str
    bad: str
    findings: tuple[Finding, ...]


def finding_range(finding: Finding) -> tuple[str, str]:
    """Where the step is: a confirmed finding's re-measured pair, else its own pair."""
    record = finding.confirmation_record
    if finding.status == Status.CONFIRMED and record is not None:
        return record.a_commit, record.b_commit
    return finding.before_commit, finding.after_commit


def settled(finding: Finding) -> bool:
    """Whether bisect already answered for the finding's range: a culprit recorded over it
    (the confirmation's pair, or the finding's own: the demo and `bisect G..B` search
    that one), or one naming a commit inside it."""
    culprit = finding.culprit_record
    if culprit is None:
        return False
    if (culprit.good, culprit.bad) in (finding_range(finding), finding.commit_range()):
        return True
    return culprit.commit is not None and culprit.commit in {c.hash for c in finding.commits}


def range_groups(found: Sequence[Finding], *, again: bool = False) -> list[RangeGroup]:
    """The ranges to bisect, in the order their first finding appears."""
    grouped: dict[tuple[str, str, str], list[Finding]] = {}
    for finding in found:
        if finding.status not in TO_BISECT or len(finding.commits) <= 1:
            continue
        good, bad = finding_range(finding)
        if settled(finding) and not again:
            continue
        grouped.setdefault((finding.key.machine, good, bad), []).append(finding)
    return [RangeGroup(*where, tuple(members)) for where, members in grouped.items()]


@dataclass(frozen=True)
class Bisected:
    """One range's search: its findings, each with its series' result (None: it could not
    start, `error` says why)."""

    group: RangeGroup
    results: tuple[BisectResult, ...] = ()
    error: str | None = None


def bisect_findings(
    project: AsvProject,
    found: Sequence[Finding],
    all_series: Mapping[SeriesKey, Series],
    *,
    again: bool = False,
    echo: Callable[[str], None] | None = print,
    bench_echo: Callable[[str], None] | None = None,
    **options: object,
) -> list[Bisected]:
    """Bisect every range of `found` that holds several commits, from the read that found
    them (`all_series`); record each culprit."""

    def say(line: str) -> None:
        if echo is not None:
            echo(line)

    groups = range_groups(found, again=again)
    if not groups:
        say(
            "nothing to bisect: no regression or confirmed finding spans more than one commit"
            + ("" if again else " without a culprit recorded")
        )
        return []
    out = []
    for number, group in enumerate(groups, 1):
        names = ", ".join(f.key.name for f in group.findings)
        say(
            f"[range {number}/{len(groups)}] {group.good[:8]}..{group.bad[:8]} on "
            f"{group.machine}: {len(group.findings)} finding(s): {names}"
        )
        followed = [follow_finding(project, f, all_series.get(f.key)) for f in group.findings]
        try:
            results = bisect_series(
                project,
                group.good,
                group.bad,
                followed,
                group.machine,
                echo=echo,
                bench_echo=bench_echo,
                fresh=again,
                **options,
            )
        except BisectError as error:
            say(f"  cannot bisect this range: {error}")
            out.append(Bisected(group, error=str(error)))
            continue
        for finding, result in zip(group.findings, results, strict=True):
            say(f"  {result.summary()}")
            record_verdict(project, finding, status=None, culprit=result.culprit_record())
        out.append(Bisected(group, tuple(results)))
    return out
