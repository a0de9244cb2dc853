"""`fwdasv.analysis.explain.kernel_diff`: the GOOD -> BAD diff of one case's kernel or op profiles,
told apart from noise, on summaries built here and on kineto-shaped GPU traces
(tests/kernel_traces.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from kernel_traces import FORWARD_OPS, eager_trace_events, gpu_trace_events, summary_of

from fwdasv.analysis.explain.kernel_diff import diff_rounds, diff_summaries
from fwdasv.analysis.explain.kernel_diff_format import contributors, format_diff, headline
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.core.kernels import ProfileError

ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}, "
    "at::detail::Array<char*, 2>)"
)


def test_explain_puts_an_added_op_on_top_with_its_kernel_under_it():
    from fwdasv.engine.attribute import attribute_events
    from fwdasv.engine.profile import FORWARD_LABEL
    from fwdasv.engine.profile_summary import GPU_CATEGORIES, summarize_gpu, with_gpu_ops

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


def test_rows_that_stand_out_in_a_file_the_commit_changed_are_marked_changed_here():
    from dataclasses import replace

    from fwdasv.analysis.explain.kernel_diff import in_changed_file, mark_changed
    from fwdasv.core.kernels import SourceFrame

    lines = {"aten::mm": 10, "aten::add": 11, "aten::tanh": 12}

    def at(rows):
        return replace(
            rows,
            kernels=tuple(
                replace(row, sources=(SourceFrame("model.py", lines[row.name], "Model.forward"),))
                for row in rows.kernels
            ),
        )

    good = at(summary_of({"aten::mm": (100.0, 4), "aten::add": (5.0, 2)}))
    bad = at(summary_of({"aten::mm": (100.5, 4), "aten::add": (5.0, 2), "aten::tanh": (9.0, 1)}))
    diff = mark_changed(diff_summaries(good, bad), ["README.md", "model.py"], "https://x/c/b")
    marked = {row.name: row.changed_here for row in diff.kernels}
    # Only the row that stands out (new); the rest, in the same file, within noise: unmarked.
    assert marked == {"aten::tanh": True, "aten::mm": False, "aten::add": False}
    assert diff.change_link == "https://x/c/b" and diff.to_json()["change_link"] == diff.change_link
    assert json_row(diff, "aten::tanh")["changed_here"] is True
    table = format_diff(diff, "table")
    assert "model.py:12 Model.forward [changed here]" in table
    assert "changed here: https://x/c/b" in table.splitlines()
    assert "largest structural change: aten::tanh <- model.py:12 Model.forward, changed here" in (
        headline(diff)
    )
    assert "[changed here](https://x/c/b)" in format_diff(diff, "markdown")
    # Named as installed (package: `tinylm/x.py`), the repository's path may be longer.
    assert in_changed_file("tinylm/model.py", ["src/tinylm/model.py"])
    assert in_changed_file("model.py", ["model.py"])
    assert not in_changed_file("model.py", ["othermodel.py", "docs/model.py.md"])
    unmarked = mark_changed(diff_summaries(good, bad), ["README.md"])
    assert not any(row.changed_here for row in unmarked.kernels)
    assert "changed here" not in format_diff(unmarked, "table")


def json_row(diff, name):
    import json

    return next(r for r in json.loads(format_diff(diff, "json"))["kernels"] if r["name"] == name)


def test_a_call_added_to_an_unchanged_helper_is_named_at_the_changed_line():
    """The op's innermost frame is the helper (unchanged); the stack above it holds the
    line the commit added: that line names the row, marked; a row of the same file whose
    stack holds no changed line is not marked (per line, not per file)."""
    from dataclasses import replace

    from fwdasv.analysis.explain.kernel_diff import Changes, mark_changed
    from fwdasv.core.kernels import SourceFrame

    caller = SourceFrame("model.py", 191, "Attention.forward", "freqs = precompute(x)")
    helper = SourceFrame("model.py", 242, "precompute", "return torch.polar(a, b)", 8, (caller,))
    other = SourceFrame("model.py", 195, "Attention.forward", "y = x @ w", 4)
    sites = {"aten::polar": helper, "aten::mm": other}

    def at(rows):
        kernels = tuple(replace(row, sources=(sites[row.name],)) for row in rows.kernels)
        return replace(rows, kernels=kernels)

    good = at(summary_of({"aten::mm": (100.0, 4)}))
    bad = at(summary_of({"aten::mm": (130.0, 8), "aten::polar": (9.0, 8)}))
    changes = Changes.parse(
        "diff --git a/model.py b/model.py\n--- a/model.py\n+++ b/model.py\n"
        "@@ -190,0 +191 @@ class Attention:\n+        freqs = precompute(x)\n"
    )
    assert dict(changes.after) == {"model.py": frozenset({191})}
    diff = mark_changed(diff_summaries(good, bad), changes)
    rows = {row.name: row for row in diff.kernels}
    assert rows["aten::polar"].changed_here and rows["aten::polar"].source.line == 191
    assert rows["aten::polar"].source.function == "Attention.forward"
    assert rows["aten::mm"].stands_out and not rows["aten::mm"].changed_here
    assert "model.py:191 Attention.forward [changed here]" in format_diff(diff, "table")


def test_the_headlines_first_figure_has_the_verdicts_sign_under_load():
    """GOOD's processes ran beside a neighbour, BAD's alone: every op within the noise reads
    faster, and the one op the commit added stands out. The total is negative; the
    headline leads with what stands out (slower, +) and says the total moved the other way."""
    goods = rounds_of(BASE, (1.0, 1.6, 1.2))
    bads = rounds_of(BASE, (0.9, 1.1, 1.0), bmm=(100.0, 8))
    diff = diff_rounds(goods, bads)
    assert diff.verdict == "worse" and diff.total_delta_us < 0 < diff.net_us, diff.to_json()
    line = headline(diff)
    assert f"slower: {diff.net_us:+.2f} us per forward (+" in line, line
    assert "the rows within the noise moved the total the other way" in line
