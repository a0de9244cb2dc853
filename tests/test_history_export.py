"""History and export over a results tree written by real asv runs.

The module fixture builds a tiny git project with an asv suite shaped like
fwdasv's (a parameterized track_ returning samples, scalar companions), runs
real `asv run` on an existing environment for three commits and two machines,
and every test reads that tree. asv's own `Results.load` is the oracle.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asv import util as asv_util
from asv.results import Results
from click.testing import CliRunner
from conftest import TESTBOX

from fwdasv.analysis.export import export, write_csv, write_jsonl
from fwdasv.asv.history import (
    FIELDS,
    CommitFilter,
    History,
    HistoryError,
    param_label,
    parse_commit_filter,
)
from fwdasv.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

# Commit 1 runs SUITE_V1; commits 2 and 3 run SUITE_V2, which bumps track_old's
# version (commit 1's result goes stale) and drops track_removed.
SUITE = """
import math


class TinyDecoder:
    params = [["decode_bs1", "prefill_128", "one_sample"]]
    param_names = ["case"]
    unit = "seconds"
    version = "1"

    def track_latency(self, case):
        if case == "one_sample":
            return {{"samples": [2e-4], "number": 1}}  # a 99% CI of +-Infinity
        base = {{"decode_bs1": 1e-4, "prefill_128": 5e-4}}[case] * {scale}
        return {{"samples": [base * (1 + 0.01 * ((7 * i) % 10)) for i in range(12)], "number": 1}}

    def track_spread_pct(self, case):
        return {{"decode_bs1": 0.25, "prefill_128": 0.75, "one_sample": 0.0}}[case]

    track_spread_pct.unit = "percent"

    def track_graph_vs_eager(self, case):
        return float("nan") if case == "prefill_128" else 0.0  # NaN: asv's "skipped"

    track_graph_vs_eager.unit = "relative_rms"


class Grid:
    params = [["a", "b"], [1, 2, 3]]
    param_names = ["mode", "n"]
    unit = "seconds"

    def track_value(self, mode, n):
        value = (ord(mode) * 10 + n) * 1e-6
        return {{"samples": [value] * 5, "number": 1}}


def track_old():
    return 1.0


