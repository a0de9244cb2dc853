"""`fwdasv.asv.suite`: the suite base classes, reading bench results as asv stores them.

fwdasv's engine for real on CPU (`run_bench` launches `python -m fwdasv.engine` on the
tiny target), and every real vLLM 0.33 output in tests/data (tests/recorded_runs.py),
pooled as `_measure` pools them: a suite's `setup`/`track_*` methods read the cache
exactly as it is built: per-sample medians in seconds, the spread recomputed from them,
the worst graph (or pipeline) vs eager error over ranks, the pipeline clock uncertainty,
and refusals for a forward that computed garbage. The only thing not run here is vLLM's
bench itself (it needs CUDA): its recorded outputs stand in for it, and corrupted copies
of them for the failures. Then a suite's target_path on every bench's path, and a bench
process that dies on one case costing that case only.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from helpers import PROGRAMS
from recorded_runs import (
    FILES,
    PIPELINE,
    SINGLE,
    VLLM_ITERS,
    VLLM_SAMPLES,
    build_cache,
    cache_from,
    file_suite,
    raw,
)

from fwdasv.asv import suite as asvsuite
from fwdasv.asv.suite import RefusedLatency, SuiteCache, TorchSuite
from fwdasv.backends import RunConfig, RunOutcome, run_bench
from fwdasv.backends import torch as torch_backend
from fwdasv.backends.measure import CaseSummary, pool
from fwdasv.core import results

# A suite runs as written: no FWDASV_ITERS, FWDASV_SAMPLES or FWDASV_MODEL_DIR from outside.
pytestmark = pytest.mark.usefixtures("no_suite_overrides")


def block_medians_s(samples_us: list[float], samples: int) -> list[float]:
    blocks = np.asarray(samples_us, dtype=np.float64).reshape(samples, -1)  # row-major
    return [float(np.median(block)) * 1e-6 for block in blocks]


# --- fwdasv's engine, for real --------------------------------------------------------


class TinyEngine(asvsuite.TorchSuite):
    """The tiny decoder on CPU, with a case the decoder refuses (KV > 16384)."""

    model = "fwdasv.targets.decoder:tiny"
    device = "cpu"
    iters = 3
    samples = 4
    warmup_s = 0.0
    env: ClassVar[dict[str, str]] = {"OMP_NUM_THREADS": "1"}
    cases = ("decode=4*1@64", "prefill=32", "big=1@16385")


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("engine")
    with pytest.MonkeyPatch.context() as patch:
        for name in (asvsuite.ENV_ITERS, asvsuite.ENV_SAMPLES):
            patch.delenv(name, raising=False)
        suite = TinyEngine()
        config = suite.run_config()
    outcome = run_bench(config, workdir)
    return {
        "suite": suite,
        "config": config,
        "outcome": outcome,
        "cache": build_cache(suite, config, outcome, workdir),
        "output_json": workdir / "bench.json",
    }


def test_engine_argv_is_the_module_engine(engine_run):
    argv = torch_backend.argv(engine_run["config"], engine_run["output_json"])
    assert argv[:2] == ["-m", "fwdasv.engine"]
    assert argv[argv.index("--output-json") + 1] == str(engine_run["output_json"])


def test_parser_reads_the_engines_output(engine_run):
    outcome: RunOutcome = engine_run["outcome"]
    config: RunConfig = engine_run["config"]
    parsed = results.load(engine_run["output_json"])
    assert parsed == outcome.results
    assert [r.case for r in parsed] == ["decode", "prefill", "big"]
    assert outcome.problems == {}
    by_name = results.by_case(parsed)
    for name in ("decode", "prefill"):
        got = by_name[name]
        assert got.ok
        assert got.requests == {c.name: c.requests for c in config.cases}[name]
        (rank,) = got.ranks
        assert rank.latency.timer == "host_perf_counter"
        assert rank.latency.count == len(rank.latency.samples_us) == 3 * 4
        assert rank.finite is True and rank.graph_vs_eager is None
        assert results.refusals(got) == []
    big = by_name["big"]
    assert not big.ok and big.ranks == ()
    assert big.error.startswith("TargetError: big: KV length 16385")


def test_engine_results_become_asv_samples(engine_run):
    suite: TinyEngine = engine_run["suite"]
    cache = engine_run["cache"]
    by_name = results.by_case(engine_run["outcome"].results)
    assert cache.config.backend == "torch" and cache.config.samples == 4
    for name in ("decode", "prefill"):
        latency = by_name[name].latency
        entry = cache.summary(name)
        expected = block_medians_s(list(latency.samples_us), 4)
        assert entry.samples_s == pytest.approx(expected, rel=1e-12)
        suite.setup(cache, name)
        assert suite.track_latency(cache, name) == {"samples": list(entry.samples_s), "number": 1}
        medians = np.asarray(expected) * 1e6
        spread = 100 * (medians.max() - medians.min()) / np.median(medians)
        assert suite.track_spread_pct(cache, name) == pytest.approx(spread)
        # The host timer has no graph to compare: NaN, which asv stores as skipped.
        assert entry.worst_relative_rms is None
        assert math.isnan(suite.track_graph_vs_eager(cache, name))
        assert entry.timer == "host_perf_counter" and entry.refusals == ()


def test_a_case_the_engine_recorded_as_failed_fails_its_benchmarks(engine_run):
    suite: TinyEngine = engine_run["suite"]
    cache = engine_run["cache"]
    entry = cache.summary("big")
    assert entry.error.startswith("TargetError: big: KV length 16385")
    assert entry.samples_s == ()
    # Not an out-of-memory: a failure of the commit, not a skip.
    suite.setup(cache, "big")
    for method in (suite.track_latency, suite.track_spread_pct, suite.track_graph_vs_eager):
        with pytest.raises(RuntimeError, match=r"big: the bench failed: TargetError"):
            method(cache, "big")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_vllm_file_through_the_asv_layer(tmp_path, path):
    suite, cache, outcome = cache_from(tmp_path, path)
    config = outcome.config
    assert config.backend == "vllm"
    assert (config.iters, config.samples) == (VLLM_ITERS, VLLM_SAMPLES)
    pipeline = any(r.pipeline for r in outcome.results)
    assert config.pipeline_stages == (2 if pipeline else 1)
    # The config asks for exactly what the file ran.
    assert [(c.name, c.requests) for c in config.cases] == [
        (r.case, r.requests) for r in outcome.results
    ]
    assert outcome.problems == {}
    for entry_json in raw(path):
        name = entry_json["case"]
        ranks = entry_json["ranks"]
        latency = ranks[0]["latency_us"]
        entry = cache.summary(name)
        samples_s = block_medians_s(latency["samples_us"], VLLM_SAMPLES)
        assert entry.samples_s == pytest.approx(samples_s, rel=1e-12)
        assert len(entry.samples_s) == VLLM_SAMPLES
        # Seconds, not µs: the per-sample medians sit around the bench's median.
        assert all(1e-5 < s < 1e-1 for s in entry.samples_s)
        assert entry.median_us == pytest.approx(float(np.median(samples_s)) * 1e6)
        assert entry.median_us == pytest.approx(entry_json["median_us"], rel=0.05)
        medians_us = np.asarray(samples_s) * 1e6
        spread = 100 * (medians_us.max() - medians_us.min()) / np.median(medians_us)
        assert entry.spread_pct == pytest.approx(spread)
        assert entry.unstable is bool(spread > 0.5)
        assert entry.timer == latency["timer"]
        assert entry.refusals == () and entry.error is None
        # The recorded captures are bitwise exact on every rank (and every stage's stream).
        errors = [r["graph_vs_eager"]["relative_rms"] for r in ranks] + [
            c["relative_rms"] for r in ranks for c in r.get("pipeline_vs_eager", {}).values()
        ]
        assert entry.worst_relative_rms == max(errors) == 0.0
        clocks = [r["clock_uncertainty_us"] for r in ranks if "clock_uncertainty_us" in r]
        assert entry.clock_uncertainty_us == (max(clocks) if clocks else None)
        assert pipeline is bool(clocks)

        suite.setup(cache, name)
        assert suite.track_latency(cache, name) == {"samples": list(entry.samples_s), "number": 1}
        assert suite.track_spread_pct(cache, name) == entry.spread_pct
        assert suite.track_graph_vs_eager(cache, name) == 0.0
        if pipeline:
            assert suite.track_clock_uncertainty_us(cache, name) == max(clocks) > 0
        else:
            assert not hasattr(suite, "track_clock_uncertainty_us")


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        # Stage 1's own output is the worst.
        ({("graph_vs_eager", 1): 7e-4, ("pipeline_vs_eager", 0): 4e-4}, 7e-4),
        # Stage 0's streamed residual is the worst.
        ({("graph_vs_eager", 1): 2e-4, ("pipeline_vs_eager", 0): 4e-4}, 4e-4),
    ],
    ids=["graph-rank1", "pipeline-rank0"],
)
def test_graph_vs_eager_is_the_worst_over_ranks_and_the_pipeline(tmp_path, edits, expected):
    data = raw(PIPELINE)
    for (field, rank), value in edits.items():
        ranks = data[0]["ranks"]
        if field == "graph_vs_eager":
            ranks[rank]["graph_vs_eager"] = {"max_abs": 1e-3, "relative_rms": value}
        else:
            ranks[rank]["pipeline_vs_eager"]["residual"] = {"max_abs": 1e-3, "relative_rms": value}
    data[0]["ranks"][1]["clock_uncertainty_us"] = 60.5
    suite, cache, _ = cache_from(tmp_path, PIPELINE, data)
    name = data[0]["case"]
    entry = cache.summary(name)
    # Within the tolerance: recorded, not refused.
    assert entry.refusals == ()
    assert suite.track_graph_vs_eager(cache, name) == expected
    assert suite.track_clock_uncertainty_us(cache, name) == 60.5
    assert suite.track_latency(cache, name)["samples"] == list(entry.samples_s)


def _set(data, case_index, rank, key, value, sub=None):
    target = data[case_index]["ranks"][rank]
    if sub is None:
        target[key] = value
    else:
        target[key][sub] = value


CORRUPTIONS = {
    "non-finite-output": (SINGLE, 0, 0, "finite", False, None, "finite"),
    "graph-vs-eager-nan": (
        SINGLE,
        1,
        0,
        "graph_vs_eager",
        {"max_abs": math.nan, "relative_rms": math.nan},
        None,
        "graph_vs_eager",
    ),
    "graph-vs-eager-over-tolerance": (
        PIPELINE,
        0,
        1,
        "graph_vs_eager",
        {"max_abs": 0.25, "relative_rms": 5e-3},
        None,
        "graph_vs_eager",
    ),
    "pipeline-vs-eager-over-tolerance": (
        PIPELINE,
        1,
        0,
        "pipeline_vs_eager",
        {"max_abs": 0.5, "relative_rms": 2e-2},
        "hidden_states",
        "pipeline_vs_eager",
    ),
    # A NaN on a later rank must not hide behind rank 0's exact 0.0.
    "graph-vs-eager-nan-rank1": (
        PIPELINE,
        0,
        1,
        "graph_vs_eager",
        {"max_abs": math.nan, "relative_rms": math.nan},
        None,
        "graph_vs_eager",
    ),
    "pipeline-vs-eager-nan-rank1": (
        PIPELINE,
        1,
        1,
        "pipeline_vs_eager",
        {"max_abs": math.nan, "relative_rms": math.nan},
        "hidden_states",
        "pipeline_vs_eager",
    ),
    "nondeterministic-replays": (SINGLE, 0, 0, "graph_deterministic", False, None, "deterministic"),
    "eager-repeat-differs": (
        SINGLE,
        1,
        0,
        "eager_repeat",
        {"max_abs": 0.1, "relative_rms": 3e-3},
        None,
        "eager_repeat",
    ),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupt_output_is_refused(tmp_path, kind):
    path, case_index, rank, key, value, sub, check = CORRUPTIONS[kind]
    data = copy.deepcopy(raw(path))
    _set(data, case_index, rank, key, value, sub)
    suite, cache, _ = cache_from(tmp_path, path, data)
    bad = data[case_index]["case"]
    entry = cache.summary(bad)
    assert [r.split(":")[0] for r in entry.refusals] == [check]
    suite.setup(cache, bad)  # measured here: not a skip
    with pytest.raises(RefusedLatency, match=rf"{bad}: no latency recorded: {check}: "):
        suite.track_latency(cache, bad)
    # The diagnostics stay recorded: they show why the latency was refused. The
    # graph-vs-eager series holds the bad comparison (a NaN one stays NaN, never
    # the exact 0.0 of another rank).
    assert suite.track_spread_pct(cache, bad) == entry.spread_pct
    if key in ("graph_vs_eager", "pipeline_vs_eager"):
        got, want = suite.track_graph_vs_eager(cache, bad), value["relative_rms"]
        assert got == want or (math.isnan(got) and math.isnan(want)), got
    # The other cases of the same launch are unaffected.
    for other in data:
        if other["case"] != bad:
            assert cache.summary(other["case"]).refusals == ()
            assert suite.track_latency(cache, other["case"])["number"] == 1


def _error_entry(entry: dict[str, Any], error: str) -> dict[str, Any]:
    """The entry fwdasv's engine writes for a case that raised."""
    return {
        "case": entry["case"],
        "requests": entry["requests"],
        "median_us": None,
        "error": error,
        "ranks": [],
    }


