"""Real asv over a real git history: the torch backend end to end on CPU.

A 5-commit history of the demo model package; asv builds a virtualenv, installs
each commit, and runs a suite through fwdasv's engine; then publishes the site.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import results_by_commit

from fwdasv.asv import project as asv_project
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.asv.suitespec import torch_suite_source
from fwdasv.demo.project import build_project

pytestmark = pytest.mark.slow

CASES = ("decode_bs8=8*1@512", "prefill_256=256")


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory: pytest.TempPathFactory, shared_asv_env: Path) -> dict:
    root = tmp_path_factory.mktemp("e2e")
    # 3 commits: a range, every commit stored, published and exported (each commit is a
    # bench process and an install: CI time).
    hashes = build_project(root / "tinylm", commits=3)
    suites = [
        torch_suite_source(
            "TinyLM",
            "tinylm.bench:target",
            CASES,
            iters=2,
            samples=10,
            warmup_s=0.05,
            env={"OMP_NUM_THREADS": "1"},
        ),
        # CUDA graphs only: skipped on a machine without a GPU.
        torch_suite_source("TinyLMGraph", "tinylm.bench:target", CASES[:1], timer="graph"),
    ]
    project = write_torch_project(
        root / "asv", root / "tinylm", "tinylm", suites, env_dir=shared_asv_env
    )
    lines: list[str] = []
    # A range spec, as `asv run main` is used on a branch.
    status = asv_project.run_spec(project, "main", "testbox", echo=lines.append)
    return {"project": project, "hashes": hashes, "status": status, "output": "\n".join(lines)}


def test_run_over_the_range_stores_samples_and_stats_for_every_commit(asv_run: dict) -> None:
    assert asv_run["status"] == 0, asv_run["output"][-3000:]
    stored = results_by_commit(asv_run["project"])
    assert sorted(stored) == sorted(asv_run["hashes"])
    for commit, data in stored.items():
        columns = data["result_columns"]
        row = dict(zip(columns, data["results"]["forward.TinyLM.track_latency"], strict=False))
        assert row["params"] == [[repr(name.split("=")[0]) for name in CASES]]
        for index in range(len(CASES)):
            samples = row["samples"][index]
            assert len(samples) == 10, (commit, samples)
            assert all(0 < s < 10 for s in samples)
            assert (
                row["stats_ci_99_a"][index] <= row["result"][index] <= row["stats_ci_99_b"][index]
            )
            assert row["stats_q_25"][index] <= row["stats_q_75"][index]
            assert row["stats_repeat"][index] == 10


def test_graph_only_suite_is_skipped_not_failed(asv_run: dict) -> None:
    stored = results_by_commit(asv_run["project"])
    for data in stored.values():
        row = dict(
            zip(
                data["result_columns"],
                data["results"]["forward.TinyLMGraph.track_latency"],
                strict=False,
            )
        )
        # asv stores a skipped benchmark as NaN; a failure would be null.
        assert row["result"] is not None and math.isnan(row["result"][0])
    assert "skipped: NotImplementedError" in asv_run["output"]


def test_publish_builds_the_site(asv_run: dict) -> None:
    project = asv_run["project"]
    asv_project.publish_site(project, echo=None)
    index = json.loads((project.html_dir / "index.json").read_text())
    assert "forward.TinyLM.track_latency" in index["benchmarks"]
    graphs = list((project.html_dir / "graphs").rglob("forward.TinyLM.track_latency.json"))
    assert graphs, "no graph written for the latency benchmark"
    points = json.loads(graphs[0].read_text())
    assert len(points) == len(asv_run["hashes"])
    # What the host timer cannot measure (graph vs eager, a graph-only suite) is not
    # published as an empty series; what it measures is.
    assert sorted(index["benchmarks"]) == [
        "forward.TinyLM.track_latency",
        "forward.TinyLM.track_spread_pct",
    ]
    assert not list((project.html_dir / "graphs").rglob("*graph_vs_eager.json"))


def test_export_round_trips_the_e2e_results(asv_run: dict) -> None:
    """`fwdasv export`'s records of this real tree equal asv's own Results.load."""
    import itertools

    from asv.results import Results

    from fwdasv.asv.history import History
    from fwdasv.asv.result_files import param_label

    project = asv_run["project"]
    records = [r for r in History(project.results_dir, samples=True).records()]
    latency = [r for r in records if r.benchmark == "forward.TinyLM.track_latency"]
    assert len(latency) == len(asv_run["hashes"]) * len(CASES)
    loaded = {}
    for path in (project.results_dir / "testbox").glob("*-*.json"):
        result = Results.load(str(path), machine_name="testbox")
        loaded[result.commit_hash] = result
    for record in latency:
        result = loaded[record.commit_hash]
        key = record.benchmark
        params = result.get_result_params(key)
        labels = [tuple(param_label(v) for v in combo) for combo in itertools.product(*params)]
        j = labels.index(tuple(record.params.values()))
        stats = result.get_result_stats(key, params)[j]
        assert record.median == result.get_result_value(key, params)[j]
        assert (record.ci_99_a, record.ci_99_b) == (stats["ci_99_a"], stats["ci_99_b"])
        assert (record.q_25, record.q_75) == (stats["q_25"], stats["q_75"])
        assert list(record.samples) == result.get_result_samples(key, params)[j]
        assert record.unit == "seconds" and record.status == "ok"
        # The validation fields joined from the suite's companion benchmarks.
        assert record.spread_pct is not None and record.spread_pct >= 0
    skipped = [r for r in records if r.benchmark == "forward.TinyLMGraph.track_latency"]
    assert skipped and all(r.status == "skipped" for r in skipped)
