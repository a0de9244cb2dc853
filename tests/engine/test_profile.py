"""`fwdasv.engine.profile`: kernel (GPU) and op (CPU) profiles of a prepared forward, in runs
of their own.

CPU profiles are real torch.profiler runs of the bundled tiny decoder; the kernels.json
they write keeps vLLM's keys; the profilers' chatter is dropped; `fwdasv forward`
refuses --profile-dir for pipelines.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import ROOT

from fwdasv.core.kernels import KernelSummary, load_summary, profile_paths

VLLM_KEYS = ["trace", "replays", "span_us", "busy_us", "pre_forward_us", "activities", "kernels"]
ROW_KEYS = ["name", "us", "pct", "calls", "example"]


# --- CPU profiles of the tiny decoder -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """profile_case on the tiny decoder (one real torch.profiler run), plus a bare forward's
    op counts (no restore) profiled the same way for comparison."""
    import torch
    from torch.profiler import ProfilerActivity

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.attribute import source_roots
    from fwdasv.engine.capture import StateSnapshot
    from fwdasv.engine.profile import ProfileOptions, profile_case, quiet_kineto
    from fwdasv.targets.base import TargetSpec

    profile_dir = tmp_path_factory.mktemp("profiles")
    torch.set_num_threads(1)
    with torch.inference_mode():
        target = TargetSpec.parse("fwdasv.targets.decoder:tiny").build("cpu", "float32")
        case = parse_case("decode/x=4*1@256")
        prepared = target.prepare(case, 0)
        snapshot = StateSnapshot(prepared.state)
        block = profile_case(
            prepared,
            snapshot,
            torch.device("cpu"),
            ProfileOptions(),
            profile_dir,
            case.name,
            roots=source_roots("fwdasv.targets.decoder:tiny"),
        )
        snapshot.restore()
        with quiet_kineto(), torch.profiler.profile(activities=[ProfilerActivity.CPU]) as bare:
            prepared.forward()
    bare_counts: dict[str, int] = {}
    for event in bare.events():
        bare_counts[event.name] = bare_counts.get(event.name, 0) + 1
    return {
        "block": block,
        "dir": profile_dir,
        "case": case.name,
        "state_views": len(prepared.state),
        "bare_counts": bare_counts,
    }


def test_cpu_profile_names_aten_ops_with_positive_self_time(tiny_profile):
    block = tiny_profile["block"]
    summary = load_summary(block.summary)
    assert summary.device == "cpu" and summary.is_cpu and summary.replays == 3
    names = [row.name for row in summary.kernels]
    assert all(name.startswith("aten::") for name in names), names
    by_name = {row.name: row for row in summary.kernels}
    # The decoder's projections and its fused attention, with real time on them.
    assert by_name["aten::mm"].us > 0 and by_name["aten::mm"].calls == 4 * 4
    attention = by_name["aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert attention.us > 0 and attention.calls == 4
    assert [row.us for row in summary.kernels] == sorted(
        (row.us for row in summary.kernels), reverse=True
    )
    assert sum(row.calls for row in summary.kernels) == summary.activities
    assert 99.5 < sum(row.pct for row in summary.kernels) < 100.5
    # busy = the ops' self time; span = the forward's wall time, Python between ops included.
    assert 0 < summary.busy_us <= summary.span_us
    # The rank's block: vLLM's keys, the first 10 rows.
    assert block.device == "cpu" and block.top_kernels == summary.kernels[:10]
    assert list(block.to_json()) == [
        "summary",
        "device",
        "span_us",
        "busy_us",
        "activities",
        "top_kernels",
    ]
    assert block.to_json()["top_kernels"] == [row.to_json() for row in summary.kernels[:10]]


def test_cpu_profile_rows_name_the_line_that_calls_them(tiny_profile):
    summary = load_summary(tiny_profile["block"].summary)
    by_name = {row.name: row for row in summary.kernels}
    decoder = ROOT / "fwdasv" / "targets" / "decoder.py"
    lines = decoder.read_text().splitlines()
    for name in ("aten::mm", "aten::_scaled_dot_product_flash_attention_for_cpu"):
        source = by_name[name].source
        assert source is not None and source.file == "fwdasv/targets/decoder.py", by_name[name]
        # The line named is the one that holds the call, as the file has it.
        assert lines[source.line - 1].strip() == source.code
        # Its function by qualified name (`Decoder.forward`).
        assert source.calls >= 1 and all(p.isidentifier() for p in source.function.split("."))
    assert (
        "scaled_dot_product_attention"
        in by_name["aten::_scaled_dot_product_flash_attention_for_cpu"].source.code
    )
    # Shapes of the calls: the projections' inputs are (tokens, hidden) x (hidden, out).
    assert all("x" in shape for shape in by_name["aten::mm"].shapes)
    assert summary.attribution.startswith("eager forward: ")


def test_cpu_profile_excludes_the_restore(tiny_profile):
    summary = load_summary(tiny_profile["block"].summary)
    by_name = {row.name: row for row in summary.kernels}
    bare = tiny_profile["bare_counts"]
    # Exactly the forward's own ops: copy_ as often as a forward alone runs it, not once
    # more per state view (the restore's copies).
    assert by_name["aten::copy_"].calls == bare["aten::copy_"]
    for name, row in by_name.items():
        assert row.calls == bare[name], name
    restore = summary.pre_forward_kernels
    assert [(r.name, r.calls) for r in restore] == [("aten::copy_", tiny_profile["state_views"])]
    assert summary.pre_forward_us > 0
    # The restores ran inside the profiled region, labelled, and show in the trace.
    with gzip.open(summary.trace, "rt") as stream:
        events = json.load(stream)["traceEvents"]
    annotations = sorted(
        (e for e in events if e.get("cat") == "user_annotation"), key=lambda e: e["ts"]
    )
    labels = [e["name"] for e in annotations]
    assert labels == ["fwdasv::restore", "fwdasv::forward"] * 3


def test_kernels_json_round_trips_with_vllm_keys(tiny_profile):
    kernels_path = Path(tiny_profile["block"].summary)
    # A case name with '/' is made safe for a file name, the same way every time.
    assert kernels_path == profile_paths(tiny_profile["dir"], tiny_profile["case"], 0)[0]
    assert kernels_path.parent == tiny_profile["dir"] and "/" not in kernels_path.name
    assert kernels_path.name.endswith(".rank0.kernels.json")
    data = json.loads(kernels_path.read_text())
    assert list(data)[: len(VLLM_KEYS)] == VLLM_KEYS
    assert data["device"] == "cpu" and data["case"] == "decode/x" and data["rank"] == 0
    # vLLM's row keys first; fwdasv's attribution after them.
    assert all(list(row)[:5] == ROW_KEYS for row in data["kernels"])
    assert all(set(row) <= {*ROW_KEYS, "sources", "shapes"} for row in data["kernels"])
    assert all(isinstance(row["calls"], int) for row in data["kernels"])
    summary = load_summary(kernels_path)
    assert summary.to_json() == data
    assert KernelSummary.from_json(summary.to_json(), "again") == summary
    trace = Path(data["trace"])
    assert trace.name == kernels_path.name.replace(".kernels.json", ".trace.json.gz")
    with gzip.open(trace, "rt") as stream:
        assert json.load(stream)["traceEvents"]


def test_the_profilers_chatter_is_dropped_and_other_stderr_kept(capfd):
    from fwdasv.engine.profile import quiet_profiler_stderr

    with quiet_profiler_stderr():
        # As kineto writes them: from C++, to file descriptor 2.
        os.write(2, b"USDT:2026-12-02 17:12:01 11164:11164 SyncActivityProfilerHandler.cpp:59]")
        os.write(2, b" profiler_stop\n")
        os.write(2, b"[W1202 CUPTIActivityProfiler.cpp:1] gpuGetDeviceCount failed with 35\n")
        os.write(2, b"a real warning\n")
    captured = capfd.readouterr()
    assert captured.err == "a real warning\n", captured.err


# --- the command line -----------------------------------------------------------------


def test_forward_help_and_pipeline_refusal():
    from fwdasv.cli import main as fwdasv_main

    runner = CliRunner()
    help_text = runner.invoke(fwdasv_main, ["forward", "--help"]).output
    assert "--profile-dir" in help_text and "never count in the timings" in help_text
    refused = runner.invoke(
        fwdasv_main,
        [
            "forward",
            "--pipeline-stages",
            "2",
            "--profile-dir",
            "p",
            "--case",
            "x=1",
            "--device",
            "cpu",
        ],
    )
    assert refused.exit_code == 2
    assert "--profile-dir is not supported for pipeline runs yet" in refused.output


# --- GPU (skipped without CUDA) -------------------------------------------------------


@pytest.mark.gpu
def test_gpu_profile_excludes_the_restore_copies(tmp_path):
    import torch

    from fwdasv.core.cases import parse_case
    from fwdasv.engine.capture import StateSnapshot
    from fwdasv.engine.profile import ProfileOptions, profile_case, restore_activity_count
    from fwdasv.targets.base import TargetSpec

    device = torch.device("cuda", 0)
    with torch.inference_mode():
        target = TargetSpec.parse("fwdasv.targets.decoder:tiny").build("cuda", "bfloat16")
        prepared = target.prepare(parse_case("decode=8*1@1024"), 0)
        snapshot = StateSnapshot(prepared.state)
        block = profile_case(
            prepared, snapshot, device, ProfileOptions(), tmp_path, "decode", rank=0
        )
    summary = load_summary(block.summary)
    assert summary.device == "cuda" and summary.activities > 0
    assert sum(row.calls for row in summary.kernels) == summary.activities
    skipped = summary.pre_forward_kernels
    assert sum(r.calls for r in skipped) == restore_activity_count(snapshot) > 0
    # What is left out is exactly what a graph of the restore alone launches, by name and
    # count; a graph may run a memcpy node as a copy engine memcpy ("Memcpy DtoD") or as a
    # kernel ("memcpy32_post"), so those count as one name.
    left_out = collections.Counter()
    for row in skipped:
        left_out[_memcpy_as_one(row.name)] += row.calls
    assert left_out == _restore_alone(snapshot, device), skipped


def _memcpy_as_one(name: str) -> str:
    return "memcpy" if "memcpy" in name.lower() else name


def _restore_alone(snapshot, device) -> collections.Counter:
    """The GPU activities of one replay of a CUDA graph holding only the state restore."""
    import torch

    from fwdasv.engine.profile import chrome_trace
    from fwdasv.engine.profile_summary import activity_name, gpu_activities

    with torch.inference_mode():
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            snapshot.restore()
        graph.replay()
        torch.cuda.synchronize(device)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            graph.replay()
            torch.cuda.synchronize(device)
    events = json.loads(chrome_trace(prof))["traceEvents"]
    return collections.Counter(_memcpy_as_one(activity_name(e)) for e in gpu_activities(events))


def test_kineto_noise_is_filtered_and_the_rest_of_stderr_kept(capfd):
    from fwdasv.engine.profile import quiet_kineto

    with quiet_kineto():
        os.write(2, b"USDT:2026-12-02 17:09:09 7287:7287 SyncActivityProfilerHandler.cpp:52] ")
        os.write(2, b"profiler_start\nSTAGE:2026-12-02 17:13:29 1:1 X.cpp:51] Completed Stage\n")
        os.write(2, b"[W init.cpp:1] gpuGetDeviceCount failed with code 100\nkeep this line\n")
    err = capfd.readouterr().err
    assert err == "keep this line\n"