def test_a_case_recorded_as_failed_fails_track_latency(tmp_path):
    data = raw(SINGLE)
    data[1] = _error_entry(data[1], "RuntimeError: CUDA error: an illegal memory access")
    suite, cache, _ = cache_from(tmp_path, SINGLE, data)
    name = data[1]["case"]
    suite.setup(cache, name)
    with pytest.raises(RuntimeError, match=rf"{name}: the bench failed: RuntimeError: CUDA error"):
        suite.track_latency(cache, name)
    assert suite.track_latency(cache, data[0]["case"])["number"] == 1


@pytest.mark.parametrize(
    "error",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ],
)
def test_an_out_of_memory_case_is_skipped_in_setup(tmp_path, error):
    data = raw(SINGLE)
    data[0] = _error_entry(data[0], error)
    suite, cache, _ = cache_from(tmp_path, SINGLE, data)
    name = data[0]["case"]
    with pytest.raises(NotImplementedError, match="CUDA out of memory"):
        suite.setup(cache, name)
    suite.setup(cache, data[1]["case"])


def test_a_skipped_suite_skips_every_case(tmp_path):
    suite = file_suite(SINGLE)()
    with pytest.raises(NotImplementedError, match="no CUDA"):
        suite.setup(SuiteCache(skip="no CUDA device"), "decode")


