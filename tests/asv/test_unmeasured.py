"""`fwdasv.asv.unmeasured`: a series no timer measured is kept off the published site."""

from __future__ import annotations

from pathlib import Path


def _site(tmp_path: Path, graphs: dict[str, list]) -> Path:
    """A published tree: index.json listing every benchmark, and its graph files."""
    import json

    html = tmp_path / "html"
    names = sorted({Path(path).stem for path in graphs} - {"summary"})
    index = {"project": "p", "benchmarks": {name: {"name": name} for name in names}}
    html.mkdir()
    (html / "index.json").write_text(json.dumps(index))
    for path, points in graphs.items():
        target = html / "graphs" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(points))
    return html


def test_a_benchmark_no_timer_measured_is_not_published(tmp_path: Path) -> None:
    import json

    from fwdasv.asv.unmeasured import drop_unmeasured

    cpu, gpu = "machine-cpu/python-3.11", "machine-gpu/python-3.11"
    html = _site(
        tmp_path,
        {
            f"{cpu}/f.S.track_latency.json": [[1, [0.5, 0.7]], [2, [0.6, None]]],
            "summary/f.S.track_latency.json": [[1, 0.6], [2, 0.6]],
            # graph vs eager: NaN under the host timer, which asv publishes as nothing
            f"{cpu}/f.S.track_graph_vs_eager.json": [],
            "summary/f.S.track_graph_vs_eager.json": [],
            # measured by one machine's timer only: kept
            f"{cpu}/f.S.track_clock_uncertainty_us.json": [[1, [None, None]]],
            f"{gpu}/f.S.track_clock_uncertainty_us.json": [[1, [12.5, None]]],
            # The Benchmark list page's table of each machine (asv's summarylist rows).
            f"{cpu}/summary.json": [
                {"name": "f.S.track_latency", "idx": 0, "pretty_name": "f.S.track_latency"},
                {"name": "f.S.track_graph_vs_eager", "idx": 0, "pretty_name": "graph"},
                {"name": "f.S.track_clock_uncertainty_us", "idx": 0, "pretty_name": "clock"},
            ],
        },
    )
    assert drop_unmeasured(html) == ["f.S.track_graph_vs_eager"]
    # No row of the list names a benchmark the index dropped (summarylist.js reads it there).
    rows = json.loads((html / "graphs" / cpu / "summary.json").read_text())
    assert [r["name"] for r in rows] == ["f.S.track_latency", "f.S.track_clock_uncertainty_us"]
    index = json.loads((html / "index.json").read_text())
    assert sorted(index["benchmarks"]) == ["f.S.track_clock_uncertainty_us", "f.S.track_latency"]
    assert not list(html.rglob("f.S.track_graph_vs_eager.json"))
    assert (html / "graphs" / cpu / "f.S.track_clock_uncertainty_us.json").is_file()
    # Again: nothing left to drop, nothing changed.
    assert drop_unmeasured(html) == []
    assert json.loads((html / "index.json").read_text()) == index
