"""A pull-request check's word for one case: HEAD against BASE, from confirm's A/B verdict.

`fwdasv check` measures BASE and HEAD interleaved and judges each case by confirm's rule
(`fwdasv.analysis.rules.confirm.judge_ab`, no claimed step). `check_status` reads that
verdict as the words `fwdasv compare` uses: `worse` (confirmed, the estimate at least
`min_effect_pct`: the one word the check fails on, `gate.COMPARISON`), `unchanged`
(ruled out, or a real change smaller than `min_effect_pct`), `improved` (ruled out and
the whole interval below zero), `undecided` (the processes allowed could not tell).
"""

from __future__ import annotations

from fwdasv.analysis.rules.confirm import Confirmation
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus


def check_status(verdict: Confirmation, min_effect_pct: float) -> CompareStatus | ReMeasureStatus:
    """The case's word (see the module)."""
    if verdict.status == ReMeasureStatus.CONFIRMED:
        return CompareStatus.WORSE if verdict.percent >= min_effect_pct else CompareStatus.UNCHANGED
    if verdict.status == ReMeasureStatus.NOT_REPRODUCED:
        return CompareStatus.IMPROVED if verdict.upper_pct < 0 else CompareStatus.UNCHANGED
    return ReMeasureStatus.UNDECIDED
