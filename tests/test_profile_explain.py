"""Kernel/op attribution: the engine's profiles (`fwdasv.engine.profile`), the kernels.json
schema (`fwdasv.core.kernels`) and the GOOD -> BAD diff (`fwdasv.analysis.explain`).

CPU profiles are real torch.profiler runs of the bundled tiny decoder and of the demo
model's two commits around "Support attention logit soft-capping", each commit
imported from its own checkout in an engine subprocess. GPU summaries are checked on
trace events shaped like kineto's (the GPU is the boundary that cannot run here) and
against vLLM's own summarizer, name grouping and diff CLI from the installed package.
"""

from __future__ import annotations

import collections
import copy
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import measuring_priority

from fwdasv.analysis.explain import (
    FORMATS,
    KernelDiff,
    contributors,
    diff_files,
    diff_rounds,
    diff_summaries,
    format_diff,
    headline,
)
from fwdasv.analysis.gate import COMPARISON
from fwdasv.core import results
from fwdasv.core.errors import UserError
from fwdasv.core.kernels import (
    KernelRow,
    KernelSummary,
    ProfileError,
    load_summary,
    profile_paths,
    safe_case_name,
)
from fwdasv.demo.project import SLOW_COMMIT_SUBJECT, TARGET, build_project

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_KERNELS = (
    Path(__file__).parent / "data" / "vllm-qwen3-0.6b-h200-decode_bs1_1k.rank0.kernels.json"
)
VLLM_KEYS = ["trace", "replays", "span_us", "busy_us", "pre_forward_us", "activities", "kernels"]
ROW_KEYS = ["name", "us", "pct", "calls", "example"]
CONTRACT_ROW_KEYS = {
    "name",
    "before_us",
    "after_us",
    "delta_us",
    "share_pct",
    "calls_before",
    "calls_after",
}
# The demo's own cases (fwdasv.demo.run.CASES).
DEMO_DECODE, DEMO_PREFILL = "decode_bs8_2k=8*1@2048", "prefill_512=512"


def case_name(text: str) -> str:
    return text.partition("=")[0]


def one_thread_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    path = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(path), **extra}


def reference_summary_json() -> dict[str, Any]:
    return json.loads(REFERENCE_KERNELS.read_text())


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
        assert source.calls >= 1 and source.function.isidentifier()
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


def test_safe_case_names():
    assert safe_case_name("decode_bs1_1k") == "decode_bs1_1k"
    assert safe_case_name("8192") == "8192"
    odd = [safe_case_name(name) for name in ("a/b", "a_b", "a b", "..", ".hidden", "x" * 300)]
    assert odd[1] == "a_b" and odd[0] != odd[1] and odd[0].startswith("a_b-")
    for stem in odd:
        assert stem and not stem.startswith(".") and len(stem) <= 109
        assert all(c.isalnum() or c in "._-" for c in stem)
    assert len(set(odd)) == len(odd)


# --- the loader's errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"replays": 3}', "missing key 'kernels'"),
        (
            '{"replays": 3, "span_us": 1, "busy_us": 1, "pre_forward_us": 0, "activities": 1, '
            '"kernels": [{"name": "k", "us": 1.0, "pct": 100, "calls": 1.5}]}',
            "kernels[0]: 'calls' must be int, got 1.5",
        ),
        (
            '{"replays": 3, "span_us": 1, "busy_us": 1, "pre_forward_us": 0, "activities": 1, '
            '"kernels": [], "device": "tpu"}',
            "'device' must be 'cuda' or 'cpu'",
        ),
    ],
)
def test_loader_names_the_file_when_it_is_missing_or_malformed(tmp_path, text, message):
    path = tmp_path / "case.rank0.kernels.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_summary(path)
    assert isinstance(caught.value, UserError)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


# --- GPU summaries, on kineto-shaped events -------------------------------------------

GEMM_A = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
FLASH = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
    "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1> >, 128, cutlass::bfloat16_t> > > >"
    "(flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<int> >::Params)"
)
NORM = (
    "void vllm::rms_norm_kernel<c10::BFloat16, 8, 2, true>(c10::BFloat16*, "
    "c10::BFloat16 const*, long, float, int, int)"
)
FLASH_SHORT = "cutlass::device_kernel<flash::enable_sm90_or_later>"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}, "
    "at::detail::Array<char*, 2>)"
)
COPY_KERNEL = (
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda(long)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(long)#1} const&)"
    "::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<int>::{lambda(int)#1})"
)


