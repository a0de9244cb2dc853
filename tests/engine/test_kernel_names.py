"""`fwdasv.engine.kernel_names`: a GPU kernel's short name, as vLLM's bench groups kernels."""

from __future__ import annotations

from kernel_traces import reference_summary_json


def test_short_names_match_the_reference_files_rows():
    """Every row of vLLM's H200 kernels.json whose example is a whole name (not cut at 300
    characters) groups under its `name`."""
    from fwdasv.engine.kernel_names import short_name

    rows = [r for r in reference_summary_json()["kernels"] if len(r["example"]) < 300]
    assert len(rows) >= 6
    for row in rows:
        assert short_name(row["example"]) == row["name"], row["example"]
