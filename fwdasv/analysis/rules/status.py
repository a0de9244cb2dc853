"""The status words of every verdict, each defined once.

A member is the `str` the JSON, the verdicts file and the tables show (`StatusWord`:
`enum.StrEnum` for Python 3.10). Who says which:

    findings   regression, suspected, improvement, drift, confirmed, not-reproduced
    confirm    confirmed, not-reproduced, undecided (the A/B re-measure)
    compare    worse, improved, unchanged, not-significant, unknown, failed, fixed;
               telemetry (a series shown, never counted)
    bisect     a comparison: different, same, unknown; a probe: good, bad, part-way,
               unknown, failed

`unknown` and `failed` mean the same in compare and bisect. A finding's status is
decided in `finding_status` alone; what fails CI in `fwdasv.analysis.rules.gate`; what a
finding's status means: docs/verdicts.md.
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
    # A finding's status (fwdasv.analysis.findings.findings).
    REGRESSION = "regression"  # detected, not (yet) re-measured
    # At an edge of the history, the new level not held yet; or a large step the
    # history's noise is too uncertain to decide (fwdasv.analysis.rules.detect).
    SUSPECTED = "suspected"
    IMPROVEMENT = "improvement"  # a downward step: faster; never gates
    DRIFT = "drift"  # the machine changed, not the code
    CONFIRMED = "confirmed"  # the A/B re-measure reproduced it
    NOT_REPRODUCED = "not-reproduced"  # the A/B re-measure ruled it out
    # The A/B re-measure that neither confirms nor rules out (fwdasv.analysis.rules.confirm).
    UNDECIDED = "undecided"
    # Two commits compared (fwdasv.analysis.compare.compare).
    WORSE = "worse"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"  # significant, but within the factor (the floor)
    NOT_SIGNIFICANT = "not-significant"  # the noise (or the samples) cannot tell it from none
    TELEMETRY = "telemetry"  # clock, power, spread ...: shown, never counted worse or better
    FIXED = "fixed"  # failed at the first commit, measured at the second
    # Compare and bisect alike.
    UNKNOWN = "unknown"  # the samples cannot decide
    FAILED = "failed"  # the benchmark did not measure (compare: at the second commit)
    # Bisect (fwdasv.analysis.bisect.rules): one comparison, then one probe.
    DIFFERENT = "different"
    SAME = "same"
    GOOD = "good"
    BAD = "bad"
    PART_WAY = "part-way"


# The words each verdict may take, in the order they are listed.
FINDING_STATUSES = (
    Status.REGRESSION,
    Status.SUSPECTED,
    Status.CONFIRMED,
    Status.NOT_REPRODUCED,
    Status.DRIFT,
    Status.IMPROVEMENT,
)
# The findings a confirmation re-measures: detected slowdowns not yet re-measured.
TO_CONFIRM = (Status.REGRESSION, Status.SUSPECTED)
CONFIRMATION_STATUSES = (Status.CONFIRMED, Status.NOT_REPRODUCED, Status.UNDECIDED)
# The stored re-measures that replace a detected status (an undecided one leaves it).
RE_MEASURED = (Status.CONFIRMED, Status.NOT_REPRODUCED)


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
    if detected in (Status.DRIFT, Status.IMPROVEMENT):
        return detected  # a faster step is never drift by a canary, nor re-measured
    if machine_moved:
        return Status.DRIFT
    if re_measured in RE_MEASURED:
        return Status(re_measured)
    if untouched and detected == Status.REGRESSION:
        return Status.SUSPECTED
    return detected


# compare's display order: what needs attention first.
COMPARISON_STATUSES = (
    Status.WORSE,
    Status.FAILED,
    Status.IMPROVED,
    Status.FIXED,
    Status.UNKNOWN,
    Status.NOT_SIGNIFICANT,
    Status.UNCHANGED,
    Status.TELEMETRY,
)
STEP_OUTCOMES = (Status.DIFFERENT, Status.SAME, Status.UNKNOWN)
PROBE_VERDICTS = (Status.GOOD, Status.BAD, Status.PART_WAY, Status.UNKNOWN, Status.FAILED)