def gpu_trace_events(replays: int = 3) -> list[dict[str, Any]]:
    """Chrome-trace events as kineto writes them for graph replays: per replay a restore
    (a DtoD copy and a strided copy kernel), then the forward; CPU-side events between."""
    events: list[dict[str, Any]] = []
    ts = 1000.0
    for replay in range(replays):
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": ts, "dur": 5.0}
        )
        plan = [
            ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 1.0),
            ("kernel", COPY_KERNEL, 2.0),
            ("kernel", NORM, 3.0 + replay),
            ("kernel", GEMM_A, 10.0),
            ("kernel", FLASH, 20.0),
            ("kernel", GEMM_A, 12.0),
            ("gpu_memset", "Memset (Device)", 0.5),
        ]
        for cat, name, dur in plan:
            events.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": dur,
                    "args": {"device": 0, "stream": 7, "correlation": 100 + replay},
                }
            )
            ts += dur + 0.5
        ts += 100.0
    # kineto does not write events in time order; the summary must not depend on it.
    return events[::-1]


def test_gpu_summary_skips_each_replays_restore_and_groups_names():
    from fwdasv.engine.profile import summarize_gpu

    summary = summarize_gpu(gpu_trace_events(), replays=3, skip=2)
    rows = {row.name: row for row in summary.kernels}
    assert list(rows) == [
        GEMM_A,
        "cutlass::device_kernel<flash::enable_sm90_or_later>",
        "vllm::rms_norm_kernel",
        "Memset (Device)",
    ]
    assert rows[GEMM_A].us == 22.0 and rows[GEMM_A].calls == 2
    assert rows["vllm::rms_norm_kernel"].us == 4.0  # mean of 3, 4, 5
    assert rows["vllm::rms_norm_kernel"].example == NORM
    assert summary.activities == 5 and summary.device == "cuda"
    assert summary.pre_forward_us == 3.0
    assert summary.busy_us == 46.5  # the median replay
    assert summary.span_us == 4 + 10 + 20 + 12 + 0.5 + 4 * 0.5
    assert summary.restore_activities == 2
    skipped = {r.name: r.calls for r in summary.pre_forward_kernels}
    assert skipped == {"Memcpy DtoD (Device -> Device)": 1, "at::native::elementwise_kernel": 1}


FORWARD_OPS = (
    # (aten op that launches it, the forward's activity in gpu_trace_events, line)
    ("aten::_fused_rms_norm", "kernel", NORM, 10),
    ("aten::mm", "kernel", GEMM_A, 11),
    ("aten::_flash_attention_forward", "kernel", FLASH, 12),
    ("aten::mm", "kernel", GEMM_A, 13),
    ("aten::zero_", "gpu_memset", "Memset (Device)", 14),
)


def eager_trace_events(plan=FORWARD_OPS) -> tuple[list[dict[str, Any]], list[Any]]:
    """The attribution forward as kineto writes it: the restore's copy, then the forward's
    ops, each inside the dispatch mode's `src#i` range, launching one activity each."""
    from fwdasv.core.kernels import SourceFrame
    from fwdasv.engine.attribute import Call

    tid = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "fwdasv::restore", "ts": 0, "dur": 50, **tid},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "ts": 10,
            "dur": 5,
            "args": {"correlation": 900},
            **tid,
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD (Device -> Device)",
            "ts": 5000,
            "dur": 1,
            "args": {"correlation": 900},
            "pid": 0,
            "tid": 7,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "fwdasv::forward",
            "ts": 100,
            "dur": 1000,
            **tid,
        },
    ]
    calls = []
    for i, (op, cat, name, line) in enumerate(plan):
        start = 110 + 100 * i
        calls.append(Call(op, SourceFrame("mymodel/model.py", line, "forward", f"line{line}")))
        events += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"fwdasv::src#{i}",
                "ts": start,
                "dur": 50,
                **tid,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": op,
                "ts": start + 2,
                "dur": 40,
                "args": {"External id": i + 1, "Input Dims": [[8, 64], [64, 64]]},
                **tid,
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": start + 20,
                "dur": 5,
                "args": {"External id": i + 1, "correlation": 500 + i},
                **tid,
            },
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "ts": 6000 + 50 * i,
                "dur": 3,
                "args": {"External id": i + 1, "correlation": 500 + i},
                "pid": 0,
                "tid": 7,
            },
        ]
    return events[::-1], calls


