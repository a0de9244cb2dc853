"""The one gate: which statuses fail CI, and the exit status a list of verdicts maps to."""

from __future__ import annotations

import dataclasses

import pytest

from fwdasv.analysis.rules.gate import (
    COMPARISON,
    CONFIRMED_ONLY,
    FINDINGS,
    Gate,
    findings_gate,
    inside_steps,
    nightly_gate,
)
from fwdasv.analysis.rules.status import CompareStatus, ReMeasureStatus, Status
from fwdasv.core.errors import EXIT_FINDING, EXIT_OK, EXIT_UNREADABLE


def test_findings_fail_on_a_regression_or_a_confirmed_one() -> None:
    assert FINDINGS.failing == {Status.REGRESSION, Status.CONFIRMED}
    assert FINDINGS.exit_status([]) == EXIT_OK == 0
    assert FINDINGS.exit_status([Status.DRIFT, Status.NOT_REPRODUCED]) == 0
    assert FINDINGS.exit_status([Status.DRIFT, Status.REGRESSION]) == EXIT_FINDING == 1
    assert FINDINGS.exit_status(iter([Status.CONFIRMED])) == 1
    assert FINDINGS.count([Status.REGRESSION, Status.DRIFT, Status.CONFIRMED]) == 2
    # The words as stored in a file (plain strings) count the same.
    assert FINDINGS.fails("confirmed") and not FINDINGS.fails("undecided")
    assert FINDINGS.describe() == "regression or confirmed"


def test_nightly_with_confirmation_fails_only_on_confirmed_ones() -> None:
    assert nightly_gate(True) is CONFIRMED_ONLY and nightly_gate(False) is FINDINGS
    assert CONFIRMED_ONLY.exit_status([Status.REGRESSION, Status.NOT_REPRODUCED]) == 0
    assert CONFIRMED_ONLY.exit_status([Status.REGRESSION, Status.CONFIRMED]) == 1


def test_comparisons_fail_on_worse_or_newly_failing() -> None:
    assert (
        COMPARISON.exit_status(
            [CompareStatus.IMPROVED, CompareStatus.UNCHANGED, CompareStatus.UNKNOWN]
        )
        == 0
    )
    assert COMPARISON.exit_status([CompareStatus.FIXED]) == 0
    assert COMPARISON.exit_status([CompareStatus.UNCHANGED, CompareStatus.WORSE]) == 1
    assert COMPARISON.exit_status([CompareStatus.FAILED]) == 1
    assert COMPARISON.describe() == "worse or failed"


def test_a_gate_is_a_frozen_value_of_status_words() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        FINDINGS.failing = frozenset()  # type: ignore[misc]
    # Extending a rule is one more word in `failing`.
    wider = dataclasses.replace(FINDINGS, failing=FINDINGS.failing | {ReMeasureStatus.UNDECIDED})
    assert (
        wider.exit_status([ReMeasureStatus.UNDECIDED]) == 1
        and FINDINGS.exit_status([ReMeasureStatus.UNDECIDED]) == 0
    )
    with pytest.raises(AssertionError, match="not status words"):
        Gate("typo", frozenset({"regresion"}))  # type: ignore[arg-type]


def test_suspected_alone_passes_by_default_and_fails_when_asked() -> None:
    assert findings_gate().exit_status([Status.SUSPECTED, Status.DRIFT]) == EXIT_OK
    assert findings_gate(fail_on_suspected=True).exit_status([Status.SUSPECTED]) == EXIT_FINDING
    assert findings_gate().exit_status([Status.SUSPECTED, Status.REGRESSION]) == EXIT_FINDING
    assert nightly_gate(True).exit_status([Status.SUSPECTED]) == EXIT_OK
    assert nightly_gate(True, fail_on_suspected=True).exit_status([Status.SUSPECTED]) == 1
    assert nightly_gate(True).exit_status([Status.CONFIRMED]) == EXIT_FINDING


def test_an_improvement_never_fails_a_gate() -> None:
    gates = (FINDINGS, CONFIRMED_ONLY, findings_gate(True), nightly_gate(False, True))
    for gate in gates:
        assert gate.exit_status([Status.IMPROVEMENT]) == EXIT_OK, gate.name


def test_unreadable_results_exit_2_whatever_else_is_found() -> None:
    # A step at an unreadable file's commit is invisible, and one beside it can be misread:
    # "could not read" wins over "found a regression" (the README's exit-status rule).
    assert FINDINGS.exit_status([Status.REGRESSION], unreadable=1) == EXIT_UNREADABLE == 2
    assert FINDINGS.exit_status([Status.CONFIRMED, Status.DRIFT], unreadable=3) == 2
    assert FINDINGS.exit_status([], unreadable=1) == 2
    assert FINDINGS.exit_status([Status.REGRESSION], unreadable=0) == 1


def test_an_unreadable_file_inside_a_steps_range_is_named_with_the_step() -> None:
    step = (
        "bench.A.track_latency(x) 1111aaaa..3333cccc (drift)",
        "box",
        ["2222" * 10, "3333" * 10],
    )
    other = ("bench.B.track_latency(y) 5555eeee..6666ffff (regression)", "box", ["6666" * 10])
    elsewhere = ("bench.A.track_latency(x) on gpu", "gpu", ["2222" * 10])
    paths = [
        "/r/results/box/22222222-fwdasv-py3.11.json",  # inside the first step, on its machine
        "/r/results/box/44444444-fwdasv-py3.11.json",  # in no step's range
        "/r/results/gpu/66666666-fwdasv-py3.11.json",  # the second step's commit, other machine
    ]
    assert inside_steps(paths, [step, other, elsewhere]) == [(paths[0], step[0])]
    assert inside_steps([], [step]) == [] and inside_steps(paths, []) == []


def test_nightly_counts_what_nobody_triaged_and_acknowledged_only_when_strict() -> None:
    from fwdasv.analysis.rules.gate import counts_tonight

    assert counts_tonight(None) and counts_tonight("open")
    assert not counts_tonight("acknowledged") and counts_tonight("acknowledged", True)
    for closed in ("accepted", "fixed-by", "invalid"):
        assert not counts_tonight(closed) and not counts_tonight(closed, fail_on_open=True)
