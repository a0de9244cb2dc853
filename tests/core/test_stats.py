"""Latency statistics (vLLM's formulas) and the significance test (asv's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from asv import _stats as asv_stats

from fwdasv.core.stats import (
    SIGNIFICANCE,
    UNSTABLE_SPREAD_PCT,
    Latency,
    is_different,
    mann_whitney_u,
    min_samples_for_significance,
    spread_pct,
)

# --- Latency -------------------------------------------------------------------------


def vllm_latency(times: np.ndarray, samples: int) -> dict[str, float]:
    """The `latency_us` numbers as reference section 2 defines them, by hand."""
    blocks = times.reshape(samples, len(times) // samples)  # row-major: consecutive replays
    block_medians = np.array([np.median(row) for row in blocks])
    median = np.median(times)
    return {
        "median": median,
        "sample_spread_pct": 100 * (block_medians.max() - block_medians.min()) / median,
        "mean": times.sum() / len(times),
        "std": np.sqrt(((times - times.mean()) ** 2).mean()),  # ddof 0
        "min": times.min(),
        "p90": np.percentile(times, 90),
        "count": len(times),
    }


@pytest.mark.parametrize(("iters", "samples"), [(20, 5), (7, 3), (1, 1), (10, 1), (1, 12)])
def test_from_replays_matches_vllm_formulas(iters, samples):
    rng = np.random.default_rng(iters * 100 + samples)
    # A drift so the blocks' medians differ, as on a warming GPU.
    times = 1000 + rng.normal(0, 5, iters * samples) + np.linspace(0, 30, iters * samples)
    latency = Latency.from_replays(times.tolist(), samples, "graph_events")
    expected = vllm_latency(times, samples)
    for key, value in expected.items():
        assert getattr(latency, key) == pytest.approx(value, rel=1e-12, abs=1e-12), key
    assert latency.timer == "graph_events"
    assert latency.samples_us == tuple(times.tolist())


def test_spread_uses_consecutive_blocks_not_strided_ones():
    # Blocks [1,1,1], [2,2,2]: spread 100 * (2 - 1) / 1.5. A strided split would give 0.
    latency = Latency.from_replays([1, 1, 1, 2, 2, 2], 2, "host_perf_counter")
    assert latency.sample_spread_pct == pytest.approx(100 / 1.5)
    assert latency.block_medians(2) == [1.0, 2.0]


def test_spread_is_zero_with_one_sample():
    latency = Latency.from_replays([5.0, 1.0, 9.0, 3.0], 1, "host_perf_counter")
    assert latency.sample_spread_pct == 0.0
    assert not latency.unstable


def test_unstable_above_half_a_percent():
    steady = Latency.from_replays([100.0, 100.0, 100.4, 100.4], 2, "t")
    shaky = Latency.from_replays([100.0, 100.0, 100.6, 100.6], 2, "t")
    assert steady.sample_spread_pct == pytest.approx(0.4 / 100.2 * 100)
    assert not steady.unstable
    assert shaky.unstable
    assert UNSTABLE_SPREAD_PCT == 0.5


@pytest.mark.parametrize(("count", "samples"), [(0, 1), (10, 3), (10, 0), (10, -1)])
def test_from_replays_refuses_uneven_blocks(count, samples):
    with pytest.raises(ValueError, match="samples"):
        Latency.from_replays([1.0] * count, samples, "t")


def test_block_medians_are_per_block_of_consecutive_replays():
    times = [3.0, 1.0, 2.0, 10.0, 30.0, 20.0, 5.0, 5.0, 6.0]
    latency = Latency.from_replays(times, 3, "t")
    assert latency.block_medians(3) == [2.0, 20.0, 5.0]
    assert latency.block_medians(1) == [5.0]
    assert latency.block_medians(9) == times
    with pytest.raises(ValueError, match="9 replay times"):
        latency.block_medians(2)


def test_to_json_from_json_round_trip():
    rng = np.random.default_rng(1)
    latency = Latency.from_replays((rng.random(12) * 1000).tolist(), 4, "graph_events")
    raw = latency.to_json()
    assert Latency.from_json(raw) == latency
    rounded = latency.rounded().to_json()
    assert rounded["samples_us"] == [round(t, 2) for t in latency.samples_us]
    back = Latency.from_json(rounded)
    assert back.samples_us == tuple(round(t, 2) for t in latency.samples_us)
    assert back == latency.rounded() and back.rounded() == back
    assert {k: v for k, v in rounded.items() if k != "samples_us"} == {
        k: v for k, v in raw.items() if k != "samples_us"
    }
    assert set(rounded) == {
        "timer",
        "median",
        "sample_spread_pct",
        "mean",
        "std",
        "min",
        "p90",
        "count",
        "samples_us",
    }


def test_cv_and_summary():
    latency = Latency.from_replays([9.0, 11.0], 1, "host_perf_counter")
    assert latency.cv == pytest.approx(0.1)
    assert latency.summary() == (
        "median 10.0 us, sample spread 0.00%, cv 10.00%, n=2 (host_perf_counter)"
    )


def test_spread_pct_edge_cases():
    assert spread_pct([], 10.0) == 0.0
    assert spread_pct([4.0, 6.0], 5.0) == pytest.approx(40.0)


# --- Mann-Whitney U, against asv's implementation -------------------------------------


def sample_pairs():
    """(x, y) pairs: continuous, heavy ties, small and large, shifted and not."""
    rng = np.random.default_rng(20240601)
    sizes = [(1, 1), (1, 5), (2, 3), (3, 3), (5, 5), (6, 6), (7, 7), (4, 12), (10, 10)]
    sizes += [(20, 20), (13, 20), (20, 21), (21, 21), (30, 25), (50, 50), (120, 80)]
    pairs = []
    for m, n in sizes:
        for shift in (0.0, 0.3, 1.5):
            x = rng.normal(0, 1, m)
            y = rng.normal(shift, 1, n)
            pairs.append((x.tolist(), y.tolist()))
            # Ties within and across samples: integer buckets.
            pairs.append((np.round(x).tolist(), np.round(y).tolist()))
            pairs.append((np.round(2 * x).tolist(), np.round(2 * y + shift).tolist()))
    pairs.append(([1.0] * 8, [1.0] * 8))  # all tied
    pairs.append(([1.0] * 25, [1.0] * 30))
    pairs.append(([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]))
    pairs.append(([float(i) for i in range(20)], [float(i) + 100 for i in range(20)]))
    return pairs


PAIRS = sample_pairs()


@pytest.mark.parametrize("index", range(len(PAIRS)))
def test_mann_whitney_u_matches_asv(index):
    x, y = PAIRS[index]
    u, p = mann_whitney_u(x, y)
    asv_u, asv_p = asv_stats.mann_whitney_u(x, y)
    assert u == asv_u
    assert p == pytest.approx(asv_p, rel=1e-9, abs=1e-12)
    assert 0.0 <= p <= 1.0


def test_mann_whitney_u_is_symmetric_in_p():
    rng = np.random.default_rng(5)
    for m, n in [(3, 4), (10, 12), (25, 30)]:
        x, y = rng.normal(size=m).tolist(), rng.normal(0.5, size=n).tolist()
        assert mann_whitney_u(x, y)[1] == pytest.approx(mann_whitney_u(y, x)[1], rel=1e-9)


def asv_is_different(x, y) -> bool:
    # Overlapping confidence intervals: where asv cannot run the test it says False.
    stats = {"ci_99_a": 0.0, "ci_99_b": 1.0}
    return asv_stats.is_different(x, y, stats, stats)


@pytest.mark.parametrize("index", range(len(PAIRS)))
def test_is_different_matches_asv(index):
    x, y = PAIRS[index]
    ours = is_different(x, y)
    if ours is None:
        # Too few samples to ever reach the threshold: asv cannot say True either.
        assert asv_is_different(x, y) is False
        assert 2 / math.comb(len(x) + len(y), min(len(x), len(y))) >= SIGNIFICANCE
    else:
        assert ours == asv_is_different(x, y)


def test_is_different_random_pairs_match_asv():
    rng = np.random.default_rng(99)
    decided = 0
    for _ in range(300):
        m, n = rng.integers(1, 40, size=2)
        scale = rng.choice([0.1, 1.0, 10.0])
        x = np.round(rng.normal(0, 1, m) * scale) / scale
        y = np.round(rng.normal(rng.choice([0, 0.5, 2]), 1, n) * scale) / scale
        ours = is_different(x.tolist(), y.tolist())
        theirs = asv_is_different(x.tolist(), y.tolist())
        if ours is None:
            assert theirs is False
        else:
            decided += 1
            assert ours == theirs, (x.tolist(), y.tolist())
    assert decided > 200


def test_five_percent_shift_with_twenty_samples_is_different():
    rng = np.random.default_rng(0)
    base = 1000 + rng.normal(0, 5, 20)
    slower = 1050 + rng.normal(0, 5, 20)
    assert is_different(base.tolist(), slower.tolist()) is True
    assert mann_whitney_u(base.tolist(), slower.tolist())[1] < SIGNIFICANCE


def test_identical_distributions_are_not_different():
    rng = np.random.default_rng(1)
    a = 1000 + rng.normal(0, 5, 20)
    b = 1000 + rng.normal(0, 5, 20)
    assert is_different(a.tolist(), b.tolist()) is False
    assert is_different(a.tolist(), a.tolist()) is False


def test_too_few_samples_cannot_decide():
    assert is_different([1.0, 2.0], [3.0, 4.0]) is None
    assert is_different([], [1.0]) is None
    size = min_samples_for_significance()
    assert 2 / math.comb(2 * size, size) < SIGNIFICANCE <= 2 / math.comb(2 * size - 2, size - 1)
    far = [float(i) for i in range(size)]
    assert is_different(far, [v + 1000 for v in far]) is True


def test_mann_whitney_u_needs_two_samples():
    with pytest.raises(ValueError, match="non-empty"):
        mann_whitney_u([], [1.0])