def test_gpu_kernels_sit_under_the_aten_op_that_launched_them():
    from fwdasv.engine.attribute import attribute_events
    from fwdasv.engine.profile import FORWARD_LABEL, GPU_CATEGORIES, summarize_gpu, with_gpu_ops

    graph = gpu_trace_events()
    summary = summarize_gpu(graph, replays=3, skip=2)
    eager, calls = eager_trace_events()
    found = attribute_events(eager, FORWARD_LABEL, GPU_CATEGORIES)
    assert len(found.gpu) == 5  # the restore's copy is not the forward's
    done = with_gpu_ops(summary, graph, 2, found, calls)
    assert done.attribution == "sequence"
    ops = {row.name: row for row in done.ops}
    assert list(ops) == [
        "aten::mm",
        "aten::_flash_attention_forward",
        "aten::_fused_rms_norm",
        "aten::zero_",
    ]
    mm = ops["aten::mm"]
    assert (mm.us, mm.calls) == (22.0, 2)
    assert [(k.name, k.us, k.calls) for k in mm.kernels] == [(GEMM_A, 22.0, 2)]
    # Both call sites, the one with more GPU time (12 us, line 13) first.
    assert [(f.file, f.line) for f in mm.sources] == [
        ("mymodel/model.py", 13),
        ("mymodel/model.py", 11),
    ]
    assert ops["aten::_fused_rms_norm"].kernels[0].name == "vllm::rms_norm_kernel"
    assert ops["aten::_fused_rms_norm"].source.line == 10
    assert ops["aten::mm"].shapes == ("8x64,64x64",)
    assert sum(row.us for row in done.ops) == pytest.approx(summary.busy_us, abs=0.1)
    # The kernels list stays vLLM's, each row with its sources too.
    assert [row.name for row in done.kernels] == [row.name for row in summary.kernels]
    assert {row.name: row for row in done.kernels}[FLASH_SHORT].source.line == 12
    # It round-trips, and explain diffs by op with the kernels under each.
    again = KernelSummary.from_json(json.loads(json.dumps(done.to_json())), "x")
    assert again.ops == done.ops and again.ops[0].kernels == done.ops[0].kernels
    # An eager forward that launched other kernels than the graph: what lines up in order,
    # the rest by name (the memset, which the eager forward never ran: no op).
    fewer, calls = eager_trace_events(FORWARD_OPS[:4])
    partly = with_gpu_ops(
        summary, graph, 2, attribute_events(fewer, FORWARD_LABEL, GPU_CATEGORIES), calls
    )
    assert partly.attribution.startswith("partly by name: 4 of the graph's 5 activities")
    ops = {row.name: row for row in partly.ops}
    assert set(ops) == {*(op for op, *_ in FORWARD_OPS[:3]), "(no aten op)"}
    assert [(f.line) for f in ops["aten::mm"].sources] == [13, 11]


def test_explain_puts_an_added_op_on_top_with_its_kernel_under_it():
    from fwdasv.engine.attribute import attribute_events
    from fwdasv.engine.profile import FORWARD_LABEL, GPU_CATEGORIES, summarize_gpu, with_gpu_ops

    def profiled(plan, graph):
        eager, calls = eager_trace_events(plan)
        found = attribute_events(eager, FORWARD_LABEL, GPU_CATEGORIES)
        return with_gpu_ops(summarize_gpu(graph, replays=3, skip=2), graph, 2, found, calls)

    good = profiled(FORWARD_OPS, gpu_trace_events())
    # BAD adds a tanh (one elementwise kernel) after the norm.
    added = ("aten::tanh", "kernel", ELEMENTWISE, 20)
    bad_events = gpu_trace_events()
    for event in bad_events:  # where the memset ran, last in each replay
        if event["name"] == "Memset (Device)":
            event.update(cat="kernel", name=ELEMENTWISE, dur=4.0)
    bad = profiled((*FORWARD_OPS[:4], added), bad_events)
    diff = diff_rounds([good] * 3, [bad] * 3)
    assert diff.unit == "op (GPU)"
    top = diff.kernels[0]
    assert (top.name, top.change) == ("aten::tanh", "new")
    assert (top.source.file, top.source.line) == ("mymodel/model.py", 20)
    assert [k.name for k in top.kernels] == ["at::native::vectorized_elementwise_kernel"]
    table = format_diff(diff, "table")
    lines = table.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("+") and "aten::tanh" in line)
    assert "mymodel/model.py:20 forward" in lines[at]
    assert "└ at::native::vectorized_elementwise_kernel" in lines[at + 1]


