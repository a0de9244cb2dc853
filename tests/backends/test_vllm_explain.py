"""`fwdasv.backends.vllm_explain`: vLLM's kernels named by their aten op and source line.

On Qwen3-0.6B's real H200 kernel summaries laid out as kineto traces them
(tests/qwen3_traces.py): vLLM's own summarizer (the real package) writes the graph's
summary, the eager pass ties every kernel to its op and line in launch order; a kernel only
one side launched is reported unmatched, never guessed; the diff of two commits names the
cast kernels BAD added, under `aten::_to_copy` at the line that added them, changed here.
The hook around vLLM's bench is exercised on a stand-in for its CUDA path.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from qwen3_traces import (
    ADDED_CODE,
    ADDED_LINE,
    QWEN3,
    Launch,
    eager_events,
    extra_graph,
    graph_events,
    plan,
)

from fwdasv.analysis.explain.kernel_diff import diff_summaries, mark_changed
from fwdasv.analysis.explain.kernel_diff_format import format_diff, headline
from fwdasv.backends import vllm_explain
from fwdasv.core.kernels import KernelSummary, load_summary

CAST = "at::native::vectorized_elementwise_kernel"
RESTORES = 2


def vllm_summary(events: list[dict]) -> KernelSummary:
    """The graph's kernels.json as vLLM's bench writes it (its own summarizer)."""
    from vllm.benchmarks.forward.profile import summarize

    return KernelSummary.from_json(summarize(events, 3, RESTORES), "vllm")


def attributed(side: str, graph_plan=None, extra=()) -> KernelSummary:
    calls = plan(bad=side == "bad")
    graph = graph_events(graph_plan or calls, side, restores=RESTORES)
    eager, recorded = eager_events(calls, side, extra)
    return vllm_explain.attribute_vllm_profile(vllm_summary(graph), graph, eager, recorded)


@pytest.mark.vllm
def test_every_kernel_of_the_graph_gets_the_op_and_line_that_launched_it():
    done = attributed("bad")
    assert done.attribution == "sequence" and not done.unmatched and done.ops is None
    kernels = {row.name: row for row in done.kernels}
    assert len(kernels) == 14 and all(row.op and row.sources for row in done.kernels)
    cast = kernels[CAST]
    # The op the line calls (`.float()`: aten::_to_copy), not kineto's innermost (copy_).
    assert (cast.op, cast.calls, cast.unmatched) == ("aten::_to_copy", 28, 0)
    assert (cast.source.file, cast.source.line) == (QWEN3, ADDED_LINE)
    assert (cast.source.function, cast.source.code) == ("Qwen3Attention.forward", ADDED_CODE)
    # The copy kernel launched from two places: the layer's cast (28 calls) before the
    # residual copy (1), most time first.
    copy = kernels["at::native::unrolled_elementwise_kernel"]
    assert [f.line for f in copy.sources] == [ADDED_LINE, 301]
    # Written back, vLLM's keys and rows are as they were; vLLM's own reader still reads it.
    again = KernelSummary.from_json(json.loads(json.dumps(done.to_json())), "x")
    assert again.kernels == done.kernels and again.kernels[0].op == done.kernels[0].op


@pytest.mark.vllm
def test_a_kernel_only_one_side_launched_is_unmatched_never_guessed():
    calls = plan()
    done = attributed(
        "good", graph_plan=extra_graph(calls), extra=(Launch("Memset (Device)", "", "gpu_memset"),)
    )
    assert done.unmatched is not None
    assert done.unmatched.graph == (("memcpy32_post", 1),)
    assert done.unmatched.eager == (("Memset (Device)", 1),)
    assert "unmatched: 1 the graph launched and the eager forward did not, 1 the reverse" in (
        done.attribution or ""
    )
    kernels = {row.name: row for row in done.kernels}
    memcpy = kernels["memcpy32_post"]
    assert (memcpy.op, memcpy.sources, memcpy.unmatched) == ("", (), 1)
    # Everything else still in order, with its op.
    assert all(row.op for name, row in kernels.items() if name != "memcpy32_post")
    table = format_diff(diff_summaries(done, done), "table")
    assert "memcpy32_post <- (unmatched)" in table
    assert "GOOD unmatched (the graph launched and the eager pass did not: memcpy32_post x1" in (
        table
    )


@pytest.mark.vllm
def test_the_diff_names_the_added_kernel_its_op_and_the_changed_line():
    good, bad = attributed("good"), attributed("bad")
    diff = mark_changed(
        diff_summaries(good, bad), [QWEN3, "docs.md"], "https://github.com/o/r/commit/b"
    )
    assert diff.unit == "kernel"
    top = {row.name: row for row in diff.kernels}[CAST]
    assert (top.change, top.op, top.calls_before, top.calls_after) == (
        "new",
        "aten::_to_copy",
        0,
        28,
    )
    assert top.changed_here and top.source.line == ADDED_LINE
    # The largest structural change: the copy kernel, 1 -> 29 calls, at the added line.
    assert (
        "largest structural change: at::native::unrolled_elementwise_kernel <- aten::_to_copy "
        f"<- {QWEN3}:{ADDED_LINE} Qwen3Attention.forward, changed here (calls, 1->29 calls, "
        "+65.80 us)"
    ) in headline(diff)
    table = format_diff(diff, "table")
    assert f"{CAST} <- aten::_to_copy" in table
    assert f"{QWEN3}:{ADDED_LINE} Qwen3Attention.forward [changed here]" in table
    assert "vLLM's profile has kernels only" not in table
    # Only the rows that stand out are marked: the GEMMs in the same file are not.
    assert [r.name for r in diff.kernels if r.changed_here] == list(diff.top5)
    markdown = format_diff(diff, "markdown")
    assert "[changed here](https://github.com/o/r/commit/b)" in markdown
    # A file the commit did not change: no mark.
    elsewhere = mark_changed(diff_summaries(good, bad), ["docs.md"])
    assert not any(row.changed_here for row in elsewhere.kernels)


class _StandInBench:
    """vLLM's ForwardBench where CUDA cannot run: its `_capture_and_time` writes what vLLM's
    profile_graph writes for a case (the graph's trace and kernels.json)."""

    def __init__(self, prefix: Path | None, side: str = "bad"):
        self.profile_prefix = None if prefix is None else str(prefix)
        self.name = "decode_bs1_1k"
        self.side = side
        self._run_model = lambda: None

    def _capture_and_time(self):
        if self.profile_prefix is not None:
            events = graph_events(plan(bad=self.side == "bad"), self.side, restores=RESTORES)
            with gzip.open(f"{self.profile_prefix}.trace.json.gz", "wt") as handle:
                json.dump({"traceEvents": events}, handle)
            summary = vllm_summary(events)
            Path(f"{self.profile_prefix}.kernels.json").write_text(json.dumps(summary.to_json()))
        return "graph output"


def _eager(bench):
    return eager_events(plan(bad=bench.side == "bad"), bench.side)


def test_the_hook_rewrites_each_profiled_cases_kernels_json(tmp_path: Path, capfd):
    pytest.importorskip("vllm")
    bench_class = type("Bench", (_StandInBench,), {})
    vllm_explain.install(bench_class, eager=_eager)
    vllm_explain.install(bench_class, eager=_eager)  # once only
    assert bench_class._capture_and_time.fwdasv_explain
    prefix = tmp_path / "decode_bs1_1k.rank0"
    assert bench_class(prefix)._capture_and_time() == "graph output"
    written = load_summary(f"{prefix}.kernels.json")
    assert written.attribution == "sequence" and written.attribution_s is not None
    assert {row.name: row for row in written.kernels}[CAST].op == "aten::_to_copy"
    assert "[fwdasv] decode_bs1_1k: eager pass" in capfd.readouterr().err
    # No --profile-dir: nothing runs.
    assert bench_class(None)._capture_and_time() == "graph output"


def test_an_eager_pass_that_fails_leaves_vllms_rows_and_says_why(tmp_path: Path):
    pytest.importorskip("vllm")

    def broken(bench):
        raise RuntimeError("CUDA error: no kernel image")

    bench_class = type("Bench", (_StandInBench,), {})
    vllm_explain.install(bench_class, eager=broken)
    prefix = tmp_path / "decode_bs1_1k.rank0"
    bench_class(prefix)._capture_and_time()
    written = load_summary(f"{prefix}.kernels.json")
    assert written.attribution == "failed: RuntimeError: CUDA error: no kernel image"
    assert all(not row.op for row in written.kernels) and len(written.kernels) == 14


@pytest.mark.vllm
def test_the_hook_wraps_vllms_own_forward_bench():
    from vllm.benchmarks.forward.capture import ForwardBench

    original = ForwardBench._capture_and_time
    try:
        vllm_explain.install()
        assert ForwardBench._capture_and_time.fwdasv_explain
        assert ForwardBench._capture_and_time.__wrapped__ is original
    finally:
        ForwardBench._capture_and_time = original


def test_explain_runs_vllm_suites_through_the_explain_entry():
    from fwdasv.backends import RunConfig
    from fwdasv.backends.vllm import argv
    from fwdasv.core.cases import parse_case

    config = RunConfig(
        backend="vllm", model="m", cases=(parse_case("decode=1*1@64"),), entry="explain"
    )
    assert argv(config, Path("out.json"))[:2] == ["-m", "fwdasv.backends.vllm_explain"]


@pytest.mark.vllm
def test_the_entry_installs_the_hook_when_the_first_case_runs(monkeypatch):
    from vllm.benchmarks.forward import main as bench
    from vllm.benchmarks.forward.capture import ForwardBench

    from fwdasv.backends import vllm_forward

    ran = []
    monkeypatch.setattr(bench, "run_case", lambda runner, case, args: ran.append(case) or {})
    monkeypatch.setattr(vllm_forward, "main", lambda argv: bench.run_case(None, "c", None))
    monkeypatch.setattr(ForwardBench, "_capture_and_time", ForwardBench._capture_and_time)
    assert not getattr(ForwardBench._capture_and_time, "fwdasv_explain", False)
    vllm_explain.main(["--case", "c=1"])
    assert ran == ["c"] and ForwardBench._capture_and_time.fwdasv_explain
