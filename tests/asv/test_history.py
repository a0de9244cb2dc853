"""`fwdasv.asv.history`: asv's results read back as flat records, over conftest's
`results_tree` (a tiny git project with a suite shaped like fwdasv's, measured by real
`asv run` on an existing environment: three commits, two machines). asv's own
`Results.load` is the oracle.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from asv import util as asv_util
from asv.results import Results
from asv_results import MACHINES, PER_COMMIT
from click.testing import CliRunner
from helpers import git

from fwdasv.asv.commit_filter import parse_commit_filter
from fwdasv.asv.history import FIELDS, History
from fwdasv.asv.result_files import HistoryError, param_label
from fwdasv.cli import main

pytestmark = pytest.mark.slow


def _same(a: Any, b: Any) -> bool:
    """Equality where asv's NaN ("skipped") is the records' None."""
    if isinstance(b, float) and math.isnan(b):
        return a is None
    return a == b


def _asv_view(results: Path) -> dict[tuple[str, str], Results]:
    out = {}
    for machine in MACHINES:
        for path in (results / machine).glob("*.json"):
            if path.name != "machine.json":
                loaded = Results.load(str(path), machine_name=machine)
                out[(loaded.commit_hash, machine)] = loaded
    return out


def test_records_round_trip_against_asv_results_load(results_tree: dict[str, Any]) -> None:
    history = History(results_tree["results"], samples=True)
    records = list(history.records())
    asv_results = _asv_view(results_tree["results"])
    benchmarks = asv_util.load_json(str(results_tree["results"] / "benchmarks.json"), api_version=2)

    assert len(records) == 4 * PER_COMMIT - 1, [r.benchmark for r in records]
    assert history.report.files_read == 4
    assert history.report.dropped_version == 1  # commit 1's track_old (version 1 != 2)
    assert history.report.dropped_unknown == 1  # commit 1's track_removed
    assert history.report.problems == []

    # asv's own version filter selects the same results, case by case.
    expected_keys = {
        (commit, machine, key, combo)
        for (commit, machine), loaded in asv_results.items()
        for key in loaded.get_result_keys(benchmarks)
        for combo in itertools.product(*loaded.get_result_params(key))
    }
    exported_keys = set()
    for record in records:
        loaded = asv_results[(record.commit_hash, record.machine)]
        key = record.benchmark
        params = loaded.get_result_params(key)
        combos = list(itertools.product(*params))
        labels = [tuple(param_label(v) for v in combo) for combo in combos]
        j = labels.index(tuple(record.params.values()))
        exported_keys.add((record.commit_hash, record.machine, key, combos[j]))

        where = f"{key}({record.case}) @ {record.commit_hash[:8]}/{record.machine}"
        assert _same(record.median, loaded.get_result_value(key, params)[j]), where
        stats = loaded.get_result_stats(key, params)[j] or {}
        for field, stat in (
            ("ci_99_a", "ci_99_a"),
            ("ci_99_b", "ci_99_b"),
            ("q_25", "q_25"),
            ("q_75", "q_75"),
            ("sample_count", "repeat"),
        ):
            value = getattr(record, field)
            assert value == stats.get(stat), (where, field, value, stats)
        stored = None if record.samples is None else list(record.samples)
        assert stored == loaded.get_result_samples(key, params)[j], where
        assert record.env_name == loaded.env_name
        assert record.unit == benchmarks[key]["unit"]
    assert exported_keys == expected_keys


def test_record_fields_and_expansion_order(results_tree: dict[str, Any]) -> None:
    records = list(History(results_tree["results"], machines=["testbox"]).records())
    first = results_tree["commits"][0]
    for record in records:
        assert tuple(record.as_row()) == FIELDS and record.samples is None
    grid = [r for r in records if r.benchmark == "forward.Grid.track_value"]
    assert [r.case for r in grid[:6]] == ["a, 1", "a, 2", "a, 3", "b, 1", "b, 2", "b, 3"]
    for record in grid:
        mode, n = record.params["mode"], int(record.params["n"])
        assert record.median == pytest.approx((ord(mode) * 10 + n) * 1e-6, rel=1e-12)
        assert record.sample_count == 5

    latency = next(
        r
        for r in records
        if r.benchmark == "forward.TinyDecoder.track_latency"
        and r.commit_hash == first
        and r.case == "decode_bs1"
    )
    assert latency.suite == "forward.TinyDecoder"
    assert latency.metric == "track_latency"
    assert latency.params == {"case": "decode_bs1"}
    assert latency.median == pytest.approx(1e-4 * 1.045)
    assert latency.sample_count == 12
    assert latency.ci_99_a <= latency.q_25 <= latency.median <= latency.q_75
    # Validation fields joined from the companion benchmarks of the same case.
    assert latency.spread_pct == 0.25
    assert latency.graph_vs_eager == 0.0
    # Machine keys from the machine file; dates as ISO 8601 UTC.
    assert latency.machine == "testbox"
    assert latency.gpu == "NVIDIA H200"
    assert latency.gpu_count == 1
    assert latency.gpu_uuids == "GPU-0000"
    assert latency.driver == "570.86.15"
    assert latency.cuda == "12.8"
    assert latency.clock_policy == "locked:1980MHz"
    commit_time = int(git(results_tree["repo"], "log", "-1", "--format=%at", first))
    expected_date = subprocess.run(
        ["date", "-u", "-d", f"@{commit_time}", "+%Y-%m-%dT%H:%M:%SZ"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout.strip()
    assert latency.commit_date == expected_date
    assert latency.started_at.endswith("Z") and "T" in latency.started_at
    assert latency.duration_s > 0


def test_missing_results_dir_and_unknown_machine(
    results_tree: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.raises(HistoryError, match="no such results directory"):
        History(tmp_path / "nowhere")
    with pytest.raises(HistoryError, match=r"unknown machine 'h100box'.*known: otherbox, testbox"):
        History(results_tree["results"], machines=["h100box"])
    with pytest.raises(HistoryError, match="needs the project's git clone"):
        parse_commit_filter(["v1..v2"], None)
    with pytest.raises(HistoryError, match=r"git rev-list 'nope\.\.HEAD' failed"):
        parse_commit_filter(["nope..HEAD"], results_tree["repo"])
    with pytest.raises(HistoryError, match="bad regular expression"):
        History(results_tree["results"], bench=["track_(latency"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(HistoryError, match=r"benchmarks\.json: missing"):
        History(tmp_path / "empty")

    runner = CliRunner()
    result = runner.invoke(main, ["export", str(tmp_path / "nowhere")])
    # Bad input is 2, as for the other analysis commands (1: unreadable under --strict).
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert "no such results directory" in result.stderr
    result = runner.invoke(main, ["export", str(results_tree["results"]), "-m", "h100box"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: unknown machine 'h100box' in {results_tree['results']} (known: otherbox, testbox)"
        ": no results are stored under that name; pass --machine with one of those, or measure "
        "under that name first (`asv run --machine NAME`)\n"
    )


def _corrupt_copy(results_tree: dict[str, Any], tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(results_tree["results"], results)
    (victim,) = (results / "testbox").glob(f"{results_tree['commits'][1][:8]}-*.json")
    text = victim.read_text()
    victim.write_text(text[: len(text) // 2])
    return results, victim


def test_corrupt_result_file_is_reported_and_the_rest_exported(
    results_tree: dict[str, Any], tmp_path: Path
) -> None:
    results, victim = _corrupt_copy(results_tree, tmp_path)
    history = History(results)
    records = list(history.records())
    assert len(records) == 3 * PER_COMMIT - 1
    assert results_tree["commits"][1] not in {r.commit_hash for r in records}
    assert len(history.report.problems) == 1
    assert history.report.problems[0].path == str(victim)
    assert "truncated or corrupt" in history.report.problems[0].message

    runner = CliRunner()
    out = tmp_path / "out.csv"
    result = runner.invoke(main, ["export", str(results), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert str(victim) in result.stderr and "could not be read" in result.stderr
    assert len(out.read_text().splitlines()) == 1 + len(records)

    strict_out = tmp_path / "strict.csv"
    result = runner.invoke(main, ["export", str(results), "-o", str(strict_out), "--strict"])
    assert result.exit_code == 2
    assert "Error: 1 result file could not be read (--strict)" in result.stderr
    assert len(strict_out.read_text().splitlines()) == 1 + len(records)


def test_a_record_is_a_frozen_value_and_its_row_is_plain_json(results_tree: dict[str, Any]) -> None:
    import dataclasses

    from fwdasv.asv.history import SAMPLES_FIELD, Record

    (record, *_) = [
        r
        for r in History(results_tree["results"], machines=["testbox"], samples=True).records()
        if r.metric == "track_latency" and r.case == "decode_bs1"
    ]
    assert isinstance(record, Record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.median = 0.0  # type: ignore[misc]
    row = record.as_row()
    assert tuple(row) == FIELDS and SAMPLES_FIELD not in row
    assert row["benchmark"] == record.benchmark == "forward.TinyDecoder.track_latency"
    assert row["params"] == {"case": "decode_bs1"} and row["status"] == "ok"
    # With samples: the last key, a JSON list (the record keeps a tuple).
    full = record.as_row((*FIELDS, SAMPLES_FIELD))
    assert list(full)[-1] == SAMPLES_FIELD and isinstance(full[SAMPLES_FIELD], list)
    assert full[SAMPLES_FIELD] == list(record.samples) and len(record.samples) == 12
    assert json.loads(json.dumps(full)) == full
    assert record.sample_values() == [s for s in record.samples if s is not None]
