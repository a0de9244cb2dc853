"""`fwdasv.analysis.export`: CSV and JSON lines of conftest's `results_tree` (real asv results
of 3 commits on 2 machines) parse back, non-finite values included.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from fwdasv.analysis.export import export, write_csv, write_jsonl
from fwdasv.asv.history import FIELDS, History

pytestmark = pytest.mark.slow


def test_nan_and_infinity_tokens_survive(results_tree: dict[str, Any]) -> None:
    raw = next(
        p for p in (results_tree["results"] / "testbox").glob("*.json") if p.name != "machine.json"
    )
    text = raw.read_text()
    assert "NaN" in text and "-Infinity" in text  # asv wrote the tokens

    records = list(History(results_tree["results"], machines=["testbox"]).records())
    skipped = [r for r in records if r.metric == "track_graph_vs_eager" and r.case == "prefill_128"]
    assert skipped and all(r.status == "skipped" and r.median is None for r in skipped)
    prefill = [r for r in records if r.metric == "track_latency" and r.case == "prefill_128"]
    assert prefill and all(r.graph_vs_eager is None for r in prefill)
    one = [r for r in records if r.metric == "track_latency" and r.case == "one_sample"]
    assert one and all(
        r.ci_99_a == -math.inf and r.ci_99_b == math.inf and r.sample_count == 1 for r in one
    )

    csv_text = io.StringIO()
    write_csv(records, csv_text, FIELDS)
    rows = list(csv.DictReader(io.StringIO(csv_text.getvalue())))
    assert "nan" not in csv_text.getvalue().lower()
    row = next(r for r in rows if r["metric"] == "track_latency" and r["case"] == "one_sample")
    assert float(row["ci_99_a"]) == -math.inf and float(row["ci_99_b"]) == math.inf
    row = next(
        r for r in rows if r["metric"] == "track_graph_vs_eager" and r["case"] == "prefill_128"
    )
    assert row["median"] == "" and row["status"] == "skipped"

    lines = io.StringIO()
    write_jsonl(records, lines, FIELDS)
    assert "NaN" not in lines.getvalue()
    parsed = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert parsed == [record.as_row() for record in records]


def test_csv_and_jsonl_parse_back(results_tree: dict[str, Any], tmp_path: Path) -> None:
    records = list(History(results_tree["results"], samples=True).records())
    fields = (*FIELDS, "samples")
    # The fast CSV writer gives csv.DictWriter's bytes.
    fast, plain = io.StringIO(), io.StringIO()
    write_csv(records, fast, fields)
    writer = csv.DictWriter(plain, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow(
            {
                k: json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else v
                for k, v in record.as_row(fields).items()
            }
        )
    assert fast.getvalue() == plain.getvalue()

    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"history.{fmt}"
        report = export(History(results_tree["results"], samples=True), fmt, out)
        assert report.records == len(records)
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
        if fmt == "jsonl":
            rows = [record.as_row(fields) for record in records]
            assert [json.loads(line) for line in out.read_text().splitlines()] == rows
            continue
        with open(out, newline="") as f:
            reader = csv.DictReader(f)
            assert tuple(reader.fieldnames or ()) == fields
            rows = list(reader)
        assert len(rows) == len(records)
        for row, record in zip(rows, records, strict=True):
            for key in ("median", "ci_99_a", "ci_99_b", "q_25", "q_75", "spread_pct", "duration_s"):
                expected = getattr(record, key)
                assert (float(row[key]) if row[key] else None) == expected, key
            count = int(row["sample_count"]) if row["sample_count"] else None
            assert count == record.sample_count
            assert json.loads(row["params"]) == record.params
            assert json.loads(row["samples"] or "null") == record.as_row(fields)["samples"]
            assert row["commit_hash"] == record.commit_hash
