"""`fwdasv confirm`: the findings re-measured as interleaved A/Bs on this machine, one per pair.

For a finding (`fwdasv.analysis.findings.findings`), the commits just outside its step
(`fwdasv.analysis.rules.confirm.ab_indices`: A at the old level, B at the new) are to be
measured. Findings that re-measure the same pair (same machine, same A and B, same
suite) share their bench processes (`pair_groups`): A and B are installed once each,
into environments of their own, and measured A B A B ... (`fwdasv.analysis.confirm.processes`),
each process measuring every case of the group, so a night with one regression across
a suite's 11 cases costs about one finding's re-measure, not 11. Each finding is
judged on its own case's process medians (`confirm.run_confirmation`); processes are
added while any finding of the pair is undecided (up to `max_processes` a side), and
each finding's verdict, with the processes it used, is appended to the verdicts file;
the processes are kept (CONFIRM_DIR), for a bisect of the pair to start its ends from.
A confirmed finding is then explained: the case profiled at A and at B, the kernel
(or op) diff stored with the verdict; `explain_confirmed` does it later for those
confirmed without one (`unexplained`: explain off, or a failed explain).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fwdasv.analysis.confirm.processes import (
    CONFIRM_DIR,
    PROCESSES_FILE,
    Cursor,
    ProcessPool,
    SeriesRef,
    kept_dir,
)
from fwdasv.analysis.explain import explain
from fwdasv.analysis.findings.finding import Finding, to_re_measure
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.findings.verdict_file import ConfirmationRecord
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.remeasure import one_process_noise, process_layout
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.status import TO_CONFIRM, ReMeasureStatus, Status
from fwdasv.asv.project import AsvProject

__all__ = [
    "NOTHING_PENDING",
    "PairGroup",
    "confirm_findings",
    "explain_confirmed",
    "pair_groups",
    "unexplained",
]


# Why nothing is re-measured, with speed-ups re-measured or not.
NOTHING_PENDING = {
    True: "no finding has status 'regression' or 'suspected', nor a speed-up not yet re-measured",
    False: "no finding has status 'regression' or 'suspected'",
}


@dataclass(frozen=True)
class PairGroup:
    """The findings that re-measure one pair: same machine, suite, A and B."""

    machine: str
    suite: str
    a: str
    b: str
    findings: tuple[Finding, ...]
    reasons: tuple[str, ...]  # per finding: why A and B (`confirm.pair_reason`)


def pair_groups(
    pending: Sequence[Finding], order: Sequence[str], all_series: Mapping[SeriesKey, Series]
) -> list[PairGroup]:
    """`pending` grouped by the pair each re-measures, in the order the first of each appears."""
    grouped: dict[tuple[str, str, str, str], list[tuple[Finding, str]]] = {}
    for finding in pending:
        medians = all_series[finding.key].medians()
        a_index, b_index = confirm.ab_indices(finding.step, medians)
        reason = confirm.pair_reason(finding.step, a_index, b_index)
        where = (finding.key.machine, finding.key.suite, order[a_index], order[b_index])
        grouped.setdefault(where, []).append((finding, reason))
    return [
        PairGroup(*where, tuple(f for f, _ in members), tuple(r for _, r in members))
        for where, members in grouped.items()
    ]


def confirm_findings(
    project: AsvProject,
    found: Sequence[Finding],
    order: Sequence[str],
    all_series: Mapping[SeriesKey, Series],
    *,
    max_processes: int = confirm.MAX_PROCESSES,
    start: int = confirm.MIN_PROCESSES,
    run_explain: bool = True,
    improvements: bool = True,
    echo: Callable[[str], None] | None = print,
    bench_echo: Callable[[str], None] | None = None,
) -> None:
    """Re-measure every `regression` and `suspected` among `found` (and, with
    `improvements`, every speed-up not yet re-measured: `to_re_measure`), one interleaved
    A/B per pair, from the read that found them (`order`, `all_series`); each verdict is
    appended to the verdicts file (`fwdasv.analysis.triage` applies them). A confirmed
    slowdown is explained; a speed-up is only kept or set aside."""

    def say(line: str) -> None:
        if echo is not None:
            echo(line)

    pending = [f for f in found if to_re_measure(f, improvements=improvements)]
    if not pending:
        say(f"nothing to confirm: {NOTHING_PENDING[improvements]}")
        return
    groups = pair_groups(pending, order, all_series)
    number = 0
    for group in groups:
        say(
            f"pair {group.a[:8]}..{group.b[:8]} ({group.suite} on {group.machine}): "
            f"{len(group.findings)} finding(s), one interleaved A/B, every case in each process"
        )
        pool = ProcessPool(
            project,
            tuple(SeriesRef.of(f.key) for f in group.findings),
            kept_dir(project, CONFIRM_DIR, group.a, group.b),
            echo=echo,
            bench_echo=bench_echo,
            machine=group.machine,
            # Kept: a later bisect of A..B starts its ends from them, and a confirm cut
            # short goes on from those no verdict was recorded from.
            resume=True,
            since_judged=True,
        )
        if pool.kept:
            say(
                f"  {pool.kept} process(es) of a confirm of this pair cut short, kept in "
                f"{pool.workdir / PROCESSES_FILE}: taken first"
            )
        layout = process_layout(project, group.suite)
        confirmed: list[tuple[Finding, str]] = []
        for finding, reason in zip(group.findings, group.reasons, strict=True):
            number += 1
            say(
                f"[{number}/{len(pending)}] {finding.key.name} on {finding.key.machine}: "
                f"{finding.status} {finding.percent:+.2f}% at {finding.range_label}; re-measuring "
                f"A {group.a[:8]} and B {group.b[:8]}, interleaved ({reason})"
            )
            ref = SeriesRef.of(finding.key)
            before = pool.bench_processes

            def shown(n: int, a: float, b: float, ref: SeriesRef = ref) -> None:
                say(f"  process {n}: A {ref.shown(a)}, B {ref.shown(b)}")

            history = all_series[finding.key].history
            verdict = confirm.run_confirmation(
                Cursor(pool, group.a, group.b, ref, on_round=shown).measure,
                one_process_noise(finding.noise, history, layout),
                claimed_pct=finding.percent,
                min_effect_pct=finding.min_effect_pct,
                start=min(start, max_processes),
                max_processes=max_processes,
            )
            say(f"  {verdict.summary()}")
            ran = pool.bench_processes - before
            say(
                f"  cost: {ran} new bench process(es) for this finding "
                f"({pool.bench_processes} for the pair so far, {pool.installs} install(s) "
                f"in {pool.install_s:.1f} s)"
            )
            record_verdict(
                project,
                finding,
                status=verdict.status,
                confirmation=ConfirmationRecord.of(verdict, group.a, group.b, reason),
            )
            if verdict.status == ReMeasureStatus.CONFIRMED and finding.status in TO_CONFIRM:
                confirmed.append((finding, group.a))
        pool.mark_judged()
        taken = f" and {pool.resumed} kept from a run cut short" if pool.resumed else ""
        say(
            f"pair {group.a[:8]}..{group.b[:8]}: {len(group.findings)} finding(s) judged from "
            f"{pool.bench_processes} bench processes{taken} ({pool.installs} install(s) in "
            f"{pool.install_s:.1f} s)"
        )
        if run_explain:
            for finding, _ in confirmed:
                _explain(project, finding, group.a, group.b, echo, bench_echo)


def unexplained(found: Sequence[Finding]) -> list[Finding]:
    """The confirmed findings of `found` whose confirmation no kernel (op) diff followed:
    confirmed with explain off (`fwdasv fleet-confirm`, `--no-explain`), or whose explain
    failed."""
    return [
        f
        for f in found
        if f.status == Status.CONFIRMED
        and f.confirmation_record is not None
        and f.explain_record is None
    ]


def explain_confirmed(
    project: AsvProject,
    found: Sequence[Finding],
    *,
    echo: Callable[[str], None] | None = print,
    bench_echo: Callable[[str], None] | None = None,
) -> None:
    """Explain each of `unexplained(found)` at the A and B its confirmation measured, as
    confirm would have; each diff appended to the verdicts file."""
    for finding in unexplained(found):
        record = finding.confirmation_record
        assert record is not None
        if echo is not None:
            echo(
                f"explain {finding.key.name} on {finding.key.machine}: confirmed at "
                f"{record.pair}, not explained yet"
            )
        _explain(project, finding, record.a_commit, record.b_commit, echo, bench_echo)


def _explain(
    project: AsvProject,
    finding: Finding,
    a: str,
    b: str,
    echo: Callable[[str], None] | None,
    bench_echo: Callable[[str], None] | None,
) -> None:
    """The kernel (op) diff of a confirmed finding, stored with its verdict; a failure is said
    and loses nothing recorded."""
    try:
        explained = explain.explain_commits(
            project, a, b, finding.key.benchmark, finding.key.case, echo=echo, bench_echo=bench_echo
        )
    except Exception as error:  # explaining must not lose the confirmation
        if echo is not None:
            echo(f"  explain failed: {type(error).__name__}: {error}")
        return
    record = explain.explain_record(explained.diff, a, b, explained.profile_dir)
    record_verdict(project, finding, status=Status.CONFIRMED, explain=record)
    if echo is not None:
        echo(f"  {record.headline}")