track_old.version = "{old_version}"
{removed}
"""
REMOVED = '\n\ndef track_removed():\n    return 2.0\n\n\ntrack_removed.version = "1"\n'
SUITE_V1 = SUITE.format(scale=1.0, old_version="1", removed=REMOVED)
SUITE_V2 = SUITE.format(scale=1.1, old_version="2", removed="")

MACHINES = {
    "testbox": {
        **TESTBOX,
        "ram": "8GB",
        "gpu": "NVIDIA H200",
        "gpu_count": 1,
        "gpu_uuids": "GPU-0000",
        "driver": "570.86.15",
        "cuda": "12.8",
        "clock_policy": "locked:1980MHz",
    },
    "otherbox": {
        "machine": "otherbox",
        "os": "Linux",
        "arch": "x86_64",
        "cpu": "test cpu",
        "num_cpu": "2",
        "ram": "8GB",
        "gpu": "NVIDIA H100",
        "gpu_count": 2,
        "driver": "570.86.15",
        "cuda": "12.8",
    },
}
PER_COMMIT = 3 * 3 + 2 * 3 + 1  # TinyDecoder methods x cases, Grid combos, track_old


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def _asv_run(repo: Path, home: Path, commit: str, machine: str) -> None:
    argv = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "-E",
        f"existing:{sys.executable}",
        "--set-commit-hash",
        commit,
        "--machine",
        machine,
        "--record-samples",
        "--launch-method",
        "spawn",
        "--show-stderr",
    ]
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, (
        f"asv run {commit[:8]} on {machine}: rc {done.returncode}\n"
        + (done.stdout + done.stderr)[-3000:]
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("asvtree")
    home = base / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({**MACHINES, "version": 1}))
    repo = base / "project"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "asv.conf.json").write_text(
        json.dumps(
            {
                "version": 1,
                "project": "tiny",
                "repo": ".",
                "branches": ["main"],
                "environment_type": "existing",
                "benchmark_dir": "benchmarks",
                "results_dir": "results",
                "html_dir": "html",
                "launch_method": "spawn",
            }
        )
    )
    (repo / ".gitignore").write_text("results/\nhtml/\n")
    _git(repo, "init", "-q", "-b", "main")
    commits = []
    for i, suite in enumerate((SUITE_V1, SUITE_V2, SUITE_V2)):
        (repo / "benchmarks" / "forward.py").write_text(suite)
        (repo / "model.py").write_text(f"LAYERS = {i}\n")
        _git(repo, "add", "-A")
        # A minute apart, as a history is: the markdown table's order is the commit dates'.
        stamp = f"2026-01-01T00:{i:02d}:00+00:00"
        with pytest.MonkeyPatch.context() as dated:
            dated.setenv("GIT_AUTHOR_DATE", stamp)
            dated.setenv("GIT_COMMITTER_DATE", stamp)
            _git(repo, "commit", "-q", "-m", f"commit {i}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    for i, commit in enumerate(commits):
        # asv discovers an existing environment's suite in the working tree.
        (repo / "benchmarks" / "forward.py").write_text(SUITE_V1 if i == 0 else SUITE_V2)
        _asv_run(repo, home, commit, "testbox")
    _asv_run(repo, home, commits[-1], "otherbox")
    return {"results": repo / "results", "repo": repo, "commits": commits}


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


def test_records_round_trip_against_asv_results_load(tree: dict[str, Any]) -> None:
    history = History(tree["results"], samples=True)
    records = list(history.records())
    asv_results = _asv_view(tree["results"])
    benchmarks = asv_util.load_json(str(tree["results"] / "benchmarks.json"), api_version=2)

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


def test_record_fields_and_expansion_order(tree: dict[str, Any]) -> None:
    records = list(History(tree["results"], machines=["testbox"]).records())
    first = tree["commits"][0]
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
    commit_time = int(_git(tree["repo"], "log", "-1", "--format=%at", first))
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


def test_nan_and_infinity_tokens_survive(tree: dict[str, Any]) -> None:
    raw = next(p for p in (tree["results"] / "testbox").glob("*.json") if p.name != "machine.json")
    text = raw.read_text()
    assert "NaN" in text and "-Infinity" in text  # asv wrote the tokens

    records = list(History(tree["results"], machines=["testbox"]).records())
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


def test_csv_and_jsonl_parse_back(tree: dict[str, Any], tmp_path: Path) -> None:
    records = list(History(tree["results"], samples=True).records())
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
        report = export(History(tree["results"], samples=True), fmt, out)
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


def test_filters(tree: dict[str, Any]) -> None:
    c1, c2, c3 = tree["commits"]
    other = list(History(tree["results"], machines=["otherbox"]).records())
    assert len(other) == PER_COMMIT
    assert {r.machine for r in other} == {"otherbox"}
    assert {r.gpu for r in other} == {"NVIDIA H100"}

    both = list(History(tree["results"], machines=["otherbox", "testbox"]).records())
    assert len(both) == 4 * PER_COMMIT - 1

    grid = list(History(tree["results"], bench=["Grid"]).records())
    assert {r.benchmark for r in grid} == {"forward.Grid.track_value"}
    assert len(grid) == 4 * 6
    # As `asv run -b`: the pattern also sees name(params), and `$` anchors the name.
    one_case = list(History(tree["results"], bench=[r"track_latency\('decode"]).records())
    assert {(r.metric, r.case) for r in one_case} == {("track_latency", "decode_bs1")}
    anchored = list(History(tree["results"], bench=["track_latency$"]).records())
    assert len(anchored) == 4 * 3
    # A filtered run counts only the stale results it would have exported.
    history = History(tree["results"], bench=["Grid"])
    list(history.records())
    assert history.report.dropped_version == 0

    ranged = parse_commit_filter([f"{c1}..{c3}"], tree["repo"])
    records = list(History(tree["results"], commits=ranged).records())
    assert {r.commit_hash for r in records} == {c2, c3}
    prefix = CommitFilter(frozenset({c1[:6].upper()}))
    records = list(History(tree["results"], commits=prefix).records())
    assert {r.commit_hash for r in records} == {c1}
    listed = parse_commit_filter([f"{c1[:10]},{c3}"], None)
    records = list(History(tree["results"], machines=["testbox"], commits=listed).records())
    assert {r.commit_hash for r in records} == {c1, c3}


def test_missing_results_dir_and_unknown_machine(tree: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such results directory"):
        History(tmp_path / "nowhere")
    with pytest.raises(HistoryError, match=r"unknown machine 'h100box'.*known: otherbox, testbox"):
        History(tree["results"], machines=["h100box"])
    with pytest.raises(HistoryError, match="needs the project's git clone"):
        parse_commit_filter(["v1..v2"], None)
    with pytest.raises(HistoryError, match=r"git rev-list 'nope\.\.HEAD' failed"):
        parse_commit_filter(["nope..HEAD"], tree["repo"])
    with pytest.raises(HistoryError, match="bad regular expression"):
        History(tree["results"], bench=["track_(latency"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(HistoryError, match=r"benchmarks\.json: missing"):
        History(tmp_path / "empty")

    runner = CliRunner()
    result = runner.invoke(main, ["export", str(tmp_path / "nowhere")])
    # Bad input is 2, as for the other analysis commands (1: unreadable under --strict).
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert "no such results directory" in result.stderr
    result = runner.invoke(main, ["export", str(tree["results"]), "-m", "h100box"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: unknown machine 'h100box' in {tree['results']} (known: otherbox, testbox)\n"
    )


def _corrupt_copy(tree: dict[str, Any], tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(tree["results"], results)
    (victim,) = (results / "testbox").glob(f"{tree['commits'][1][:8]}-*.json")
    text = victim.read_text()
    victim.write_text(text[: len(text) // 2])
    return results, victim


def test_corrupt_result_file_is_reported_and_the_rest_exported(
    tree: dict[str, Any], tmp_path: Path
) -> None:
    results, victim = _corrupt_copy(tree, tmp_path)
    history = History(results)
    records = list(history.records())
    assert len(records) == 3 * PER_COMMIT - 1
    assert tree["commits"][1] not in {r.commit_hash for r in records}
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
    assert result.exit_code == 1
    assert "Error: 1 result file could not be read (--strict)" in result.stderr
    assert len(strict_out.read_text().splitlines()) == 1 + len(records)


def test_cli_formats_filters_and_progress(tree: dict[str, Any], tmp_path: Path) -> None:
    runner = CliRunner()
    c1, _, c3 = tree["commits"]
    result = runner.invoke(
        main,
        [
            "export",
            str(tree["results"]),
            "--format",
            "jsonl",
            "-m",
            "testbox",
            "-b",
            "track_latency$",
            "--commits",
            f"{c1}..{c3}",
            "--repo",
            str(tree["repo"]),
            "--samples",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2 * 3
    assert all(r["metric"] == "track_latency" and r["machine"] == "testbox" for r in lines)
    assert all(len(r["samples"]) == r["sample_count"] for r in lines)
    assert "6 records from 2 result files" in result.stderr

    out = tmp_path / "table.md"
    result = runner.invoke(
        main, ["export", str(tree["results"]), "--format", "markdown", "-o", str(out), "--progress"]
    )
    assert result.exit_code == 0, result.output
    assert "exporting result files" in result.stderr
    table = out.read_text().splitlines()
    assert table[0].startswith("| commit_hash | commit_date | machine | benchmark | case |")
    assert len(table) == 2 + 4 * PER_COMMIT - 1
    # In the history's order (oldest commit first), not the result files' hash order.
    shown = [row.split("|")[1].strip() for row in table[2:]]
    order = [c[:8] for c in tree["commits"]]
    assert shown == sorted(shown, key=order.index), shown
    assert shown[0] == order[0] and shown[-1] == order[-1]

    result = runner.invoke(main, ["export", str(tree["results"]), "--format", "xml"])
    assert result.exit_code == 2 and "Invalid value for '--format'" in result.stderr


def test_cli_defaults_to_the_results_dir_of_the_configuration(
    tree: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    c1, _, c3 = tree["commits"]
    explicit = runner.invoke(main, ["export", str(tree["results"]), "--format", "jsonl"])
    assert explicit.exit_code == 0, explicit.output
    monkeypatch.chdir(tree["repo"])  # asv.conf.json here, as for the other commands
    default = runner.invoke(main, ["export", "--format", "jsonl"])
    assert default.exit_code == 0, default.output
    assert default.stdout == explicit.stdout and default.stdout

    # --config from elsewhere; its repository resolves --commits ranges.
    monkeypatch.chdir(tmp_path)
    config = str(tree["repo"] / "asv.conf.json")
    ranged = runner.invoke(
        main, ["export", "--config", config, "--format", "jsonl", "--commits", f"{c1}..{c3}"]
    )
    assert ranged.exit_code == 0, ranged.output
    assert {json.loads(line)["commit_hash"] for line in ranged.stdout.splitlines()} == set(
        tree["commits"][1:]
    )

    missing = runner.invoke(main, ["export"])
    assert missing.exit_code == 2
    assert missing.stderr.splitlines() == [
        f"Error: asv configuration {tmp_path / 'asv.conf.json'} does not exist; pass --config "
        "PATH, or give the results directory (RESULTS_DIR)"
    ]


def test_operator_script_runs_the_same_command(tree: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "history.csv"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "export_results.py"),
            str(tree["results"]),
            "-o",
            str(out),
            "-m",
            "otherbox",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == PER_COMMIT
    assert {r["machine"] for r in rows} == {"otherbox"}
    assert f"{PER_COMMIT} records from 1 result file" in done.stderr

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_results.py"), str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1


def test_a_record_is_a_frozen_value_and_its_row_is_plain_json(tree: dict[str, Any]) -> None:
    import dataclasses

    from fwdasv.asv.history import SAMPLES_FIELD, Record

    (record, *_) = [
        r
        for r in History(tree["results"], machines=["testbox"], samples=True).records()
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
