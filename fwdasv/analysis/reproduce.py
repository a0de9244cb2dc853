"""`fwdasv confirm`: each finding re-measured as an interleaved A/B on this machine, then explained.

For a finding (`fwdasv.analysis.findings`), the commits just outside its step
(`fwdasv.analysis.confirm.ab_indices`: A at the old level, B at the new) are
installed once each, into an environment of its own (`fwdasv.asv.install`),
and measured one bench process at a time, A B A B ..., so both see the same
machine in the same minutes. The verdict is on the process-level medians
(`fwdasv.analysis.confirm`), with more processes while undecided (up to
`max_processes` a side), and is appended to the verdicts file. A confirmed finding
is then explained: the case profiled at A and at B, and the kernel (or op) diff
stored with the verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fwdasv.analysis import confirm, explain, findings
from fwdasv.analysis.finding import Finding
from fwdasv.analysis.finding_verdicts import record_verdict
from fwdasv.analysis.remeasure import Remeasurer, resolve
from fwdasv.analysis.series import RELATIVE_METRIC, load_series
from fwdasv.analysis.status import TO_CONFIRM, Status
from fwdasv.analysis.verdict_file import ConfirmationRecord
from fwdasv.asv.project import AsvProject


@dataclass
class Interleaved:
    """A and B measured alternately, one bench process each, A first."""

    measurer: Remeasurer
    a: str
    b: str
    say: Callable[[str], None]
    processes: int = 0

    def measure(self, k: int) -> tuple[list[float], list[float]]:
        more_a, more_b = [], []
        for _ in range(k):
            self.processes += 1
            more_a.append(self.measurer.process_median(self.a, f"a{self.processes}"))
            more_b.append(self.measurer.process_median(self.b, f"b{self.processes}"))
            self.say(
                f"  process {self.processes}: A {self._shown(more_a[-1])}, "
                f"B {self._shown(more_b[-1])}"
            )
        return more_a, more_b

    def _shown(self, value: float) -> str:
        if self.measurer.relative:
            return f"{value:.4f} (forward / workload)"
        return f"{value * 1e6:.2f} us"


def processes_per_commit(
    history: Sequence[Sequence[float]], samples_per_process: int, launches: int
) -> int:
    """How many bench processes each history commit pooled: its stored samples over the
    samples one process gives (the median commit), so commits that asv's
    `--append-samples` measured again (bisect, a second round) count all their
    processes; `launches` (the suite's) when nothing is stored."""
    counts = sorted(len(samples) for samples in history if samples)
    if not counts or samples_per_process < 1:
        return launches
    return max(1, round(counts[len(counts) // 2] / samples_per_process))


def confirm_findings(
    project: AsvProject,
    found: Sequence[Finding],
    *,
    max_processes: int = confirm.MAX_PROCESSES,
    start: int = confirm.MIN_PROCESSES,
    run_explain: bool = True,
    echo: Callable[[str], None] | None = print,
    bench_echo: Callable[[str], None] | None = None,
) -> list[Finding]:
    """Re-measure every `regression` and `suspected` among `found`; returns the findings as
    now judged."""

    def say(line: str) -> None:
        if echo is not None:
            echo(line)

    pending = [f for f in found if f.status in TO_CONFIRM]
    if not pending:
        say("nothing to confirm: no finding has status 'regression' or 'suspected'")
        return list(found)
    order, all_series = load_series(project)
    for number, finding in enumerate(pending, 1):
        medians = all_series[finding.key].medians()
        a_index, b_index = confirm.ab_indices(finding.step, medians)
        a, b = order[a_index], order[b_index]
        target = resolve(project, finding.key.benchmark, finding.key.case)
        workdir = project.results_dir.parent / ".fwdasv-confirm" / f"{a[:8]}-{b[:8]}"
        measurer = Remeasurer(
            project,
            target,
            workdir,
            echo=echo,
            bench_echo=bench_echo,
            relative=finding.key.metric == RELATIVE_METRIC,
        )
        reason = confirm.pair_reason(finding.step, a_index, b_index)
        say(
            f"[{number}/{len(pending)}] {finding.key.name} on {finding.key.machine}: "
            f"{finding.status} {finding.percent:+.2f}% at {finding.range_label}; re-measuring "
            f"A {a[:8]} and B {b[:8]}, interleaved ({reason})"
        )
        interleaved = Interleaved(measurer, a, b, say)
        processes = processes_per_commit(
            all_series[finding.key].history,
            target.config.samples,
            int(getattr(target.suite_class, "launches", 1)) or 1,
        )
        verdict = confirm.run_confirmation(
            interleaved.measure,
            finding.noise.per_process(processes),
            claimed_pct=finding.percent,
            min_effect_pct=finding.min_effect_pct,
            start=min(start, max_processes),
            max_processes=max_processes,
        )
        say(f"  {verdict.summary()}")
        say(
            f"  cost: {measurer.installs} install(s) in {measurer.install_s:.1f} s, "
            f"{interleaved.processes * 2} bench processes"
        )
        status = verdict.status
        record_verdict(
            project,
            finding,
            status=status,
            confirmation=ConfirmationRecord.of(verdict, a, b, reason),
        )
        if status == Status.CONFIRMED and run_explain:
            try:
                explained = explain.explain_commits(
                    project,
                    a,
                    b,
                    finding.key.benchmark,
                    finding.key.case,
                    echo=echo,
                    bench_echo=bench_echo,
                )
            except Exception as error:  # explaining must not lose the confirmation
                say(f"  explain failed: {type(error).__name__}: {error}")
            else:
                record = explain.explain_record(explained.diff, a, b, explained.profile_dir)
                record_verdict(project, finding, status=status, explain=record)
                say(f"  {record.headline}")
    return findings.find(project)