def test_the_suite_cache_pickles_as_asv_stores_it(tmp_path):
    """asv pickles `setup_cache`'s value to a file and unpickles it in each benchmark's
    process: the summaries must come back equal, and read the same."""
    suite, cache, _ = cache_from(tmp_path, PIPELINE)
    again = pickle.loads(pickle.dumps(cache))
    assert again == cache and isinstance(again.summary("decode"), CaseSummary)
    for name in ("decode", "prefill"):
        assert suite.track_latency(again, name) == suite.track_latency(cache, name)
        assert suite.track_clock_uncertainty_us(again, name) > 0
    skipped = pickle.loads(pickle.dumps(SuiteCache(skip="no GPU")))
    with pytest.raises(NotImplementedError, match="no GPU"):
        suite.setup(skipped, "decode")
    with pytest.raises(KeyError, match="nope"):
        cache.summary("nope")


def test_env_cases_measures_only_the_named_cases_and_skips_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bisect asks asv for one case; FWDASV_CASES keeps the suite's bench to that case, and
    a benchmark of a case left out is asv's skip (NotImplementedError), not a failure."""
    suite = TinyEngine()
    monkeypatch.setenv(asvsuite.ENV_CASES, "prefill")
    assert [c.name for c in suite.run_config().cases] == ["prefill"]
    monkeypatch.setenv(asvsuite.ENV_CASES, " big , decode ")
    assert [c.name for c in suite.run_config().cases] == ["decode", "big"]  # the suite's order
    # Naming none of this suite's cases (another suite's): every case, as without it.
    monkeypatch.setenv(asvsuite.ENV_CASES, "decode_bs8_2k")
    assert [c.name for c in suite.run_config().cases] == ["decode", "prefill", "big"]
    monkeypatch.delenv(asvsuite.ENV_CASES)
    assert [c.name for c in suite.run_config().cases] == ["decode", "prefill", "big"]


