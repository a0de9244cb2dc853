"""Qwen3-0.6B's decode forward on an H200, as kineto traces it: vLLM's graph replays and
fwdasv's eager pass, shaped from vLLM's real `--profile-dir` summaries (the GPU and vLLM's
CUDA path are the boundary that cannot run here).

tests/data/vllm-h200-explain/decode_bs1_1k.{good,bad}.kernels.json are vLLM 0.33's own
files for one decode of Qwen3-0.6B (28 layers, 395 activities a forward) at two commits of
a local vLLM history, BAD casting each layer's attention output to float32 and back. `plan`
lays those kernels out in the model's launch order, each under the call the dispatch mode
sees (op, line of vllm/model_executor/models/qwen3.py) and the aten op kineto names its
launch by, with each row's real time per call. `graph_events` are N graph replays (each
after the restore's copies), `eager_events` the eager pass (`fwdasv.backends.vllm_explain`):
one `src#i` range per call, launches tied by correlation. `extra_graph` / `extra_eager` add
a kernel only one side launches (what must come out unmatched).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from helpers import DATA
from kernel_traces import gpu_activity

from fwdasv.core.kernels import KernelSummary, SourceFrame
from fwdasv.engine.attribute import Call
from fwdasv.engine.kernel_names import short_name

EXPLAIN_DATA = DATA / "vllm-h200-explain"
QWEN3 = "vllm/model_executor/models/qwen3.py"
LAYERS = 28
ADDED_LINE = 123  # BAD's `attn_output = attn_output.float().to(q.dtype)` in Qwen3Attention
ADDED_CODE = "attn_output = attn_output.float().to(q.dtype)"
RESTORE = "Memcpy DtoD (Device -> Device)"


@dataclass(frozen=True)
class Launch:
    """One GPU activity: its row (short name), the aten op kineto ties it to, its category."""

    row: str
    op: str
    category: str = "kernel"


@dataclass(frozen=True)
class PlannedCall:
    """One call the dispatch mode sees, where the code calls it, and what it launches."""

    op: str
    frame: SourceFrame
    launches: tuple[Launch, ...]


def rows(side: str) -> dict[str, dict[str, Any]]:
    data = json.loads((EXPLAIN_DATA / f"decode_bs1_1k.{side}.kernels.json").read_text())
    return {row["name"]: row for row in data["kernels"]}


def full_name(row: str, example: str) -> str:
    """A full kernel name whose short name is `row` (vLLM keeps 300 characters of one)."""
    if short_name(example) == row:
        return example
    if "namespace)" in row:
        name = f"void at::native::(anonymous {row}<c10::BFloat16>(int)"
    elif "<" in row:
        base, arg = row.split("<", 1)
        name = f"void {base}<{arg[:-1]}<int> >(int)"
    else:
        name = f"void {row}<c10::BFloat16>(int)"
    assert short_name(name) == row, (name, row)
    return name


def _frame(line: int, function: str, code: str) -> SourceFrame:
    return SourceFrame(QWEN3, line, function, code)


def plan(bad: bool = False) -> list[PlannedCall]:
    """The forward's calls in launch order (BAD: the two casts after each attention)."""
    norm, fused = "vllm::rms_norm_kernel", "vllm::fused_add_rms_norm_kernel"
    gemm_a = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
    calls = [
        PlannedCall(
            "aten::embedding",
            _frame(300, "Qwen3Model.forward", "hidden_states = self.embed_tokens(input_ids)"),
            (Launch("namespace)::indexSelectSmallIndex", "aten::index_select"),),
        ),
        PlannedCall(
            "aten::copy_",
            _frame(301, "Qwen3Model.forward", "residual = hidden_states.clone()"),
            (Launch("at::native::unrolled_elementwise_kernel", "aten::copy_"),),
        ),
    ]
    for layer in range(LAYERS):
        first = layer == 0
        calls += [
            PlannedCall(
                "_C::rms_norm" if first else "_C::fused_add_rms_norm",
                _frame(230, "Qwen3DecoderLayer.forward", "self.input_layernorm(...)"),
                (Launch(norm if first else fused, "_C::rms_norm" if first else "_C::fused_add"),),
            ),
            PlannedCall(
                "aten::mm",
                _frame(110, "Qwen3Attention.forward", "qkv, _ = self.qkv_proj(hidden_states)"),
                (Launch(gemm_a, "aten::mm"),),
            ),
            PlannedCall(
                "_C::rms_norm",
                _frame(113, "Qwen3Attention.forward", "q = self.q_norm(q_by_head)"),
                (Launch(norm, "_C::rms_norm"),),
            ),
            PlannedCall(
                "_C::rms_norm",
                _frame(116, "Qwen3Attention.forward", "k = self.k_norm(k_by_head)"),
                (Launch(norm, "_C::rms_norm"),),
            ),
            PlannedCall(
                "_C::rotary_embedding",
                _frame(118, "Qwen3Attention.forward", "q, k = self.rotary_emb(positions, q, k)"),
                (Launch("vllm::rotary_embedding_kernel", "_C::rotary_embedding"),),
            ),
            PlannedCall(
                "vllm::unified_attention_with_output",
                _frame(119, "Qwen3Attention.forward", "attn_output = self.attn(q, k, v)"),
                (
                    Launch("vllm::reshape_and_cache_flash_kernel", "_C_cache_ops::reshape"),
                    Launch(
                        "cutlass::device_kernel<flash::enable_sm90_or_later>", "_vllm_fa3_C::fwd"
                    ),
                    Launch(
                        "cutlass::device_kernel<flash::FlashAttnFwdCombine>", "_vllm_fa3_C::fwd"
                    ),
                ),
            ),
        ]
        if bad:
            added = _frame(ADDED_LINE, "Qwen3Attention.forward", ADDED_CODE)
            calls += [
                PlannedCall(
                    "aten::_to_copy",
                    added,
                    (Launch("at::native::unrolled_elementwise_kernel", "aten::copy_"),),
                ),
                PlannedCall(
                    "aten::_to_copy",
                    added,
                    (Launch("at::native::vectorized_elementwise_kernel", "aten::copy_"),),
                ),
            ]
        calls += [
            PlannedCall(
                "aten::mm",
                _frame(124, "Qwen3Attention.forward", "output, _ = self.o_proj(attn_output)"),
                (
                    Launch("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "aten::mm"),
                    Launch("cublasLt::splitKreduce_kernel", "aten::mm"),
                ),
            ),
            PlannedCall(
                "_C::fused_add_rms_norm",
                _frame(240, "Qwen3DecoderLayer.forward", "self.post_attention_layernorm(...)"),
                (Launch(fused, "_C::fused_add"),),
            ),
            PlannedCall(
                "aten::mm",
                _frame(80, "Qwen3MLP.forward", "gate_up, _ = self.gate_up_proj(x)"),
                (Launch(gemm_a, "aten::mm"),),
            ),
            PlannedCall(
                "_C::silu_and_mul",
                _frame(81, "Qwen3MLP.forward", "x = self.act_fn(gate_up)"),
                (Launch("vllm::act_and_mul_kernel", "_C::silu_and_mul"),),
            ),
            PlannedCall(
                "aten::mm",
                _frame(82, "Qwen3MLP.forward", "x, _ = self.down_proj(x)"),
                (Launch("nvjet_sm90_tst_8x64_64x16_2x1_v_bz_TNN", "aten::mm"),),
            ),
        ]
    calls.append(
        PlannedCall(
            "_C::fused_add_rms_norm",
            _frame(320, "Qwen3Model.forward", "hidden_states, _ = self.norm(...)"),
            (Launch(fused, "_C::fused_add"),),
        )
    )
    return calls


def extra_graph(calls: list[PlannedCall]) -> list[PlannedCall]:
    """The graph launches one copy kernel more than the eager pass (kept out of `calls`)."""
    return [*calls, PlannedCall("", _frame(0, "", ""), (Launch("memcpy32_post", ""),))]


def _durations(side: str) -> dict[str, tuple[float, str]]:
    return {
        name: (row["us"] / max(row["calls"], 1), full_name(name, row["example"]))
        for name, row in rows(side).items()
    }


def graph_events(
    calls: list[PlannedCall], side: str, replays: int = 3, restores: int = 2
) -> list[dict[str, Any]]:
    """`replays` graph replays as kineto writes them: per replay `restores` copies, then the
    forward's activities with each row's real time per call."""
    timing = _durations(side)
    events: list[dict[str, Any]] = []
    ts = 1000.0
    for replay in range(replays):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": ts})
        activities = [("gpu_memcpy", RESTORE, 1.0)] * restores
        for call in calls:
            for launch in call.launches:
                dur, name = timing.get(launch.row, (2.0, launch.row))
                activities.append((launch.category, name, round(dur, 3)))
        for cat, name, dur in activities:
            events.append(gpu_activity(cat, name, ts, dur, correlation=10 + replay))
            ts += dur + 0.2
        ts += 100.0
    return events[::-1]  # kineto does not write in time order


def eager_events(
    calls: list[PlannedCall], side: str, extra: tuple[Launch, ...] = ()
) -> tuple[list[dict[str, Any]], list[Call]]:
    """The eager pass as kineto writes it, and the dispatch mode's calls; `extra`: launches
    after the last call that the graph does not make (a memset of the eager path)."""
    timing = _durations(side)
    tid = {"pid": 1, "tid": 1}
    events: list[dict[str, Any]] = []
    recorded: list[Call] = []
    start, external, gpu_ts = 100.0, 1, 50_000.0
    for index, call in enumerate(calls):
        recorded.append(Call(call.op, call.frame))
        width = 10.0 * (len(call.launches) + 1)
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"fwdasv::src#{index}",
                "ts": start,
                "dur": width,
                **tid,
            }
        )
        for k, launch in enumerate(call.launches):
            at = start + 1 + 10 * k
            dur, name = timing.get(launch.row, (2.0, launch.row))
            correlation = 100_000 + external
            events += [
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": launch.op,
                    "ts": at,
                    "dur": 8,
                    "args": {"External id": external, "Input Dims": [[1, 1024]]},
                    **tid,
                },
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": at + 2,
                    "dur": 3,
                    "args": {"External id": external, "correlation": correlation},
                    **tid,
                },
                {
                    "ph": "X",
                    "cat": launch.category,
                    "name": name,
                    "ts": gpu_ts,
                    "dur": dur,
                    "pid": 0,
                    "tid": 7,
                    "args": {"External id": external, "correlation": correlation},
                },
            ]
            external += 1
            gpu_ts += dur + 1
        start += width + 5
    for launch in extra:
        correlation = 100_000 + external
        events += [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMemsetAsync",
                "ts": start,
                "dur": 3,
                "args": {"correlation": correlation},
                **tid,
            },
            {
                "ph": "X",
                "cat": launch.category,
                "name": launch.row,
                "ts": gpu_ts,
                "dur": 1.0,
                "pid": 0,
                "tid": 7,
                "args": {"correlation": correlation},
            },
        ]
        start += 5
        external += 1
    events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "fwdasv::forward",
            "ts": 50,
            "dur": start + 50,
            **tid,
        }
    )
    return events[::-1], recorded


def vllm_summary(events: list[dict[str, Any]], replays: int = 3, skip: int = 2) -> KernelSummary:
    """The graph's kernels.json as vLLM's bench writes it: fwdasv's summarizer, which gives
    vLLM's rows row for row (tests/engine/test_profile_summary.py), with vLLM's keys only
    (tests/backends/test_vllm_explain.py uses vLLM's own)."""
    from dataclasses import replace

    from fwdasv.engine.profile_summary import summarize_gpu

    summary = summarize_gpu(events, replays, skip)
    return replace(summary, device=None, restore_activities=None, pre_forward_kernels=None)
