"""A suite gone dark: measured before, nothing measured at its newest recorded commit.

asv records a benchmark that raised `NotImplementedError` in `setup` as skipped and one
that raised elsewhere as failed: neither is a value, and step detection reads only
values. When every case of a suite has no value at the newest commit asv recorded it at,
the newest commits are invisible to the findings, and a listing of "no regressions" says
nothing of them: the target's module was renamed, the forward bench went away, every case
started failing validation, the commit did not build. `gone_dark` finds that; the
commands that gate (regressions, confirm, nightly, fleet-nightly) name the suite and exit
2, as for a result file they could not read.

Not dark: a suite never measured on the machine (a pipeline suite on one GPU: skipped
from the start, as designed), one with a value in any case at its newest recorded commit
(`FWDASV_CASES` measures a subset; a case out of memory), and one with no record at a
newer commit (`asv run --bench` chose other suites; a suite taken out of benchmarks/).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Dark:
    """Commit indices of a suite gone dark: its newest recorded one (no case has a value
    there) and the newest one where a case had a value."""

    newest: int
    last_measured: int


def gone_dark(cases: Iterable[Sequence[Sequence[float] | None]]) -> Dark | None:
    """Whether a suite went dark (see the module). `cases` holds, for each of the suite's
    cases, a commit-ordered list: None where no result was recorded, else the values
    recorded (empty: skipped or failed). All lists have one length."""
    per_case = [list(case) for case in cases]
    recorded = [i for case in per_case for i, entry in enumerate(case) if entry is not None]
    if not recorded:
        return None
    newest = max(recorded)
    if any(case[newest] for case in per_case):
        return None
    measured = [i for case in per_case for i, entry in enumerate(case[:newest]) if entry]
    if not measured:
        return None
    return Dark(newest, max(measured))
