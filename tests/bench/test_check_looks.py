"""bench/verdicts/check_looks.py at small scale: the check's looks, before and after they
stopped on the run's own spread, on the same simulated process medians."""

from __future__ import annotations

import numpy as np
from helpers import bench_script


def test_a_quiet_gpus_slowdowns_are_caught_and_a_busy_boxs_no_ops_stay_quiet() -> None:
    """200 pairs a cell (docs/measurements.md section 32 has 1000): at 0.1% spread a 1%
    slowdown was `worse` about 5% of the time before and always after; a no-op pair is
    never `worse`; at a busy box's 5% spread a no-op pair stays about one look and rarely
    `worse`."""
    with bench_script("verdicts/check_looks.py") as looks:
        rng = np.random.default_rng(3)

        def draws(spread_pct: float, step_pct: float) -> list[tuple[list[float], list[float]]]:
            noise = rng.standard_normal((200, 2, 24)) * spread_pct / 100
            return [
                (list(1000 * (1 + d[0])), list(1000 * (1 + step_pct / 100) * (1 + d[1])))
                for d in noise
            ]

        def share(words: dict[str, int], word: str) -> float:
            return words.get(word, 0) / 200

        quiet_step = draws(0.1, 1.0)
        before, _ = looks.run(looks.judged_before, quiet_step, 12)
        after, processes = looks.run(looks.check._judged, quiet_step, 12)
        assert share(before, "worse") <= 0.2 and share(after, "worse") >= 0.98, (before, after)
        assert 3 < processes <= 12
        quiet_same, _ = looks.run(looks.check._judged, draws(0.1, 0.0), 12)
        assert share(quiet_same, "worse") == 0, quiet_same
        busy_same, busy_processes = looks.run(looks.check._judged, draws(5.0, 0.0), 12)
        assert share(busy_same, "worse") <= 0.02 and busy_processes <= 5, (
            busy_same,
            busy_processes,
        )
