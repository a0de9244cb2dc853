"""`fwdasv.analysis.findings.findings`: each series judged by its own noise (`judge_series`), on
numbers: no files and no git.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import confirmation_record

from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.findings.verdict_file import VERDICTS_FILE, StoredVerdicts
from fwdasv.analysis.findings.verdicts import apply_verdict
from fwdasv.analysis.rules.status import Status

# --- judge_series: the decision on numbers, no files and no git -----------------------------

ORDER = [f"{i:02d}" * 20 for i in range(12)]  # twelve fake 40-character hashes


def _series(
    benchmark: str, levels: list[float], case: str = "decode", unit: str = "seconds", seed: int = 0
) -> Series:
    """Five samples a commit around each level, 0.2% apart (seeded)."""
    import random

    rng = random.Random(seed)
    key = SeriesKey("box", "virtualenv-py3.11", benchmark, case)
    history = [[level * (1 + 0.002 * rng.gauss(0, 1)) for _ in range(5)] for level in levels]
    return Series(key, unit, {"case": case} if case else {}, history)


STEPPED = [1.0] * 6 + [1.05] * 6  # +5% at commit 6


def test_judge_series_finds_the_step_of_each_latency_series() -> None:
    latency = _series("bench.S.track_latency", STEPPED)
    flat = _series("bench.S.track_latency", [1.0] * 12, case="prefill", seed=1)
    spread = _series("bench.S.track_spread_pct", STEPPED, unit="unit", seed=2)
    canary = _series("bench.CanaryS.track_latency", STEPPED, case="", seed=3)
    everything = {s.key: s for s in (latency, flat, spread, canary)}

    found = findings.judge_series(ORDER, {latency.key: latency, flat.key: flat, spread.key: spread})
    (finding,) = found  # not the flat case, not a series in another unit
    assert finding.key == latency.key and finding.status == Status.REGRESSION
    assert (finding.before_commit, finding.after_commit) == (ORDER[5], ORDER[6])
    assert 4.5 < finding.percent < 5.5 and finding.latest == pytest.approx(1.05, rel=0.01)
    assert finding.gating and finding.commits == () and finding.verdict is None
    assert finding.graph_params == {}  # the I/O edge (`find`) adds what asv publishes under

    # The machine's canary stepped at the same commit: drift, which does not gate; the
    # canary itself is never a finding.
    (drift,) = findings.judge_series(ORDER, everything)
    assert drift.key == latency.key and drift.status == Status.DRIFT and not drift.gating
    # A minimum effect above the step, or a filter that leaves the series out: nothing.
    assert findings.judge_series(ORDER, everything, min_effect_pct=6) == []
    assert findings.judge_series(ORDER, everything, include=lambda k: k.case == "prefill") == []


def test_a_paced_case_is_judged_by_its_relative_series_in_place_of_its_latency() -> None:
    # A paced suite (`reference = True`): its latency steps +30% at commit 6 with the
    # machine, its forward over the workload does not; an unpaced suite's latency is
    # judged as before, and a ratio of another name is telemetry.
    machine_step = [1.0] * 6 + [1.3] * 6
    latency = _series("bench.Paced.track_latency", machine_step)
    relative = _series("bench.Paced.track_relative", [2.0] * 12, unit="ratio", seed=1)
    other = _series("bench.Plain.track_latency", machine_step, seed=2)
    odd = _series("bench.Paced.track_odd", machine_step, unit="ratio", seed=3)
    everything = {s.key: s for s in (latency, relative, other, odd)}
    assert findings.judged_series(everything) == [relative.key, other.key]
    (found,) = findings.judge_series(ORDER, everything)
    assert found.key == other.key
    # The code slows the forward: the ratio steps, and that is the paced case's finding.
    slower = _series("bench.Paced.track_relative", [2.0] * 6 + [2.1] * 6, unit="ratio", seed=1)
    (paced,) = findings.judge_series(ORDER, {latency.key: latency, slower.key: slower})
    assert paced.key == slower.key and paced.status == Status.REGRESSION
    assert paced.after_commit == ORDER[6] and 4.5 < paced.percent < 5.5
    # Without its relative series (an older result) the case's latency is judged again.
    (plain,) = findings.judge_series(ORDER, {latency.key: latency})
    assert plain.key == latency.key and plain.percent > 25

    # The load rose at the same commit: the canary's latency stepped +30% with the
    # paced case's. The ratio has the machine's speed divided out, so that is no drift
    # of it; the canary's own ratio stepping with it is (the load slowed the forward
    # more than the workload).
    canary = _series("bench.CanaryS.track_latency", machine_step, case="", seed=4)
    both = {latency.key: latency, slower.key: slower, canary.key: canary}
    (still,) = findings.judge_series(ORDER, both)
    assert still.key == slower.key and still.status == Status.REGRESSION
    canary_ratio = _series(
        "bench.CanaryS.track_relative", [1.0] * 6 + [1.05] * 6, case="", unit="ratio", seed=5
    )
    (drift,) = findings.judge_series(ORDER, {**both, canary_ratio.key: canary_ratio})
    assert drift.key == slower.key and drift.status == Status.DRIFT
    # An unpaced case's latency is still told by the canary's latency.
    (told,) = findings.judge_series(ORDER, {other.key: other, canary.key: canary})
    assert told.status == Status.DRIFT


def test_a_step_at_the_head_is_found_now_and_keeps_its_identity_and_confirmation(
    tmp_path: Path,
) -> None:
    from fwdasv.analysis.findings.verdict_file import FindingVerdict, append_verdict, read_verdicts

    order = [f"{i:02d}" * 20 for i in range(16)]
    levels = [1.0] * 12 + [1.03] * 4  # +3% at commit 12
    full = _series("bench.S.track_latency", levels)

    def judged(commits: int) -> Finding:
        part = Series(full.key, full.unit, full.params, full.history[:commits])
        (only,) = findings.judge_series(order[:commits], {part.key: part})
        return only

    night = judged(13)  # the night the step lands: one commit shows it
    assert (night.status, night.showing_commits, night.step.edge) == (Status.SUSPECTED, 1, "head")
    assert night.after_commit == order[12] and not night.gating
    assert "suspected (1 commit)" in format_findings([night], "table")
    two = judged(14)
    assert (two.status, two.showing_commits, two.ident) == (Status.REGRESSION, 2, night.ident)
    assert two.gating
    # Confirmed the night it landed (as nightly does), then the level holds: the same
    # finding (series and first new commit), its confirmation kept.
    path = tmp_path / VERDICTS_FILE
    record = confirmation_record([1.031, 1.0305, 1.0315], night)
    append_verdict(
        path,
        FindingVerdict(
            ident=night.ident,
            recorded_at="2026-12-02T00:00:00Z",
            before_commit=night.before_commit,
            range_commits=(night.after_commit,),
            status=Status.CONFIRMED,
            confirmation=record,
        ),
    )
    held = apply_verdict(judged(16), read_verdicts(path))
    assert held.step.edge is None and held.ident == night.ident
    assert held.status == Status.CONFIRMED and held.verdict.confirmation == record
    shown = held.to_json()["re_measured"]
    assert shown["pair"] == f"{night.before_commit[:8]}..{night.after_commit[:8]}"
    assert "re-measured" in format_findings([held], "table")


def test_improvements_are_findings_of_their_own_that_never_gate() -> None:
    faster = _series("bench.S.track_latency", [1.0] * 6 + [0.9] * 6)
    assert findings.judge_series(ORDER, {faster.key: faster}) == []  # not a regression
    (found,) = findings.judge_series(ORDER, {faster.key: faster}, improvements=True)
    assert found.status == Status.IMPROVEMENT and found.after_commit == ORDER[6]
    assert found.percent == pytest.approx(-10, abs=0.5) and not found.gating
    # A stored verdict never turns an improvement into something else.
    assert apply_verdict(found, StoredVerdicts({})) == found


def test_a_step_where_the_recorded_torch_or_driver_changed_is_drift() -> None:
    old, new = ("2.14.1", "570.1", "12.8"), ("2.14.0", "570.1", "12.8")
    for environments, status in [
        # torch changed (another environment installed it) at the step's commit: drift.
        ([old] * 6 + [new] * 6, Status.DRIFT),
        # A driver update at the step's commit: drift too.
        ([old] * 6 + [("2.14.1", "575.0", "12.8")] * 6, Status.DRIFT),
        # Changed elsewhere in the history, not across the step: the step stays a regression.
        ([old] * 3 + [new] * 9, Status.REGRESSION),
        # Not recorded (results of an older fwdasv): nothing to tell.
        ([None] * 12, Status.REGRESSION),
    ]:
        latency = _series("bench.S.track_latency", STEPPED)
        latency = Series(latency.key, latency.unit, latency.params, latency.history, environments)
        (finding,) = findings.judge_series(ORDER, {latency.key: latency})
        assert finding.status == status, environments
        assert finding.gating == (status == Status.REGRESSION)


def test_judge_series_takes_a_fallen_gpu_clock_for_drift() -> None:
    latency = _series("bench.S.track_latency", STEPPED)
    clock = _series(
        "bench.S.track_sm_clock_mhz", [1980.0] * 6 + [1980 / 1.05] * 6, unit="MHz", seed=4
    )
    (finding,) = findings.judge_series(ORDER, {latency.key: latency, clock.key: clock})
    assert finding.status == Status.DRIFT
    other_case = _series(
        "bench.S.track_sm_clock_mhz", clock.medians(), case="prefill", unit="MHz", seed=5
    )
    (finding,) = findings.judge_series(ORDER, {latency.key: latency, other_case.key: other_case})
    assert finding.status == Status.REGRESSION  # another case's clock says nothing
