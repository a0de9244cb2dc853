"""GPU telemetry (fwdasv.hw.telemetry) over a fake libnvidia-ml, and the timing protocols.

The fake (tests/fake_nvml.py) replaces only the loaded C library, with an H200's
numbers; pynvml and everything above it run for real. The protocols run on a
virtual clock (a replay advances it), so their layout in time is exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest
from fake_nvml import FakeNvml

from fwdasv.backends import telemetry as bench_telemetry
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
from fwdasv.launch import LaunchSpec, launch

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
VLLM_FOUR = DATA / "vllm-0.33.0-forward-h200-qwen3-0.6b-4cases.json"

SW_POWER_CAP, SW_THERMAL = 0x4, 0x20


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    nvml = FakeNvml.h200(count=2).install(monkeypatch)
    yield nvml
    assert nvml.errors == []
    assert nvml.initialised == 0, "an nvmlInit without its nvmlShutdown"
    # Telemetry only ever reads.
    assert nvml.setter_calls == []
    assert not [c for c in nvml.calls if c.startswith(("nvmlDeviceSet", "nvmlDeviceReset"))]


def loaded(gpu, clock_mhz: int, reasons: int, power_w: float = 700.0) -> None:
    gpu.sm_clock_mhz = clock_mhz
    gpu.clock_event_reasons = reasons
    gpu.power_usage_mw = int(power_w * 1000)
    gpu.utilization_gpu = 100


# --- readings and summaries -------------------------------------------------------------


def test_a_reading_holds_clocks_power_and_reasons_of_the_gpu(fake: FakeNvml):
    loaded(fake.gpus[1], 1605, SW_POWER_CAP, power_w=699.5)
    gpu = telemetry.GpuTelemetry.open(uuid=fake.gpus[1].uuid)
    try:
        reading = gpu.read(clock=lambda: 12.5)
        assert gpu.describe() == results.GpuIdentity(1, fake.gpus[1].uuid, "NVIDIA H200")
    finally:
        gpu.close()
    assert reading == telemetry.Reading(
        t_s=12.5,
        sm_clock_mhz=1605,
        memory_clock_mhz=3201,
        power_w=699.5,
        temperature_c=31,
        utilization_pct=100,
        clock_event_reasons=SW_POWER_CAP,
    )
    assert reading.power_capped is True and reading.thermal_capped is False and reading.busy
    record = reading.record(origin_s=10.0)
    assert record.clock_event_reasons == ("sw_power_cap",) and record.t_s == 2.5
    assert record.to_json()["clock_event_reasons"] == ["sw_power_cap"]


def test_a_field_the_gpu_cannot_report_is_none_and_the_rest_still_reads(fake: FakeNvml):
    fake.fail["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.remove("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV")
    loaded(fake.gpus[0], 1980, SW_THERMAL)
    gpu = telemetry.GpuTelemetry.open(index=0)
    try:
        reading = gpu.read()
    finally:
        gpu.close()
    assert reading.power_w is None
    # An older driver: the older calls answer.
    assert reading.clock_event_reasons == SW_THERMAL and reading.temperature_c == 31
    assert reading.sm_clock_mhz == 1980
    assert "power" in gpu.unreadable


def test_no_gpu_of_that_uuid_is_unavailable_not_a_crash(fake: FakeNvml):
    with pytest.raises(telemetry.TelemetryUnavailable, match="GPU-nope"):
        telemetry.GpuTelemetry.open(uuid="GPU-nope")


def test_cuda_visible_devices_maps_the_process_gpu_to_nvml(fake, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    gpu = telemetry.open_for_device(None, 0)
    assert gpu.index == 1
    gpu.close()
    # torch's UUID (without the GPU- prefix) names it exactly.
    gpu = telemetry.open_for_device(fake.gpus[0].uuid.removeprefix("GPU-"), 5)
    assert gpu.index == 0
    gpu.close()


def test_summary_gives_clock_range_and_the_share_of_capped_readings():
    def reading(clock: int, reasons: int | None) -> telemetry.Reading:
        return telemetry.Reading(0.0, clock, 3201, 650.0, 60, 100, reasons)

    readings = [
        reading(1980, 0),
        reading(1605, SW_POWER_CAP),
        reading(1755, SW_POWER_CAP),
        reading(1800, SW_THERMAL),
        reading(1900, None),
    ]
    summary = telemetry.summarize(readings)
    assert summary.readings == 5
    assert (summary.sm_clock_min_mhz, summary.sm_clock_median_mhz) == (1605, 1800)
    assert summary.sm_clock_max_mhz == 1980
    # Of the 4 readings whose reasons were read.
    assert summary.power_capped_pct == 50.0
    assert summary.thermal_capped_pct == 25.0
    assert summary.reasons_pct == (("sw_power_cap", 50.0), ("sw_thermal_slowdown", 25.0))
    assert summary.to_json()["summary"]["reasons_pct"] == {
        "sw_power_cap": 50.0,
        "sw_thermal_slowdown": 25.0,
    }


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


def test_engine_block_telemetry_goes_into_the_rank_dict(fake: FakeNvml):
    """bench_forward on CPU with a GPU's telemetry: one reading per sample block."""
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.capture import BenchOptions, bench_forward
    from fwdasv.targets.decoder import tiny

    loaded(fake.gpus[0], 1755, SW_POWER_CAP)
    gpu = telemetry.GpuTelemetry.open(index=0)
    options = BenchOptions(iters=2, samples=3, warmup_s=0, timer="host")
    try:
        rank = bench_forward(
            tiny().prepare(parse_case("p=4"), 0), options, torch.device("cpu"), gpu
        )
    finally:
        gpu.close()
    data = rank.telemetry
    assert data.gpu.uuid == fake.gpus[0].uuid
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


