"""`fwdasv.analysis.explain.kernel_diff_format`: a kernel diff as a table, JSON and Markdown."""

from __future__ import annotations

from kernel_traces import check_json_contract, summary_of

from fwdasv.analysis.explain.kernel_diff import diff_summaries
from fwdasv.analysis.explain.kernel_diff_format import FORMATS, format_diff


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
