"""bench/verdicts/busy_verdicts.py at small scale: busy short histories find a doubled head
and stay quiet without one.
"""

from __future__ import annotations

from helpers import bench_script


def test_busy_short_histories_find_a_doubled_head_and_stay_quiet_without_one() -> None:
    """bench/verdicts/busy_verdicts.py at small scale: 8-commit histories at a busy box's noise
    (3-12% a commit, 10% of commits +10-40% slow). A +60% level of the newest 3 commits
    is a regression in most of them (89% at 2000 histories); no step, almost never one."""
    with bench_script("verdicts/busy_verdicts.py") as busy:
        outcomes = busy.evaluate(seed=2, histories=60, commits=8, workers=1)

    def share(scenario: str, flag: str) -> float:
        mine = [getattr(o, flag) for o in outcomes if o.scenario == scenario]
        return sum(mine) / len(mine)

    assert share("head3+60%", "found_regression") >= 0.8
    assert share("head1+60%", "found_regression") == 0  # one commit: suspected at most
    assert share("none", "alarm") <= 1 / 60 and share("none", "alarm_confirmed") <= 1 / 60
    assert share("head3+60%", "asv_found") <= 0.5  # asv's 5% threshold, the same histories