def test_a_case_left_out_of_the_cache_is_skipped(engine_run) -> None:
    import dataclasses

    cache = engine_run["cache"]
    only_prefill = dataclasses.replace(
        cache, summaries=tuple(s for s in cache.summaries if s.case == "prefill")
    )
    suite = engine_run["suite"]
    suite.setup(only_prefill, "prefill")  # measured: no skip
    with pytest.raises(NotImplementedError, match="decode: not measured in this run"):
        suite.setup(only_prefill, "decode")


class PacedEngine(TinyEngine):
    """TinyEngine's prefill with fwdasv's fixed workload beside each replay."""

    timer = "host"
    cases = ("prefill=32",)
    reference = True


def test_a_paced_suite_records_the_forward_over_the_workload(tmp_path, monkeypatch):
    """`reference = True`: the engine gets --reference, and `track_relative` is asv's
    samples result of each block's median ratio, pooled over the launches; a suite without
    it has no such benchmark (asv discovers none)."""
    for name in (asvsuite.ENV_ITERS, asvsuite.ENV_SAMPLES):
        monkeypatch.delenv(name, raising=False)
    suite = PacedEngine()
    config = suite.run_config()
    assert config.reference and "--reference" in torch_backend.argv(config, tmp_path / "o.json")
    outcome = run_bench(config, tmp_path)
    (got,) = outcome.results
    pace = got.ranks[0].reference
    assert pace is not None
    tolerance = results.DEFAULT_RELATIVE_RMS_TOLERANCE
    once = CaseSummary.empty("prefill").pooled(got, [], 4, tolerance)
    assert once.relative == tuple(pace.relative(got.ranks[0].latency, 4))
    assert all(r > 0 for r in once.relative) and len(once.relative) == 4
    twice = pool(config, [outcome, outcome], tolerance)["prefill"]
    assert twice.relative == once.relative * 2
    cache = SuiteCache((twice,), config, str(tmp_path))
    suite.setup(cache, "prefill")
    assert suite.track_relative(cache, "prefill") == {"samples": list(twice.relative), "number": 1}
    assert PacedEngine.track_relative.unit == "ratio"
    assert not hasattr(TinyEngine, "track_relative")
    # A launch without the workload (an older engine) leaves no relative series at all.
    plain = dataclasses.replace(got, ranks=(dataclasses.replace(got.ranks[0], reference=None),))
    mixed = once.pooled(plain, [], 4, tolerance)
    assert mixed.relative == () and len(mixed.samples_s) == 8
    with pytest.raises(RefusedLatency, match="no reference workload times"):
        suite.track_relative(SuiteCache((mixed,), config, str(tmp_path)), "prefill")


