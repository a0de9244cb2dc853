"""fwdasv's publish step makes asv's page load its libraries from the site itself."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from pathlib import Path

import asv
import pytest

from fwdasv.asv.offline_site import LIB_DIR, LOCAL_COPIES, SiteError, localize, make_self_contained

ASV_INDEX = Path(asv.__file__).parent / "www" / "index.html"
COPIES = Path(__file__).resolve().parent.parent / "fwdasv" / "data" / "asv_www"


def test_every_cdn_library_of_asvs_page_is_replaced_by_a_copy_with_its_integrity() -> None:
    original = ASV_INDEX.read_text("utf-8")
    localized, used = localize(original, COPIES)
    assert sorted(set(used)) == sorted(set(LOCAL_COPIES.values()))
    tags = re.findall(r"<(?:script|link)\b[^>]*>", localized)
    assert not [t for t in tags if re.search(r'(?:src|href)="https?://', t)]
    for tag in tags:
        local = re.search(rf'(?:src|href)="{LIB_DIR}/([^"]+)"', tag)
        if local is None:
            continue
        digest = base64.b64encode(hashlib.sha384((COPIES / local.group(1)).read_bytes()).digest())
        assert f'integrity="sha384-{digest.decode()}"' in tag, tag
    # Nothing but those tags changed.
    strip = re.compile(r"<(?:script|link)\b[^>]*>")
    assert strip.sub("", localized) == strip.sub("", original)


def test_make_self_contained_copies_the_libraries_and_is_idempotent(tmp_path: Path) -> None:
    shutil.copy(ASV_INDEX, tmp_path / "index.html")
    make_self_contained(tmp_path)
    once = (tmp_path / "index.html").read_text()
    assert sorted(p.name for p in (tmp_path / LIB_DIR).iterdir()) == sorted(
        set(LOCAL_COPIES.values())
    )
    make_self_contained(tmp_path)
    assert (tmp_path / "index.html").read_text() == once


def test_an_unknown_cdn_library_is_an_error_not_a_silently_broken_site() -> None:
    page = '<script src="https://cdn.example.org/new-lib.js"></script>'
    with pytest.raises(SiteError, match=r"new-lib\.js"):
        localize(page, COPIES)


# --- series no timer measured ---------------------------------------------------------------


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


@pytest.mark.slow
def test_publish_says_where_the_site_is_and_how_to_open_it(drawn_history) -> None:
    from click.testing import CliRunner

    from fwdasv.cli import main

    history = drawn_history("site-hint", [1.0, 1.0, 1.5], samples=10)
    config = history.project.config_path
    result = CliRunner().invoke(main, ["publish", "--config", str(config)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    index = history.project.html_dir / "index.html"
    assert index.is_file() and f"site: {index}" in lines
    (view,) = [line for line in lines if line.startswith("to view it: ")]
    assert f"asv preview --config {config}" in view
    assert any("file:// does not work" in line for line in lines)
