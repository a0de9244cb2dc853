"""Triage: the findings of one read of the results, confirmed, bisected and explained.

`fwdasv nightly`, `fwdasv confirm`, `fwdasv bisect` and the demo go the same way: `read`
the stored results once (`fwdasv.analysis.findings.findings.scan`, a `Found` holding the
series too), `confirm` the findings not yet re-measured (an interleaved A/B per pair,
`fwdasv.analysis.confirm.reproduce`, a confirmed one explained there), `explain` those
confirmed earlier without a diff, `bisect` the ranges of several commits
(`fwdasv.analysis.bisect.from_findings`). Each step appends its verdicts
to the verdicts file and returns the `Found` with them applied (`Found.with_verdicts`):
the results are not read again, only the verdicts file, since a re-measure or a bisect
stores nothing in the results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fwdasv.analysis.bisect.from_findings import Bisected, bisect_findings
from fwdasv.analysis.confirm.reproduce import confirm_findings, explain_confirmed, unexplained
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.findings import Found, ScanOptions, scan
from fwdasv.analysis.rules import confirm as confirm_rule
from fwdasv.asv.project import AsvProject

if TYPE_CHECKING:
    from typing_extensions import Unpack

Echo = Callable[[str], None]


def read(project: AsvProject, **options: Unpack[ScanOptions]) -> Found:
    """The findings of the stored results, with the read they came from (`scan`'s options)."""
    return scan(project, **options)


def confirm(
    project: AsvProject,
    found: Found,
    *,
    pending: Sequence[Finding] | None = None,
    max_processes: int = confirm_rule.MAX_PROCESSES,
    run_explain: bool = True,
    improvements: bool = True,
    echo: Echo | None = print,
    bench_echo: Echo | None = None,
) -> Found:
    """Re-measure `pending` (every finding of `found` by default: those `regression` or
    `suspected` are, and with `improvements` the speed-ups not yet re-measured), then
    `found` as now judged."""
    confirm_findings(
        project,
        found.findings if pending is None else pending,
        found.order,
        found.series,
        max_processes=max_processes,
        run_explain=run_explain,
        improvements=improvements,
        echo=echo,
        bench_echo=bench_echo,
    )
    return found.with_verdicts(project)


def explain(
    project: AsvProject,
    found: Found,
    *,
    pending: Sequence[Finding] | None = None,
    echo: Echo | None = print,
    bench_echo: Echo | None = None,
) -> Found:
    """Explain `pending` (every finding of `found` confirmed without a kernel diff by
    default: `unexplained`) at its confirmation's A and B, then `found` as now judged."""
    explain_confirmed(
        project,
        unexplained(found.findings) if pending is None else pending,
        echo=echo,
        bench_echo=bench_echo,
    )
    return found.with_verdicts(project)


def bisect(
    project: AsvProject,
    found: Found,
    *,
    again: bool = False,
    echo: Echo | None = print,
    bench_echo: Echo | None = None,
    **options: object,
) -> tuple[Found, list[Bisected]]:
    """Bisect every range of `found` of several commits without a culprit (`again`: with
    one too); `found` with the culprits recorded, and each range's search."""
    done = bisect_findings(
        project,
        found.findings,
        found.series,
        again=again,
        echo=echo,
        bench_echo=bench_echo,
        **options,
    )
    return found.with_verdicts(project), done
