"""`fwdasv.analysis.findings.graph_paths`: where `asv publish` files a series' graph."""

from __future__ import annotations

from fwdasv.analysis.findings.graph_paths import graph_file_path


def test_graph_paths_match_asv() -> None:
    """Where `asv publish` writes a graph: the findings name it (`graph_path`)."""
    from asv.graph import Graph

    graph = {"machine": "box|1", "os": "Linux", "python": "3.11", "branch": "main"}
    for params in (graph, {**graph, "machine": "other"}, {"a": None, "b": "", "c": "x/y<z"}):
        assert graph_file_path(params, "m.S.t") == Graph.get_file_path(params, "m.S.t")
