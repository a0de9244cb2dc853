"""Profiles without a GPU: trace events shaped like kineto's, vLLM's H200 kernel summary,
and the JSON contract of a kernel diff, for the engine's summaries and analysis's diff.

`gpu_trace_events` are graph replays as kineto writes them (a restore, then the forward's
kernels, out of time order); `eager_trace_events` the attribution forward's ops with the
kernels they launched (`FORWARD_OPS`); `summary_of` a summary of chosen rows;
`check_json_contract` what a diff's JSON must hold.
"""

from __future__ import annotations

import json
from typing import Any

from helpers import DATA

from fwdasv.analysis.explain.kernel_diff import KernelDiff
from fwdasv.analysis.explain.kernel_diff_format import format_diff
from fwdasv.core.kernels import KernelRow, KernelSummary

# vLLM's own kernel summary of one case on an H200 (`vllm bench forward --profile-dir`).
REFERENCE_KERNELS = DATA / "vllm-qwen3-0.6b-h200-decode_bs1_1k.rank0.kernels.json"
CONTRACT_ROW_KEYS = {
    "name",
    "before_us",
    "after_us",
    "delta_us",
    "share_pct",
    "calls_before",
    "calls_after",
}


def reference_summary_json() -> dict[str, Any]:
    return json.loads(REFERENCE_KERNELS.read_text())


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
COPY_KERNEL = (
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda(long)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(long)#1} const&)"
    "::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<int>::{lambda(int)#1})"
)


def gpu_activity(cat: str, name: str, ts: float, dur: float, correlation: int) -> dict[str, Any]:
    """One GPU activity of a kineto trace (a kernel, memcpy or memset) on device 0, stream 7."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": correlation},
    }


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
            events.append(gpu_activity(cat, name, ts, dur, correlation=100 + replay))
            ts += dur + 0.5
        ts += 100.0
    # kineto does not write events in time order; the summary must not depend on it.
    return events[::-1]


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


def check_json_contract(diff: KernelDiff) -> dict[str, Any]:
    data = json.loads(format_diff(diff, "json"))
    assert isinstance(data["total_delta_us"], float)
    assert isinstance(data["total_delta_pct"], float)
    assert isinstance(data["explained_top5_pct"], float)
    assert data["kernels"] and all(row.keys() >= CONTRACT_ROW_KEYS for row in data["kernels"])
    assert all(row["status"] in ("new", "vanished", "both") for row in data["kernels"])
    return data