class Outside(TorchSuite):
    model = "ngbench:target"
    target_path: ClassVar[tuple[str, ...]] = ("/opt/ngbench",)
    env: ClassVar[dict[str, str]] = {"PYTHONPATH": "/extra", "OMP_NUM_THREADS": "1"}
    cases = ("p=8",)


class Inside(TorchSuite):
    model = "mymodel.bench:target"
    cases = ("p=8",)


def test_target_path_goes_first_on_the_bench_pythonpath() -> None:
    env = Outside().run_config().env
    assert env["PYTHONPATH"] == os.pathsep.join(["/opt/ngbench", "/extra"])
    assert env["OMP_NUM_THREADS"] == "1"
    assert "PYTHONPATH" not in Inside().run_config().env


def test_the_bench_times_out_before_asv_does() -> None:
    """asv SIGKILLs a setup_cache 1 s after its timeout's SIGTERM, and a bench silent from
    its start would meet asv's timeout first: the bench's own (it ends the whole tree)
    is shorter."""
    assert TinyEngine.timeout == 3600.0
    assert TinyEngine().run_config().timeout_s == 3540.0
    assert Crashy().run_config().timeout_s == 270.0  # a tenth earlier under ten minutes
    for asv_timeout in (1.0, 60.0, 599.0, 600.0, 86400.0):
        assert 0 < asvsuite.launch_timeout(asv_timeout) < asv_timeout


class Crashy(TorchSuite):
    model = "crash_targets:target"
    iters = 2
    samples = 8
    warmup_s = 0.0
    env: ClassVar[dict[str, str]] = {"PYTHONPATH": str(PROGRAMS)}
    timeout = 300.0
    cases = ("first=2*1@32", "crash=8", "last=16")


def test_a_dying_case_is_isolated_and_the_others_are_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FWDASV_LOG_DIR", str(tmp_path))
    suite = Crashy()
    cache = suite.setup_cache()
    out = capsys.readouterr().out
    assert "running each case on its own" in out
    for name in ("first", "last"):
        assert cache.summary(name).error is None, cache.summary(name)
        assert len(cache.summary(name).samples_s) == 8
        suite.setup(cache, name)
        assert suite.track_latency(cache, name)["number"] == 1
    assert "exited with status 7" in cache.summary("crash").error
    suite.setup(cache, "crash")  # a failure, not a skip: setup lets it through ...
    with pytest.raises(RuntimeError, match="the bench failed"):
        suite.track_latency(cache, "crash")  # ... and the benchmark fails
