"""`rules.dark.gone_dark`: a suite measured before with no value in any case at its newest
recorded commit; never one measured nowhere, or one a case still measures."""

from __future__ import annotations

from fwdasv.analysis.rules.dark import Dark, gone_dark

V = [1.0, 1.1]  # a commit's values
E: list[float] = []  # a record without a value: skipped or failed
N = None  # no record at that commit


def test_every_case_empty_at_the_newest_record_after_values_is_dark() -> None:
    assert gone_dark([[V, V, E], [V, E, E]]) == Dark(newest=2, last_measured=1)
    # Commits the suite has no record at (asv run --bench chose others) do not count.
    assert gone_dark([[V, E, N, N], [V, V, E, N]]) == Dark(newest=2, last_measured=1)


def test_a_case_with_a_value_at_the_newest_record_keeps_the_suite_lit() -> None:
    assert gone_dark([[V, V, E], [V, E, V]]) is None  # FWDASV_CASES: a subset measured
    assert gone_dark([[V, E, V], [E, E, V]]) is None  # dark in between, measured again


def test_a_suite_never_measured_or_never_recorded_is_not_dark() -> None:
    assert gone_dark([[E, E, E], [E, E, E]]) is None  # a pipeline suite on one GPU
    assert gone_dark([[N, N], [N, N]]) is None
    assert gone_dark([]) is None
