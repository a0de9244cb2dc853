"""How fast `fwdasv export` reads a long asv history, measured against asv's own loader.

Generates a synthetic results tree in asv's exact v2 format (result_columns rows, stats
truncated to 5 digits as asv saves them, stored samples, NaN and +-Infinity tokens, a stale
benchmark version, failed results), then times, in one process on the same files,
alternating the order each repetition:
  fwdasv-csv      fwdasv.analysis.export.export(History(...), "csv", file)   (the CLI's work)
  fwdasv-records  iterating History.records() without writing      (parse + flatten)
  asv-load        asv.results.Results.load per file, then every key's
                  get_result_value / get_result_stats / get_result_samples
and prints files/s, records/s and the fwdasv / asv time ratio (median over repetitions):
what flat records and a CSV file cost over asv's bare load (which writes nothing).

    python bench/speed/export_speed.py                    # 10,000 commits x 50 benchmarks
    python bench/speed/export_speed.py --commits 1000 --repeat 5
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from asv.results import Results
from asv.util import truncate_float_list
from asv_runner.statistics import compute_stats

from fwdasv.analysis.export import export
from fwdasv.asv.history import History

MACHINE = "h200-a"
ENV_NAME = "virtualenv-py3.11-torch2.13.0"
COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]
METHODS = (
    ("track_latency", "seconds"),
    ("track_spread_pct", "%"),
    ("track_graph_vs_eager", "relative rms"),
)
STALE_METHOD = "forward.Model00.track_spread_pct"  # version "2" now; early commits stored "1"
STALE_FRACTION = 0.1


def _suite(benchmarks: int, cases: int) -> dict[str, dict[str, Any]]:
    """benchmarks.json entries: classes of (latency, spread, graph_vs_eager), case params."""
    out: dict[str, dict[str, Any]] = {}
    for i in range(benchmarks):
        suite, (method, unit) = f"forward.Model{i // 3:02d}", METHODS[i % 3]
        name = f"{suite}.{method}"
        params = [[repr(f"decode_bs{2**k}_{1 << (10 + k % 4)}") for k in range(cases)]]
        out[name] = {
            "code": f"class Model{i // 3:02d}(asvsuite.VllmSuite):\n    def {method}(...): ...",
            "name": name,
            "param_names": ["case"],
            "params": params,
            "timeout": 1800,
            "type": "track",
            "unit": unit,
            "version": "2" if name == STALE_METHOD else "1",
        }
    return out


def _latency_pool(rng: random.Random, samples: int, size: int = 512) -> list[tuple[float, dict]]:
    """(median, stats, samples) as asv computes and stores them; 1% single-sample (CI +-inf)."""
    pool = []
    for _ in range(size):
        base = rng.uniform(2e-5, 5e-3)
        n = 1 if rng.random() < 0.01 else samples
        values = [base * (1 + rng.gauss(0, 0.003)) for _ in range(n)]
        median, stats = compute_stats(values, 1)
        pool.append((median, stats, values))
    return pool


def _file(
    rng: random.Random,
    index: int,
    commits: int,
    suite: dict[str, dict[str, Any]],
    pool: list,
) -> tuple[str, dict[str, Any]]:
    commit_hash = hashlib.sha1(f"commit {index}".encode()).hexdigest()
    date_ms = (1_767_225_600 + index * 3600) * 1000
    started = date_ms + 7_200_000
    results: dict[str, list] = {}
    for name, bench in suite.items():
        params = bench["params"]
        size = len(params[0])
        version = bench["version"]
        if name == STALE_METHOD and index < commits * STALE_FRACTION:
            version = "1"
        row: list[Any]
        if name.endswith("track_latency"):
            picks = [pool[rng.randrange(len(pool))] for _ in range(size)]
            result: list[Any] = [p[0] for p in picks]
            stats: list[Any] = [p[1] for p in picks]
            samples: list[Any] = [p[2] for p in picks]
            if rng.random() < 0.005:  # a failed case: asv stores null, no stats
                result[0], stats[0], samples[0] = None, None, None
            row = [
                result,
                params,
                version,
                started,
                truncate_float_list(rng.uniform(20, 200)),
                *(
                    truncate_float_list([s and s[key] for s in stats])
                    for key in ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
                ),
                samples,
            ]
        else:
            if name.endswith("graph_vs_eager"):
                result = [float("nan") if rng.random() < 0.02 else 0.0 for _ in range(size)]
            else:
                result = [round(rng.uniform(0.05, 0.8), 4) for _ in range(size)]
            row = [result, params, version, started, truncate_float_list(rng.uniform(0.01, 0.1))]
        started += 60_000
        results[name] = row
    data = {
        "commit_hash": commit_hash,
        "env_name": ENV_NAME,
        "date": date_ms,
        "params": {**_machine(), "python": "3.11", "torch": "2.13.0"},
        "python": "3.11",
        "requirements": {"torch": "2.13.0"},
        "env_vars": {},
        "result_columns": COLUMNS,
        "results": results,
        "durations": {"<build>": 412.3, "<setup_cache forward:42>": 95.1},
        "version": 2,
    }
    return f"{commit_hash[:8]}-{ENV_NAME}.json", data


def _machine() -> dict[str, Any]:
    return {
        "machine": MACHINE,
        "os": "Linux 6.8.0",
        "arch": "x86_64",
        "cpu": "Intel(R) Xeon(R) Platinum 8480+",
        "num_cpu": "224",
        "ram": "2113389256",
        "gpu": "NVIDIA H200",
        "gpu_count": 1,
        "gpu_uuids": "GPU-8e2a6c1d-53b7-4f0e-9a41-0c1b2d3e4f50",
        "driver": "570.86.15",
        "cuda": "12.8",
        "clock_policy": "locked:1980MHz",
    }


def generate(root: Path, commits: int, benchmarks: int, cases: int, samples: int) -> None:
    """Write the tree (json.dump, as asv's compact write_json does)."""
    rng = random.Random(1234)
    suite = _suite(benchmarks, cases)
    pool = _latency_pool(rng, samples)
    (root / MACHINE).mkdir(parents=True)
    (root / MACHINE / "machine.json").write_text(
        json.dumps({**_machine(), "version": 1}, indent=4, sort_keys=True)
    )
    (root / "benchmarks.json").write_text(
        json.dumps({**suite, "version": 2}, indent=4, sort_keys=True)
    )
    for index in range(commits):
        name, data = _file(rng, index, commits, suite, pool)
        with open(root / MACHINE / name, "w", encoding="utf-8") as f:
            json.dump(data, f)


def _asv_load(files: list[Path]) -> int:
    touched = 0
    for path in files:
        loaded = Results.load(str(path), machine_name=MACHINE)
        for key in loaded.get_all_result_keys():
            params = loaded.get_result_params(key)
            values = loaded.get_result_value(key, params)
            stats = loaded.get_result_stats(key, params)
            samples = loaded.get_result_samples(key, params)
            for _value, _stat, _sample in zip(values, stats, samples, strict=True):
                touched += 1
    return touched


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--commits", default=10_000, show_default=True, help="Result files (one a commit).")
@click.option("--benchmarks", default=50, show_default=True, help="Benchmarks per file.")
@click.option("--cases", default=4, show_default=True, help="Parameter values per benchmark.")
@click.option("--samples", default=10, show_default=True, help="Stored samples per latency.")
@click.option("--repeat", default=3, show_default=True, help="Timed repetitions of each reader.")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the tree here (reused when it exists) instead of a temp dir removed at the end.",
)
def main(
    commits: int, benchmarks: int, cases: int, samples: int, repeat: int, workdir: Path | None
) -> None:
    """Time fwdasv's export against asv's Results.load over one synthetic history."""
    base = workdir or Path(tempfile.mkdtemp(prefix="fwdasv-export-speed-"))
    root = base / "results"
    try:
        start = time.perf_counter()
        if root.exists():
            click.echo(f"reusing {root}")
        else:
            generate(root, commits, benchmarks, cases, samples)
        files = History(root).files()
        size = sum(p.path.stat().st_size for p in files)
        click.echo(
            f"tree: {len(files)} files x {benchmarks} benchmarks x {cases} cases, "
            f"{samples} samples; {size / 1e6:.0f} MB; ready in {time.perf_counter() - start:.1f} s"
        )
        for file in files:  # page cache warm for every reader alike
            file.path.read_bytes()

        out = base / "export.csv"

        def fwdasv_csv() -> int:
            return export(History(root), "csv", out, progress=False).records

        def fwdasv_records() -> int:
            return sum(1 for _ in History(root).records())

        def asv_load() -> int:
            return _asv_load([f.path for f in files])

        readers: list[tuple[str, Callable[[], int]]] = [
            ("fwdasv-csv", fwdasv_csv),
            ("fwdasv-records", fwdasv_records),
            ("asv-load", asv_load),
        ]
        times: dict[str, list[float]] = {name: [] for name, _ in readers}
        counts: dict[str, int] = {}
        for rep in range(repeat):
            order = readers[rep % 3 :] + readers[: rep % 3]
            if rep % 2:
                order.reverse()
            for name, reader in order:
                start = time.perf_counter()
                counts[name] = reader()
                times[name].append(time.perf_counter() - start)
            click.echo(
                f"rep {rep + 1}: "
                + ", ".join(f"{name} {times[name][-1]:.2f} s" for name, _ in order)
            )

        click.echo(
            f"\n{platform.python_implementation()} {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, {platform.machine()}; median of {repeat}"
        )
        click.echo(f"{'reader':16} {'median s':>9} {'files/s':>9} {'records/s':>11} {'records':>9}")
        medians = {name: statistics.median(values) for name, values in times.items()}
        for name, _ in readers:
            t = medians[name]
            click.echo(
                f"{name:16} {t:9.2f} {len(files) / t:9.0f} {counts[name] / t:11.0f} "
                f"{counts[name]:9d}"
            )
        for name in ("fwdasv-csv", "fwdasv-records"):
            # Per repetition too: the readers of one repetition ran back to back, so
            # their ratio shrugs off load that comes and goes on a shared machine.
            per_rep = [a / b for a, b in zip(times[name], times["asv-load"], strict=True)]
            click.echo(
                f"ratio {name} / asv-load: {medians[name] / medians['asv-load']:.2f} of medians; "
                f"per repetition {', '.join(f'{r:.2f}' for r in per_rep)} "
                f"(median {statistics.median(per_rep):.2f})"
            )
        click.echo(
            "(asv-load records = values touched; asv's loader keeps the stale versions "
            "fwdasv drops, so it touches more)"
        )
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
