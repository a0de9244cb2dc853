"""`fwdasv.engine.protocol`: when the timed replays run, on a virtual clock (a replay advances
it), so their layout in time is exact; and telemetry at block boundaries, over a fake
libnvidia-ml (conftest's `readonly_nvml`).
"""

from __future__ import annotations

import json

import pytest
from fake_nvml import SW_POWER_CAP, FakeNvml, loaded

from fwdasv.core import results
from fwdasv.engine.protocol import (
    DUTY_CYCLED,
    LONG_BLOCKS,
    STEADY,
    Protocol,
    Replayer,
    resolve_protocol,
    run_protocol,
)
from fwdasv.hw import telemetry

# --- the protocols, on a virtual clock ----------------------------------------------------


class VirtualGpu:
    """A replay takes `replay_s` of the virtual clock; sleeping advances it too."""

    def __init__(self, replay_s: float = 0.004):
        self.now = 0.0
        self.replay_s = replay_s
        self.events: list[tuple[str, float, float]] = []  # (kind, start, duration)
        self.reads: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.events.append(("idle", self.now, seconds))
        self.now += seconds

    def timed(self) -> float:
        self.events.append(("replay", self.now, self.replay_s))
        self.now += self.replay_s
        return self.replay_s * 1e6

    def launch(self) -> None:
        self.timed()

    def read(self) -> float:
        self.reads.append(self.now)
        return self.now

    def run(self, protocol: str, iters: int = 20, samples: int = 5, warmup_s: float = 1.0):
        replayer = Replayer(self.timed, self.launch, lambda: None)
        return run_protocol(
            replayer,
            iters,
            samples,
            warmup_s,
            Protocol.named(protocol),
            read_telemetry=self.read,
            clock=self.clock,
            sleep=self.sleep,
        )


def test_steady_is_back_to_back_with_a_reading_after_each_block():
    gpu = VirtualGpu()
    run = gpu.run(STEADY)
    assert len(run.times_us) == 20 * 5 and run.iters == 20
    assert [kind for kind, _, _ in gpu.events if kind == "idle"] == []
    assert run.warmup_replays == 250  # ~1 s of 4 ms replays
    timed_start = gpu.events[-100][1]
    # One reading at the end of every block of 20 replays, none inside.
    assert (
        run.readings
        == gpu.reads
        == [pytest.approx(timed_start + 0.004 * 20 * (b + 1)) for b in range(5)]
    )
    assert run.idle_s == 0


def test_duty_cycled_bursts_are_short_and_followed_by_three_times_their_idle():
    gpu = VirtualGpu()
    run = gpu.run(DUTY_CYCLED)
    assert len(run.times_us) == 100 and run.iters == 20
    bursts, current = [], 0.0
    for kind, _, duration in gpu.events:
        if kind == "replay":
            current += duration
        else:
            bursts.append((current, duration))
            current = 0.0
    # Bursts of 50 ms (13 replays of 4 ms, the last crossing 50 ms) or a block's rest.
    assert all(busy <= 0.05 + 0.004 for busy, _ in bursts)
    assert all(idle == pytest.approx(3 * busy) for busy, idle in bursts)
    assert run.idle_s == pytest.approx(3 * run.busy_s)
    # The warmup was duty-cycled too (~1 s of wall time), then 5 readings, one per block.
    assert run.warmup_replays > 0 and len(run.readings) == 5


def test_long_blocks_raise_iters_to_a_second_of_replays():
    gpu = VirtualGpu(replay_s=0.002)
    run = gpu.run(LONG_BLOCKS, iters=20, samples=3)
    assert run.iters == 500  # 1 s / 2 ms
    assert len(run.times_us) == 1500 and len(run.readings) == 3
    # A replay slower than the shortest block keeps --iters.
    assert VirtualGpu(replay_s=0.2).run(LONG_BLOCKS, iters=20, samples=2).iters == 20


def test_auto_is_duty_cycled_for_graphs_and_steady_for_the_host_timer():
    assert resolve_protocol("auto", "graph") == DUTY_CYCLED
    assert resolve_protocol("auto", "host") == STEADY
    assert resolve_protocol("long-blocks", "host") == LONG_BLOCKS
    with pytest.raises(ValueError, match="--protocol"):
        resolve_protocol("bursty", "graph")


def test_engine_block_telemetry_goes_into_the_rank_dict(readonly_nvml: FakeNvml):
    """bench_forward on CPU with a GPU's telemetry: one reading per sample block."""
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.capture import bench_forward
    from fwdasv.engine.config import BenchOptions
    from fwdasv.targets.decoder import tiny

    loaded(readonly_nvml.gpus[0], 1755, SW_POWER_CAP)
    gpu = telemetry.GpuTelemetry.open(index=0)
    options = BenchOptions(iters=2, samples=3, warmup_s=0, timer="host")
    try:
        rank = bench_forward(
            tiny().prepare(parse_case("p=4"), 0), options, torch.device("cpu"), gpu
        )
    finally:
        gpu.close()
    data = rank.telemetry
    assert data.gpu.uuid == readonly_nvml.gpus[0].uuid
    assert len(data.log) == 3 and data.log[0].t_s == 0.0
    assert data.sm_clock_median_mhz == 1755
    assert data.power_capped_pct == 100.0
    assert rank.protocol.name == "steady" and rank.protocol.iters_per_block == 2
    # Through the results file and its parser: the case's telemetry.
    case = results.CaseResult.measured("p", parse_case("p=4").requests, [rank]).judge()
    written = json.loads(results.dumps([case]))[0]["ranks"][0]["telemetry"]
    assert list(written) == ["source", "scope", "gpu", "summary", "readings"]
    assert written["readings"][0]["clock_event_reasons"] == ["sw_power_cap"]
    (parsed,) = results.parse(json.loads(results.dumps([case])))
    assert parsed == case and parsed.ranks[0].telemetry == data
    assert parsed.latency.count == rank.latency.count == 6
    assert parsed.telemetry.sm_clock_min_mhz == 1755 and parsed.telemetry.readings == 3
    assert "SM 1755-1755 MHz" in parsed.telemetry.line()
