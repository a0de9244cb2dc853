"""`fwdasv.backends.telemetry`: the GPU sampler around a bench without block hooks (vLLM's),
over a fake libnvidia-ml (tests/fake_nvml.py, conftest's `readonly_nvml`).
"""

from __future__ import annotations

import json

import pynvml
from fake_nvml import SW_POWER_CAP, loaded
from recorded_runs import FOUR

from fwdasv.backends import telemetry as bench_telemetry
from fwdasv.core import results
from fwdasv.launch import LaunchSpec, launch

FAKE_VLLM = """
import json, sys, time
from pathlib import Path
data = json.loads(Path(sys.argv[1]).read_text())
for entry in data:
    time.sleep(0.3)
    print(f"[forward] {entry['case']}: done", flush=True)
Path(sys.argv[2]).write_text(json.dumps(data))
"""


def test_sampler_splits_readings_per_case_at_the_case_lines(readonly_nvml, tmp_path, clean_env):
    """The launcher's sampler around a stand-in for vLLM's bench (its recorded JSON)."""
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_VLLM)
    out = tmp_path / "bench.json"
    cases = [entry["case"] for entry in json.loads(FOUR.read_text())]
    loaded(readonly_nvml.gpus[0], 1650, SW_POWER_CAP)
    spec = LaunchSpec([str(script), str(FOUR), str(out)], timeout_s=60)
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
    recorded = json.loads(FOUR.read_text())
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
