"""bench/verdicts/verdict_quality.py at small scale meets its targets."""

from __future__ import annotations

from helpers import bench_script


def test_quality_script_meets_the_targets_at_small_scale() -> None:
    with bench_script("verdicts/verdict_quality.py") as quality:
        report = quality.evaluate(seed=3, histories=160, workers=1)
    rows = dict(report.rows())
    found05, found1, found2, false_alarm, env = (r.value for r in rows["fwdasv detect"])
    assert found1 >= 0.95 and found05 >= 0.65 and found2 >= 0.98, rows["fwdasv detect"]
    assert false_alarm <= 0.01 and env <= 0.03, rows["fwdasv detect"]
    confirmed = [r.value for r in rows["fwdasv detect + confirm"]]
    assert confirmed[1] >= 0.9 and confirmed[3] == 0 and confirmed[4] == 0, confirmed
    assert all(ok for _, ok in report.targets()), report.targets()
    # The edges (issue 19), with room for 160 histories' sampling error.
    edges = {name: [r.value for r in rates] for name, rates in report.edge_rows()}
    assert edges["head1-2%"][0] >= 0.93 and edges["head1-2x"][0] == 1.0, edges
    assert edges["head2-1%"][0] >= 0.88 and edges["head3-2%"][1] >= 0.93, edges
    assert edges["start2-2%"][0] >= 0.9, edges
    # Any finding on a step-free history: a level that comes back is two changes (issue 37),
    # so two odd commits in a row are listed `suspected` (7.3% at 300 histories, 9.4% at
    # these 160; 3.3% before the segmentation); none gates (<= 1.5% as regression) and the
    # simulated re-measure confirms none of them (below).
    assert edges["none (false alarms)"][0] <= 0.12 and edges["none (false alarms)"][1] <= 0.015
    none = report.of("none")
    assert not any(o.alarm_any_confirmed for o in none)  # suspected ones re-measured too
