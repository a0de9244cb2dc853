"""bench/fleet/interleaved_quality.py at small scale: a large step inside the history (2N
commits from either end) is found on a fleet's interleaved series within a GPU's own
bracket (N commits), confirmed on its GPU and bisected there to its commit, as one machine
over every commit finds it at the commit; a step-free history leaves nothing confirmed."""

from __future__ import annotations

from helpers import bench_script


def test_a_large_step_on_interleaved_series_is_bracketed_then_bisected_to_its_commit() -> None:
    with bench_script("fleet/interleaved_quality.py") as bench:
        # Steps >= 10x the noise, 16+ commits from either end: every way should find them.
        drawn = (bench.run(("step", 1, i)) for i in range(16))
        large = [o for o in drawn if o.large and 16 <= o.truth <= o.commits - 16][:2]
        clean = bench.run(("none", 1, 0))
    assert large, "no large step inside the history among the first 16 seeds"
    for outcome in large:
        assert set(outcome.ways) == {"1", "2", "2 pooled", "4", "4 pooled", "8", "8 pooled"}
        for n in (1, 2, 4, 8):
            judged = outcome.ways[str(n)]
            assert judged.found and judged.confirmed and judged.exact, (n, judged)
            assert judged.width <= 2 * n and not judged.bisect_wrong, (n, judged)
        assert outcome.ways["1"].width == 1
    assert not any(w.false_confirmed for w in clean.ways.values()), clean
