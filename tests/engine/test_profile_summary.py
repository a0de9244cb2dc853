"""`fwdasv.engine.profile_summary`: per-forward kernel rows from a profiler's events, on trace
events shaped like kineto's (tests/kernel_traces.py: the GPU is the boundary that cannot
run here) and against vLLM's own summarizer and name grouping.
"""

from __future__ import annotations

import copy
import json

import pytest
from kernel_traces import (
    COPY_KERNEL,
    FLASH,
    FORWARD_OPS,
    GEMM_A,
    NORM,
    eager_trace_events,
    gpu_trace_events,
    reference_summary_json,
)

from fwdasv.core.kernels import KernelSummary, Unmatched
from fwdasv.engine.profile_summary import UNMATCHED

FLASH_SHORT = "cutlass::device_kernel<flash::enable_sm90_or_later>"


def test_gpu_summary_skips_each_replays_restore_and_groups_names():
    from fwdasv.engine.profile_summary import summarize_gpu

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


def test_gpu_kernels_sit_under_the_aten_op_that_launched_them():
    from fwdasv.engine.attribute import attribute_events
    from fwdasv.engine.profile import FORWARD_LABEL
    from fwdasv.engine.profile_summary import GPU_CATEGORIES, summarize_gpu, with_gpu_ops

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
    # and the memset, which the eager forward never ran: unmatched, no op or line guessed.
    fewer, calls = eager_trace_events(FORWARD_OPS[:4])
    partly = with_gpu_ops(
        summary, graph, 2, attribute_events(fewer, FORWARD_LABEL, GPU_CATEGORIES), calls
    )
    assert partly.attribution.startswith("partly by name: 4 of the graph's 5 activities")
    assert "unmatched: 1 the graph launched and the eager forward did not" in partly.attribution
    ops = {row.name: row for row in partly.ops}
    assert set(ops) == {*(op for op, *_ in FORWARD_OPS[:3]), UNMATCHED}
    assert [(f.line) for f in ops["aten::mm"].sources] == [13, 11]
    memset = {row.name: row for row in partly.kernels}["Memset (Device)"]
    assert (memset.op, memset.sources, memset.unmatched) == ("", (), 1)
    assert partly.unmatched == Unmatched(graph=(("Memset (Device)", 1),))


def test_gpu_summary_errors_say_what_was_recorded():
    from fwdasv.engine.profile_summary import ProfileRunError, summarize_gpu

    with pytest.raises(ProfileRunError, match="No GPU activity recorded"):
        summarize_gpu([{"cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}], 3, 1)
    with pytest.raises(ProfileRunError, match="21 GPU activities don't split into 2 replays"):
        summarize_gpu(gpu_trace_events(), 2, 2)
    with pytest.raises(ProfileRunError, match="7 GPU activities per replay, 7 to skip"):
        summarize_gpu(gpu_trace_events(), 3, 7)


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

    from fwdasv.engine.kernel_names import short_name
    from fwdasv.engine.profile_summary import summarize_gpu

    names = SHORT_NAME_CASES + [r["example"] for r in reference_summary_json()["kernels"]]
    for name in names:
        assert short_name(name) == vllm_profile.short_name(name), name
    events = gpu_trace_events()
    ours = summarize_gpu(copy.deepcopy(events), 3, 2).to_json()
    theirs = vllm_profile.summarize(copy.deepcopy(events), 3, 2)
    assert {k: ours[k] for k in theirs} == theirs