def test_gpu_summary_errors_say_what_was_recorded():
    from fwdasv.engine.profile import ProfileRunError, summarize_gpu

    with pytest.raises(ProfileRunError, match="No GPU activity recorded"):
        summarize_gpu([{"cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}], 3, 1)
    with pytest.raises(ProfileRunError, match="21 GPU activities don't split into 2 replays"):
        summarize_gpu(gpu_trace_events(), 2, 2)
    with pytest.raises(ProfileRunError, match="7 GPU activities per replay, 7 to skip"):
        summarize_gpu(gpu_trace_events(), 3, 7)


def test_short_names_match_the_reference_files_rows():
    """Every row of vLLM's H200 kernels.json whose example is a whole name (not cut at 300
    characters) groups under its `name`."""
    from fwdasv.engine.profile import short_name

    rows = [r for r in reference_summary_json()["kernels"] if len(r["example"]) < 300]
    assert len(rows) >= 6
    for row in rows:
        assert short_name(row["example"]) == row["name"], row["example"]


SHORT_NAME_CASES = [
    "void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, "
    "unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, int)",
    "kernel_cutlass_gemm_sm100_object_at_0x7f00_tensorptr_f16",
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_64x4_tn_align8>("
    "cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_64x4_tn_align8::Params)",
    "void cutlass::device_kernel<void (anonymous)::Op<int>>(Op<int>::Params)",
    "Memcpy DtoD (Device -> Device)",
    "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn",
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
    "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8, true>(c10::BFloat16*, long)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, "
    "at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}, std::array<char*, 2ul>)",
    "void f<(x>y)>(int)",
    "void ns::KernelWrapper<Op, 4>(int)",
    "foo(",
    "a<b",
    "",
    "   ",
    COPY_KERNEL,
    FLASH,
    NORM,
]


@pytest.mark.vllm
def test_short_names_and_summaries_equal_vllms(monkeypatch):
    monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
    from vllm.benchmarks.forward import profile as vllm_profile

    from fwdasv.engine.profile import short_name, summarize_gpu

    names = SHORT_NAME_CASES + [r["example"] for r in reference_summary_json()["kernels"]]
    for name in names:
        assert short_name(name) == vllm_profile.short_name(name), name
    events = gpu_trace_events()
    ours = summarize_gpu(copy.deepcopy(events), 3, 2).to_json()
    theirs = vllm_profile.summarize(copy.deepcopy(events), 3, 2)
    assert {k: ours[k] for k in theirs} == theirs


# --- the diff -------------------------------------------------------------------------


def summary_of(rows: dict[str, tuple[float, int]], device: str | None = None) -> KernelSummary:
    total = sum(us for us, _ in rows.values()) or 1.0
    kernels = tuple(
        KernelRow(name, us, round(100 * us / total, 2), calls, name)
        for name, (us, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])
    )
    return KernelSummary(
        replays=3,
        span_us=total,
        busy_us=total,
        pre_forward_us=1.0,
        activities=sum(c for _, c in rows.values()),
        kernels=kernels,
        device=device,
    )


def rounds_of(rows: dict[str, tuple[float, int]], factors: tuple[float, ...], **more: Any):
    """One summary per process: every row's time times that process's factor (a busy box
    slows a whole process), plus `more` rows as they are."""
    return [
        summary_of({name: (us * f, calls) for name, (us, calls) in rows.items()} | more)
        for f in factors
    ]


BASE = {f"k{i}": (100.0 + 10 * i, 2) for i in range(8)} | {"fused": (50.0, 2)}


def test_common_mode_noise_stands_out_nowhere_and_exits_0():
    # Identical code; BAD's three processes all ran beside a neighbour (+20-30%) and
    # GOOD's varied by 15%: every op "slower", none beyond its noise band.
    goods, bads = rounds_of(BASE, (1.0, 1.1, 0.95)), rounds_of(BASE, (1.25, 1.3, 1.2))
    diff = diff_rounds(goods, bads)
    assert diff.total_delta_us > 0 and diff.verdict == "unchanged"
    assert COMPARISON.exit_status([diff.verdict]) == 0 and not diff.slower
    assert not diff.stands_out and diff.top5 == () and diff.explained_top5_pct == 0
    assert {row.change for row in diff.kernels} == {"noise"}
    assert all(row.noise_us and row.share_pct == 0 for row in diff.kernels)
    line = headline(diff)
    assert "no change stands out of the noise" in line and "3 profiles a side" in line
    # One total, and what it is made of adds up to it.
    assert diff.slower_us == diff.faster_us == 0
    assert diff.noise_sum_us == diff.total_delta_us
    assert diff.busy_after_us - diff.busy_before_us == pytest.approx(diff.total_delta_us, abs=0.05)


def test_structural_changes_stand_out_and_shares_add_to_100():
    # The same busy-box noise, and the code changed: "fused" vanished, two ops are new,
    # k0 runs twice as often.
    changed = {k: v for k, v in BASE.items() if k != "fused"} | {"k0": (200.0, 4)}
    goods = rounds_of(BASE, (1.0, 1.1, 0.95))
    bads = rounds_of(changed, (1.25, 1.3, 1.2), bmm=(400.0, 8), softmax=(100.0, 4))
    diff = diff_rounds(goods, bads)
    rows = {row.name: row for row in diff.kernels}
    assert (rows["bmm"].change, rows["softmax"].change) == ("new", "new")
    assert rows["fused"].change == "vanished" and rows["k0"].change == "calls"
    assert rows["k3"].change == "noise" and not rows["k3"].stands_out
    assert diff.slower and COMPARISON.exit_status([diff.verdict]) == 1
    assert diff.top5 == ("bmm", "k0", "softmax")
    # Shares: of the slowdown for the slower rows, of the speed-up for the faster ones.
    slower = [r for r in diff.kernels if r.stands_out and r.delta_us > 0]
    faster = [r for r in diff.kernels if r.stands_out and r.delta_us < 0]
    assert sum(r.share_pct for r in slower) == pytest.approx(100, abs=0.05)
    assert sum(r.share_pct for r in faster) == pytest.approx(100, abs=0.05)
    assert diff.explained_top5_pct == pytest.approx(100, abs=0.05)
    assert diff.slower_us + diff.faster_us + diff.noise_sum_us == pytest.approx(
        diff.total_delta_us, abs=0.05
    )
    assert diff.slower_us == pytest.approx(sum(r.delta_us for r in slower), abs=0.05)
    # What stands out comes first, above the larger changes within the noise.
    assert [r.stands_out for r in diff.kernels] == sorted(
        (r.stands_out for r in diff.kernels), reverse=True
    )
    assert "slower (+" in contributors(diff) and "faster (-" in contributors(diff)


def test_a_time_only_change_beyond_its_noise_stands_out():
    goods = [summary_of({"gemm": (100.0 + d, 4), "norm": (20.0, 4)}) for d in (0, 1, 0.5)]
    bads = [summary_of({"gemm": (150.0 + d, 4), "norm": (20.2, 4)}) for d in (0, 1, -1)]
    diff = diff_rounds(goods, bads)
    rows = {row.name: row for row in diff.kernels}
    assert rows["gemm"].change == "slower" and rows["gemm"].noise_us == 2.0
    assert rows["norm"].change == "noise"  # 0.2 us: under MIN_ROW_PCT of the op time
    assert diff.slower and diff.top5 == ("gemm",) and rows["gemm"].share_pct == 100
    # The other way round it is faster, and exits 0.
    back = diff_rounds(bads, goods)
    assert back.verdict == "improved" and COMPARISON.exit_status([back.verdict]) == 0


def test_one_profile_a_side_judges_structure_only():
    good = summary_of({f"k{i}": (100.0, 1) for i in range(8)} | {"fused": (50.0, 2)})
    bad_rows = {f"k{i}": (100.0 + 10 * (i + 1), 1) for i in range(8)} | {"new": (45.0, 4)}
    diff = diff_summaries(good, summary_of(bad_rows))
    # +360 from k0..k7 (time only: unjudged), +45 new, -50 fused vanished: total +355.
    assert diff.total_delta_us == 355.0
    rows = {row.name: row for row in diff.kernels}
    assert {rows[f"k{i}"].change for i in range(8)} == {"unjudged"}
    assert rows["new"].share_pct == 100 and rows["fused"].share_pct == 100
    assert (rows["fused"].calls_before, rows["fused"].calls_after) == (2, 0)
    assert rows["new"].status == "new" and rows["new"].before_us == 0.0
    # What stands out (-5 us net) is no slowdown: exit 0, and the note says why.
    assert diff.net_us == -5.0 and COMPARISON.exit_status([diff.verdict]) == 0
    assert any("one profile a side" in note for note in diff.notes)
    same = diff_summaries(good, good)
    assert same.total_delta_us == 0 and same.explained_top5_pct == 0 and same.top5 == ()
    assert COMPARISON.exit_status([same.verdict]) == 0


def test_diff_refuses_a_cpu_profile_against_a_gpu_one():
    with pytest.raises(ProfileError, match=r"a CPU op profile.*a GPU kernel profile"):
        diff_summaries(summary_of({"a": (1.0, 1)}, "cpu"), summary_of({"a": (1.0, 1)}))


def test_diff_of_vllm_files_puts_an_added_kernel_on_top(tmp_path):
    data = reference_summary_json()
    # vLLM's file loads as a GPU summary (no "device" key) and writes back unchanged.
    reference = load_summary(REFERENCE_KERNELS)
    assert not reference.is_cpu and reference.unit == "kernel"
    assert reference.to_json() == data
    bad = copy.deepcopy(data)
    bad["kernels"].append(
        {
            "name": "fwdasv_test::extra_kernel",
            "us": 42.0,
            "pct": 2.6,
            "calls": 28,
            "example": "void fwdasv_test::extra_kernel<c10::BFloat16>(c10::BFloat16*, long)",
        }
    )
    bad["kernels"][0]["us"] += 1.5  # a little noise elsewhere
    (tmp_path / "bad.kernels.json").write_text(json.dumps(bad))
    diff = diff_files(REFERENCE_KERNELS, tmp_path / "bad.kernels.json")
    top = diff.kernels[0]
    assert (top.name, top.status, top.delta_us) == ("fwdasv_test::extra_kernel", "new", 42.0)
    assert (top.calls_before, top.calls_after) == (0, 28)
    assert diff.total_delta_us == 43.5 and diff.unit == "kernel"
    # The +1.5 us elsewhere is time only, unjudged with one profile a side.
    assert top.share_pct == 100.0 and diff.noise_sum_us == 1.5
    assert diff.explained_top5_pct == 100.0 and diff.top5[0] == top.name
    assert COMPARISON.exit_status([diff.verdict]) == 1
    reverse = diff_files(tmp_path / "bad.kernels.json", REFERENCE_KERNELS)
    assert (
        reverse.kernels[0].status == "vanished" and COMPARISON.exit_status([reverse.verdict]) == 0
    )


H200_EXPLAIN = Path(__file__).parent / "data" / "vllm-h200-explain"


def test_real_vllm_change_on_an_h200_names_the_added_casts():
    """vLLM 0.33 on an H200 (docs/measurements.md, section 9), Qwen3-0.6B at two commits of a
    local vLLM repository, the second casting the attention output to float32 and back in
    every layer (28): two elementwise kernels more per layer, profiled by vLLM's own bench."""
    casts = ("at::native::unrolled_elementwise_kernel", "at::native::vectorized_elementwise_kernel")
    prefill = diff_files(*(H200_EXPLAIN / f"prefill_2k.{s}.kernels.json" for s in ("good", "bad")))
    assert tuple(row.name for row in prefill.kernels[:2]) == casts == prefill.top5[:2]
    assert [(r.calls_before, r.calls_after) for r in prefill.kernels[:2]] == [(1, 29), (28, 56)]
    assert prefill.explained_top5_pct >= 50 and COMPARISON.exit_status([prefill.verdict]) == 1

    # At batch 1 the change also made a GEMM 74 us faster (latency +19.7 us, not +94): a
    # change of time only, unjudged with one profile a side; the casts stand out.
    decode = diff_files(
        *(H200_EXPLAIN / f"decode_bs1_1k.{s}.kernels.json" for s in ("good", "bad"))
    )
    gemm = decode.kernels[2]
    assert gemm.name.startswith("nvjet_") and gemm.delta_us < -70 and gemm.change == "unjudged"
    assert decode.top5[:2] == casts and COMPARISON.exit_status([decode.verdict]) == 1
    added = {row.name: row for row in decode.kernels}[casts[1]]
    assert (added.status, added.calls_before, added.calls_after) == ("new", 0, 28)
    table = format_diff(decode, "table", top=3)
    assert table.splitlines()[1].startswith(f"slower (+94.09 us): {casts[0]} (calls, +65.81 us")
    assert f"`{casts[1]}` (new, +28.28 us, 30%, 0->28 calls)" in format_diff(decode, "markdown")
    # vLLM's files have no ops or sources: the diff says so.
    assert any("vLLM's profile has kernels only" in note for note in decode.notes)


def check_json_contract(diff: KernelDiff) -> dict[str, Any]:
    data = json.loads(format_diff(diff, "json"))
    assert isinstance(data["total_delta_us"], float)
    assert isinstance(data["total_delta_pct"], float)
    assert isinstance(data["explained_top5_pct"], float)
    assert data["kernels"] and all(row.keys() >= CONTRACT_ROW_KEYS for row in data["kernels"])
    assert all(row["status"] in ("new", "vanished", "both") for row in data["kernels"])
    return data


def test_formats_carry_the_contract_and_the_rows(tmp_path):
    good = summary_of({"aten::mm": (100.0, 4), "aten::_scaled_dot_product_attention": (60.0, 2)})
    bad = summary_of({"aten::mm": (101.0, 4), "aten::bmm": (90.0, 4), "a|b`c": (5.0, 1)})
    diff = diff_summaries(good, bad)
    data = check_json_contract(diff)
    assert data["total_delta_us"] == 36.0
    assert [row["name"] for row in data["kernels"]][:2] == [
        "aten::bmm",
        "aten::_scaled_dot_product_attention",
    ]
    assert data["total_delta_pct"] == 22.5  # of GOOD's 160 us
    table = format_diff(diff, "table", top=2, good="abc123", bad="def456")
    assert table.splitlines()[0].startswith("abc123 -> def456 (1 profile a side): slower: ")
    assert "kernel time per forward 160.0 -> 196.0 us (+36.00 us, +22.5%" in table
    assert "aten::bmm" in table and "new" in table and "vanished" in table
    assert "(2 more rows with smaller changes)" in table
    markdown = format_diff(diff, "markdown")
    assert markdown.startswith("### Where the time went: GOOD -> BAD")
    assert "| `aten::bmm` |" in markdown and "| `` a\\|b`c `` |" in markdown
    assert set(FORMATS) == {"table", "json", "markdown"}


# --- the demo model's regression, profiled at both commits ----------------------------


def profile_checkout(checkout: Path, profile_dir: Path, output_json: Path) -> str:
    """`python -m fwdasv.engine --profile-dir` on the demo's two cases, `checkout` importable."""
    argv = [sys.executable, "-m", "fwdasv.engine", "--target", TARGET, "--device", "cpu"]
    argv += ["--case", DEMO_DECODE, "--case", DEMO_PREFILL, "--iters", "3", "--samples", "2"]
    argv += ["--warmup-s", "0", "--profile-dir", str(profile_dir)]
    argv += ["--output-json", str(output_json)]
    env = one_thread_env(PYTHONPATH=os.pathsep.join([str(checkout), str(ROOT)]))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # Silenced at the source: kineto's lines never reach a CPU profile's output.
    assert "USDT:" not in proc.stderr and "gpuGetDeviceCount" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def demo_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo repository's commits before and at "Support attention logit soft-capping",
    each checked out on its own and run through `python -m fwdasv.engine --profile-dir`
    (one subprocess at a time), as the explain command will, at raised priority.

    On this shared 2-vCPU box a neighbour's burst now and then slows a whole process
    two- or threefold, enough to hide the commit's known slowdown (about 2x busy time on
    both cases) in one pair of profiles. As `demo_history` does for asv: a pair where
    BAD's busy time is not at least 1.2x GOOD's on both cases was disturbed, and both
    commits are profiled again, twice at most. The attribution is asserted on the pair kept.
    """
    root = tmp_path_factory.mktemp("demo-explain")
    repo = root / "tinylm"
    hashes = build_project(repo)
    subjects = subprocess.run(
        ["git", "log", "--reverse", "--format=%s", "main"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.splitlines()
    slow = subjects.index(SLOW_COMMIT_SUBJECT)
    commits = {"good": hashes[slow - 1], "bad": hashes[slow]}
    for label, commit in commits.items():
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(root / label), commit],
            cwd=repo,
            check=True,
            capture_output=True,
            timeout=60,
        )
    names = (case_name(DEMO_DECODE), case_name(DEMO_PREFILL))
    out: dict[str, Any] = {"rounds": 0, "checkouts": {label: root / label for label in commits}}
    with measuring_priority():
        for attempt in range(3):
            for label in commits:
                profile_dir = root / f"profiles-{label}-{attempt}"
                results_json = root / f"{label}-{attempt}.json"
                out[label] = {
                    "results": results_json,
                    "stdout": profile_checkout(root / label, profile_dir, results_json),
                    "kernels": {name: profile_paths(profile_dir, name)[0] for name in names},
                }
            out["rounds"] = attempt + 1
            ratios = [
                load_summary(out["bad"]["kernels"][name]).busy_us
                / load_summary(out["good"]["kernels"][name]).busy_us
                for name in names
            ]
            if min(ratios) >= 1.2:
                break
    return out


def test_engine_cli_profile_dir_adds_the_profile_block(demo_profiles):
    for label in ("good", "bad"):
        for case in results.load(demo_profiles[label]["results"]):
            rank = case.ranks[0]
            # The timed replays are the engine's usual ones; the profile is its own run.
            assert case.ok and rank.latency.count == 3 * 2
            block = rank.profile
            assert Path(block.summary) == demo_profiles[label]["kernels"][case.case]
            assert block.device == "cpu" and len(block.top_kernels) == 10
            assert f"{case.case}: profile {block.summary}" in demo_profiles[label]["stdout"]


def demo_diff(demo_profiles: dict[str, Any], case: str) -> KernelDiff:
    name = case_name(case)
    diff = diff_files(demo_profiles["good"]["kernels"][name], demo_profiles["bad"]["kernels"][name])
    fused = {row.name: row for row in diff.kernels}[
        "aten::_scaled_dot_product_flash_attention_for_cpu"
    ]
    assert fused.status == "vanished" and fused.delta_us < 0
    assert diff.explained_top5_pct >= 50, format_diff(diff)
    assert diff.slower and COMPARISON.exit_status([diff.verdict]) == 1
    check_json_contract(diff)
    return diff


def test_demo_softcap_commit_diff_names_the_ops_that_replaced_fused_attention(demo_profiles):
    # A prefill: scores by a batched matmul, a causal mask, a softmax, the output by bmm.
    prefill = demo_diff(demo_profiles, DEMO_PREFILL)
    rows = {row.name: row for row in prefill.kernels}
    assert {"aten::bmm", "aten::_softmax"} <= set(prefill.top5), format_diff(prefill)
    assert rows["aten::bmm"].status == "new" and rows["aten::bmm"].calls_after == 2 * 4
    assert rows["aten::_softmax"].status == "new" and rows["aten::_softmax"].calls_after == 4
    assert rows["aten::masked_fill_"].status == "new"
    assert "`aten::bmm`" in format_diff(prefill, "markdown")
    # Every row that stands out names its line in the demo repository, as that
    # commit's file has it (GOOD's for what vanished), in the attention function.
    for row in prefill.stands_out[:8]:
        source = row.source
        assert source is not None and source.file == "tinylm/model.py", row
        side = "good" if row.change == "vanished" else "bad"
        lines = (demo_profiles["checkouts"][side] / source.file).read_text().splitlines()
        assert lines[source.line - 1].strip() == source.code, row
    assert rows["aten::bmm"].source.function == "attention"
    table = format_diff(prefill).splitlines()
    assert any(
        line.startswith("+") and " aten::bmm " in line and "tinylm/model.py:" in line
        for line in table
    ), table
    # Decodes: the two batched matmuls over the repeated K/V dominate.
    decode = demo_diff(demo_profiles, DEMO_DECODE)
    assert "aten::bmm" in decode.top5, format_diff(decode)
    assert {row.name: row for row in decode.kernels}["aten::bmm"].calls_after == 2 * 4


@pytest.mark.vllm
def test_vllms_profile_cli_reads_fwdasv_kernels_json(demo_profiles):
    good, bad = (
        demo_profiles[label]["kernels"][case_name(DEMO_PREFILL)] for label in ("good", "bad")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vllm.benchmarks.forward.profile", str(good), str(bad)],
        env=one_thread_env(VLLM_TARGET_DEVICE="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("span ") and "busy" in lines[0]
    assert lines[1].split() == ["delta", "us", "A", "us", "B", "us", "A", "n", "B", "n", "kernel"]
    assert any(line.endswith("aten::bmm") for line in lines[2:]), proc.stdout


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
    assert refused.exit_code == 1
    assert "--profile-dir is not supported for pipeline runs yet" in refused.output


def test_gpu_check_script_dry_mode_runs_on_cpu(tmp_path):
    out = tmp_path / "explain-dry"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu" / "measure_explain.py"),
            "--device",
            "cpu",
            "--out",
            str(out),
            "--skip-engine-cli",  # one torch process at a time besides this one
        ],
        env=one_thread_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # CPU op times of the tiny decoder are too noisy for the 50% checks: 0 or 1.
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["num_layers"] == 4
    assert summary["checks"]["restore_excluded"] is True
    assert set(summary["checks"]) == {
        "bad_top_row_is_added",
        "bad_top_row_share_ge_50",
        "explained_top5_ge_50",
        "control_below_added",
        "restore_excluded",
    }
    assert summary["added_rows"]["aten::roll"] == 1
    explain = json.loads((out / "explain.json").read_text())
    roll = next(row for row in explain["kernels"] if row["name"] == "aten::roll")
    assert (roll["status"], roll["calls_before"], roll["calls_after"]) == ("new", 0, 4)
    for label in ("good", "bad", "control"):
        assert load_summary(out / label / "decode_bs1_1k.rank0.kernels.json").is_cpu
    assert (out / "explain.md").read_text().startswith("### Where the time went")
    assert "PASS  restore_excluded" in proc.stdout


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

    from fwdasv.engine.profile import activity_name, chrome_trace, gpu_activities

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


# --- what explain says around the diff --------------------------------------------------


def test_an_undecided_confirm_makes_explain_say_the_step_is_not_established(tmp_path):
    from types import SimpleNamespace

    from fwdasv.analysis.confirm import Confirmation
    from fwdasv.analysis.explain import undecided_note, with_note
    from fwdasv.analysis.status import Status
    from fwdasv.analysis.verdict_file import (
        VERDICTS_FILE,
        ConfirmationRecord,
        FindingIdent,
        FindingVerdict,
        append_verdict,
    )

    a, b = "a" * 40, "b" * 40
    project = SimpleNamespace(results_dir=tmp_path)
    assert undecided_note(project, "forward.TinyLM", "prefill_512", a, b) == ""  # no file

    def record(status: Status, at: str) -> None:
        figures = Confirmation(
            status, 4.0, -17.0, 16.0, 0.5, 3.0, 3, 3, 8.0, 8.0, 1.0, "observed", 4.0, 5.0
        )
        ident = FindingIdent("box", None, "forward.TinyLM.track_latency", "prefill_512", b)
        verdict = FindingVerdict(ident, at, a, (b,), status, ConfirmationRecord.of(figures, a, b))
        append_verdict(tmp_path / VERDICTS_FILE, verdict)

    record(Status.CONFIRMED, "2026-01-01T00:00:00+00:00")
    assert undecided_note(project, "forward.TinyLM", "prefill_512", a, b) == ""
    record(Status.UNDECIDED, "2026-01-02T00:00:00+00:00")
    note = undecided_note(project, "forward.TinyLM", "prefill_512", a, b)
    assert note.startswith("the step is not established: confirm left aaaaaaaa..bbbbbbbb undecided")
    assert undecided_note(project, "forward.TinyLM", "decode", a, b) == ""  # another case
    diff = with_note(diff_summaries(summary_of({"x": (1.0, 1)}), summary_of({"x": (1.0, 1)})), note)
    assert f"note: {note}" in format_diff(diff).splitlines()[1]
    assert json.loads(format_diff(diff, "json"))["notes"][0] == note


def test_kineto_noise_is_filtered_and_the_rest_of_stderr_kept(capfd):
    from fwdasv.engine.profile import quiet_kineto

    with quiet_kineto():
        os.write(2, b"USDT:2026-12-02 17:09:09 7287:7287 SyncActivityProfilerHandler.cpp:52] ")
        os.write(2, b"profiler_start\nSTAGE:2026-12-02 17:13:29 1:1 X.cpp:51] Completed Stage\n")
        os.write(2, b"[W init.cpp:1] gpuGetDeviceCount failed with code 100\nkeep this line\n")
    err = capfd.readouterr().err
    assert err == "keep this line\n"
