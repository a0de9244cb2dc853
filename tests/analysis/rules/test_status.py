"""The status words: one enum per question, whose members are the strings the files and tables
always held."""

from __future__ import annotations

import csv
import io
import json

from fwdasv.analysis.rules.status import (
    COMPARISON_STATUSES,
    CONFIRMATION_STATUSES,
    FINDING_STATUSES,
    GROUPS,
    PROBE_VERDICTS,
    STEP_OUTCOMES,
    BisectStatus,
    CompareStatus,
    ReMeasureStatus,
    Status,
    status_word,
)

# Every word as the JSON, the verdicts file and the tables wrote it before the enum.
WORDS = {
    "REGRESSION": "regression",
    "SUSPECTED": "suspected",  # new: a step at the history's edge (issue 19)
    "IMPROVEMENT": "improvement",  # new: a downward step (issue 21)
    "DRIFT": "drift",
    "CONFIRMED": "confirmed",
    "NOT_REPRODUCED": "not-reproduced",
    "UNDECIDED": "undecided",
    "WORSE": "worse",
    "IMPROVED": "improved",
    "UNCHANGED": "unchanged",
    "NOT_SIGNIFICANT": "not-significant",
    "TELEMETRY": "telemetry",
    "FIXED": "fixed",
    "UNKNOWN": "unknown",
    "FAILED": "failed",
    "DIFFERENT": "different",
    "SAME": "same",
    "GOOD": "good",
    "BAD": "bad",
    "PART_WAY": "part-way",
}


def test_each_word_keeps_its_old_string_in_the_group_of_its_question() -> None:
    assert {s.name: s.value for group in GROUPS for s in group} == WORDS
    assert [s.value for s in Status] == [
        "regression",
        "suspected",
        "improvement",
        "drift",
        "confirmed",
        "not-reproduced",
    ]
    assert [s.value for s in ReMeasureStatus] == ["confirmed", "not-reproduced", "undecided"]
    # A word two questions share is one string: equal, and one key in a dict.
    assert ReMeasureStatus.CONFIRMED == Status.CONFIRMED
    assert {Status.CONFIRMED: 1}[ReMeasureStatus.CONFIRMED] == 1
    assert CompareStatus.UNKNOWN == BisectStatus.UNKNOWN == "unknown"


def test_json_csv_and_text_write_the_plain_value() -> None:
    document = {"status": Status.NOT_REPRODUCED, "counts": {CompareStatus.WORSE: 2}}
    assert json.dumps(document) == '{"status": "not-reproduced", "counts": {"worse": 2}}'
    assert json.dumps(document, sort_keys=True, indent=None).count("Status") == 0
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([BisectStatus.PART_WAY, BisectStatus.GOOD])
    assert buffer.getvalue() == "part-way,good\n"
    assert str(Status.CONFIRMED) == f"{Status.CONFIRMED}" == f"{Status.CONFIRMED}"
    assert f"{BisectStatus.BAD:>5}|" == "  bad|"
    assert Status.CONFIRMED == "confirmed" and "confirmed" in {Status.CONFIRMED}


def test_a_stored_word_reads_back_as_its_member() -> None:
    for group in GROUPS:
        for status in group:
            assert status_word(json.loads(json.dumps(status))) == status
    assert status_word("undecided") is ReMeasureStatus.UNDECIDED
    assert status_word("confirmed") is Status.CONFIRMED


def test_each_verdict_takes_its_own_words() -> None:
    assert [str(s) for s in FINDING_STATUSES] == [
        "regression",
        "suspected",
        "confirmed",
        "not-reproduced",
        "drift",
        "improvement",
    ]
    assert [str(s) for s in CONFIRMATION_STATUSES] == ["confirmed", "not-reproduced", "undecided"]
    assert [str(s) for s in COMPARISON_STATUSES] == [
        "worse",
        "failed",
        "improved",
        "fixed",
        "unknown",
        "not-significant",
        "unchanged",
        "telemetry",
    ]
    assert [str(s) for s in STEP_OUTCOMES] == ["different", "same", "unknown"]
    assert set(PROBE_VERDICTS) == {BisectStatus.GOOD, BisectStatus.BAD, BisectStatus.PART_WAY} | {
        CompareStatus.UNKNOWN,
        CompareStatus.FAILED,
    }


def test_a_findings_status_is_the_same_decided_at_once_or_fact_by_fact() -> None:
    """`finding_status`: drift by the environment over everything, an improvement kept, a
    canary's drift over a re-measure, a re-measure over the untouched hold-back."""
    import itertools

    from fwdasv.analysis.rules.status import finding_status

    facts = ("environment_changed", "machine_moved", "untouched")
    for detected in (Status.REGRESSION, Status.SUSPECTED, Status.IMPROVEMENT):
        for flags in itertools.product((False, True), repeat=3):
            for stored in (None, "confirmed", "not-reproduced", "undecided"):
                given = dict(zip(facts, flags, strict=True))
                at_once = finding_status(detected, re_measured=stored, **given)
                # As the findings apply them: drift, then the hold-back, then the verdict.
                step = detected
                for name in ("machine_moved", "environment_changed", "untouched"):
                    if given[name]:
                        step = finding_status(step, **{name: True})
                step = finding_status(step, re_measured=stored)
                assert at_once == step, (detected, given, stored, at_once, step)
    assert finding_status(Status.REGRESSION, untouched=True) == Status.SUSPECTED
    assert finding_status(Status.SUSPECTED, re_measured="confirmed") == Status.CONFIRMED
    assert finding_status(Status.IMPROVEMENT, machine_moved=True) == Status.IMPROVEMENT
    assert finding_status(Status.IMPROVEMENT, environment_changed=True) == Status.DRIFT
    # A speed-up's re-measure keeps it one, or sets it aside; it is never `confirmed`
    # (which would send it to bisect and the gate's confirmed count).
    assert finding_status(Status.IMPROVEMENT, re_measured="confirmed") == Status.IMPROVEMENT
    assert finding_status(Status.IMPROVEMENT, re_measured="undecided") == Status.IMPROVEMENT
    assert finding_status(Status.IMPROVEMENT, re_measured="not-reproduced") == (
        Status.NOT_REPRODUCED
    )
