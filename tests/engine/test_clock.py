"""PipelineClock: the offset math, the interpolation, and a real skewed peer under torchrun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import PROGRAMS

from fwdasv.engine.clock import interpolate, offset_from_trials
from fwdasv.launch import LaunchSpec, run_process

CLOCK_PROBE = str(PROGRAMS / "clock_probe.py")


def trial(
    true_send_ns: int, out_ns: int, back_ns: int, peer_offset_ns: int
) -> tuple[int, int, int]:
    """A ping-pong: `out_ns` to reach the peer, `back_ns` to come back; the peer reads
    its clock (true time + peer_offset_ns) on arrival."""
    t_peer = true_send_ns + out_ns + peer_offset_ns
    return true_send_ns, t_peer, true_send_ns + out_ns + back_ns


def test_offset_is_exact_for_a_symmetric_round_trip() -> None:
    offset_us, uncertainty_us, best = offset_from_trials([trial(10_000, 40_000, 40_000, 7_000_000)])
    # Rank 0's time = peer time + offset: the peer is 7 ms ahead.
    assert offset_us == -7000.0
    assert uncertainty_us == 40.0
    assert best == 0


def test_offset_keeps_the_shortest_round_trip_and_its_error_is_within_rtt_half() -> None:
    peer_offset_ns = -123_456_789
    trials = [
        trial(0, 500_000, 20_000, peer_offset_ns),  # slow and lopsided
        trial(1_000_000, 30_000, 10_000, peer_offset_ns),  # the shortest: 40 µs
        trial(2_000_000, 100_000, 100_000, peer_offset_ns),
    ]
    offset_us, uncertainty_us, best = offset_from_trials(trials)
    assert best == 1
    assert uncertainty_us == 20.0
    error_us = offset_us - (-peer_offset_ns / 1000)
    # 30 µs out, 10 µs back: the midpoint is 10 µs early, inside the 20 µs bound.
    assert error_us == pytest.approx(-10.0)
    assert abs(error_us) <= uncertainty_us


def test_offset_refuses_no_trials_and_time_running_backwards() -> None:
    with pytest.raises(ValueError, match="no clock trials"):
        offset_from_trials([])
    with pytest.raises(ValueError, match="ends before it starts"):
        offset_from_trials([(10, 0, 5)])


def test_interpolation_absorbs_a_rate_difference() -> None:
    # A local clock running 1% fast: 1010 local µs per 1000 µs of rank 0's time.
    origin_us, end_origin_us, span_us = 5_000.0, 6_000.0, 1_010.0
    assert interpolate(origin_us, end_origin_us, 0.0, span_us) == origin_us
    assert interpolate(origin_us, end_origin_us, span_us, span_us) == end_origin_us
    assert interpolate(origin_us, end_origin_us, 505.0, span_us) == pytest.approx(5_500.0)
    # No span (a degenerate pair of clocks): the start clock alone.
    assert interpolate(origin_us, origin_us, 3.0, 0.0) == origin_us + 3.0


@pytest.mark.slow
def test_offset_of_a_skewed_rank_is_recovered_within_its_uncertainty(
    tmp_path: Path, clean_env
) -> None:
    offset_ns, drift = 5_000_000_000, 0.01
    out = tmp_path / "clock.json"
    spec = LaunchSpec(
        [CLOCK_PROBE, str(out), str(offset_ns), str(drift)], nproc_per_node=2, timeout_s=120
    )
    completed = run_process(spec, tmp_path / "log")
    assert completed.returncode == 0, "\n".join(completed.lines)
    rank0, rank1 = json.loads(out.read_text())
    # Both ranks reading this host's CLOCK_MONOTONIC share rank 0's clock exactly.
    assert rank1["same_host"] == {
        "offset_us": 0.0,
        "uncertainty_us": 0.0,
        "method": "same host clock",
    }
    # A rank whose clock is not the host's is ping-ponged.
    assert rank0["constant"] == {"offset_us": 0.0, "uncertainty_us": 0.0, "method": "rank 0"}
    constant = rank1["constant"]
    assert constant.pop("method") == "ping-pong"
    error_us = constant["offset_us"] - (-offset_ns / 1000)
    assert abs(error_us) <= constant["uncertainty_us"], constant
    # A mark rank 1 took inside rank 0's bracket maps into the bracket, even
    # though rank 1's clock gained several ms on rank 0's between its clocks.
    low, high = rank0["bracket_us"]
    u = rank1["uncertainty_us"]
    assert low - u <= rank1["mark_us"] <= high + u, (low, high, u, rank1["mark_us"])