def test_the_worst_gpu_of_a_pipeline_is_the_case_telemetry():
    fast = results.Telemetry(
        10, sm_clock_min_mhz=1900, sm_clock_median_mhz=1980, power_capped_pct=0
    )
    slow = results.Telemetry(
        10, sm_clock_min_mhz=1605, sm_clock_median_mhz=1700, power_capped_pct=80
    )
    worst = fast.worst(slow)
    assert (worst.sm_clock_min_mhz, worst.sm_clock_median_mhz) == (1605, 1700)
    assert worst.power_capped_pct == 80 and worst.readings == 20


# --- the sampler around a bench without block hooks (vLLM's) -------------------------------

FAKE_VLLM = """
import json, sys, time
from pathlib import Path
data = json.loads(Path(sys.argv[1]).read_text())
for entry in data:
    time.sleep(0.3)
    print(f"[forward] {entry['case']}: done", flush=True)
Path(sys.argv[2]).write_text(json.dumps(data))
"""


def test_sampler_splits_readings_per_case_at_the_case_lines(fake, tmp_path, clean_env):
    """The launcher's sampler around a stand-in for vLLM's bench (its recorded JSON)."""
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_VLLM)
    out = tmp_path / "bench.json"
    cases = [entry["case"] for entry in json.loads(VLLM_FOUR.read_text())]
    loaded(fake.gpus[0], 1650, SW_POWER_CAP)
    spec = LaunchSpec([str(script), str(VLLM_FOUR), str(out)], timeout_s=60)
    with bench_telemetry.sampling(1, interval_s=0.02) as sampler:
        assert sampler is not None
        launch(
            spec, out, tmp_path / "bench.log", echo=bench_telemetry.marking(None, sampler, cases)
        )
    parsed = bench_telemetry.attach(out, results.load(out), sampler)
    assert [r.case for r in parsed] == cases
    for result in parsed:
        rank = result.ranks[0]
        assert rank.telemetry is not None and rank.telemetry.readings >= 3
        assert rank.telemetry.sm_clock_median_mhz == 1650
        assert rank.telemetry.power_capped_pct == 100.0
        assert "no block hooks" in rank.telemetry.scope
        assert rank.telemetry.source == "nvml-sampler" and rank.telemetry.log is None
    # Written back into the results file, which stays valid JSON, vLLM's keys as it wrote
    # them and the telemetry last.
    again = results.load(out)
    assert again == parsed
    recorded = json.loads(VLLM_FOUR.read_text())
    for case, written in zip(recorded, json.loads(out.read_text()), strict=True):
        telemetry_json = written["ranks"][0].pop("telemetry")
        assert json.dumps(written) == json.dumps(case)
        assert telemetry_json["source"] == "nvml-sampler"


def test_sampling_without_nvml_gives_none(monkeypatch):
    monkeypatch.setattr(
        pynvml,
        "nvmlInit",
        lambda: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)),
    )
    with bench_telemetry.sampling(1) as sampler:
        assert sampler is None
    assert bench_telemetry.marking(print, None, ["a"]) is print


def test_a_cpu_run_records_no_telemetry(tmp_path, clean_env):
    out = tmp_path / "out.json"
    args = ["--device", "cpu", "--case", "p=4", "--iters", "2", "--samples", "2"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwdasv.engine",
            *args,
            "--warmup-s",
            "0",
            "--output-json",
            str(out),
        ],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (case,) = results.load(out)
    assert "telemetry" not in json.loads(out.read_text())[0]["ranks"][0]
    assert case.ranks[0].telemetry is None and case.telemetry is None
    assert case.ranks[0].telemetry_unavailable is None
    assert case.ranks[0].protocol.name == "steady"
