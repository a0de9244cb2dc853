"""The status words of every verdict, each defined once, grouped by the question answered.

A member is the `str` the JSON, the verdicts file and the tables show (`StatusWord`:
`enum.StrEnum` for Python 3.10). One enum per question:

    Status            a finding's: regression, suspected, improvement, drift, confirmed,
                      not-reproduced (decided in `finding_status` alone)
    ReMeasureStatus   an A/B re-measure's: confirmed, not-reproduced, undecided
    CompareStatus     a comparison's: worse, improved, unchanged, not-significant,
                      telemetry (shown, never counted), fixed, unknown, failed
    BisectStatus      a bisect's: a comparison different, same, unknown; a probe good,
                      bad, part-way, unknown, failed
    TriageState       what a person said: acknowledged, accepted, fixed-by, invalid, open

What fails CI: `fwdasv.analysis.rules.gate`; what each word means: docs/verdicts.md.
"""

from __future__ import annotations

from enum import Enum


class StatusWord(str, Enum):
    """`enum.StrEnum` for Python 3.10: members are their values wherever text is wanted."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Status(StatusWord):
    """A finding's status (`fwdasv.analysis.findings.findings`, decided by `finding_status`)."""

    REGRESSION = "regression"  # detected, not (yet) re-measured
    # At an edge of the history, the new level not held yet; or a large step the
    # history's noise is too uncertain to decide (fwdasv.analysis.rules.detect).
    SUSPECTED = "suspected"
    IMPROVEMENT = "improvement"  # a downward step: faster; never gates (still one once
    # its re-measure confirmed it; `not-reproduced` once it ruled it out)
    DRIFT = "drift"  # the machine changed, not the code
    CONFIRMED = "confirmed"  # the A/B re-measure reproduced it
    NOT_REPRODUCED = "not-reproduced"  # the A/B re-measure ruled it out


class ReMeasureStatus(StatusWord):
    """What an interleaved A/B re-measure said (`fwdasv.analysis.rules.confirm`)."""

    CONFIRMED = "confirmed"
    NOT_REPRODUCED = "not-reproduced"
    UNDECIDED = "undecided"  # neither confirms nor rules out


class CompareStatus(StatusWord):
    """Two commits compared, per series (`fwdasv.analysis.compare.compare`)."""

    WORSE = "worse"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"  # significant, but within the factor (the floor)
    NOT_SIGNIFICANT = "not-significant"  # the noise (or the samples) cannot tell it from none
    TELEMETRY = "telemetry"  # clock, power, spread ...: shown, never counted worse or better
    FIXED = "fixed"  # failed at the first commit, measured at the second
    UNKNOWN = "unknown"  # the samples cannot decide
    FAILED = "failed"  # the benchmark did not measure at the second commit


class BisectStatus(StatusWord):
    """Bisect's words (`fwdasv.analysis.bisect.rules`): one comparison, then one probe."""

    DIFFERENT = "different"
    SAME = "same"
    GOOD = "good"
    BAD = "bad"
    PART_WAY = "part-way"
    UNKNOWN = "unknown"  # the samples cannot decide
    FAILED = "failed"  # the benchmark did not measure


class TriageState(StatusWord):
    """What a person said of a finding (`fwdasv triage`), kept beside its status."""

    ACKNOWLEDGED = "acknowledged"  # known, being looked at (a note, an issue link)
    ACCEPTED = "accepted"  # an intended trade-off: the new level is the level
    FIXED_BY = "fixed-by"  # a later commit brought the old level back, re-measured
    INVALID = "invalid"  # not a regression of the code (a broken benchmark, a setup change)
    OPEN = "open"  # untriaged again (an earlier state withdrawn)


GROUPS: tuple[type[StatusWord], ...] = (Status, ReMeasureStatus, CompareStatus, BisectStatus)


def status_word(word: str) -> StatusWord:
    """The word as its group's member (a finding's first: `confirmed` is one); ValueError
    for a word no group has."""
    for group in GROUPS:
        try:
            return group(word)
        except ValueError:
            continue
    raise ValueError(f"{word!r} is not a status word")


# The words each verdict may take, in the order they are listed.
FINDING_STATUSES = (
    Status.REGRESSION,
    Status.SUSPECTED,
    Status.CONFIRMED,
    Status.NOT_REPRODUCED,
    Status.DRIFT,
    Status.IMPROVEMENT,
)
# The findings a confirmation re-measures: detected slowdowns not yet re-measured (and
# speed-ups not yet re-measured, `fwdasv.analysis.findings.finding.to_re_measure`).
TO_CONFIRM = (Status.REGRESSION, Status.SUSPECTED)
CONFIRMATION_STATUSES = tuple(ReMeasureStatus)
# The stored re-measures that replace a detected status (an undecided one leaves it).
RE_MEASURED = (ReMeasureStatus.CONFIRMED, ReMeasureStatus.NOT_REPRODUCED)


def finding_status(
    detected: Status,
    *,
    machine_moved: bool = False,
    environment_changed: bool = False,
    untouched: bool = False,
    re_measured: str | None = None,
) -> Status:
    """A finding's status from what each rule found; the one place it is decided.

    `detected`: the history's rules' (`fwdasv.analysis.rules.detect`: regression,
    suspected, improvement), or the status so far; `machine_moved`: a canary or the GPU
    clock stepped with it (`rules.drift.mark_drift`); `environment_changed`: the recorded
    torch, driver or CUDA differs across it (`mark_environment_drift`); `untouched`: a
    host-timed step whose commits change nothing the bench imported
    (`fwdasv.analysis.findings.untouched`); `re_measured`: the newest stored A/B verdict.
    Applied all at once or one fact at a time, the answer is the same.
    """
    if environment_changed:
        return Status.DRIFT
    if detected == Status.IMPROVEMENT:
        # A faster step is never drift by a canary; a re-measure can only set it aside.
        if re_measured == ReMeasureStatus.NOT_REPRODUCED:
            return Status.NOT_REPRODUCED
        return detected
    if detected == Status.DRIFT:
        return detected
    if machine_moved:
        return Status.DRIFT
    if re_measured in RE_MEASURED:
        return Status(re_measured)
    if untouched and detected == Status.REGRESSION:
        return Status.SUSPECTED
    return detected


# compare's display order: what needs attention first.
COMPARISON_STATUSES = (
    CompareStatus.WORSE,
    CompareStatus.FAILED,
    CompareStatus.IMPROVED,
    CompareStatus.FIXED,
    CompareStatus.UNKNOWN,
    CompareStatus.NOT_SIGNIFICANT,
    CompareStatus.UNCHANGED,
    CompareStatus.TELEMETRY,
)
STEP_OUTCOMES = (BisectStatus.DIFFERENT, BisectStatus.SAME, BisectStatus.UNKNOWN)
PROBE_VERDICTS = (
    BisectStatus.GOOD,
    BisectStatus.BAD,
    BisectStatus.PART_WAY,
    BisectStatus.UNKNOWN,
    BisectStatus.FAILED,
)
