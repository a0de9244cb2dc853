"""vLLM 0.33's recorded bench outputs (tests/data, from an H200) and what tests build from them.

`SINGLE` (two cases), `FOUR` (four), `LLAMA` (Llama 3.1 8B) and `PIPELINE` (two stages
on two GPUs), all of them in `FILES`; they ran vLLM's defaults (`VLLM_ITERS` replays a
sample, `VLLM_SAMPLES` samples). `raw` reads one as JSON; `edited` parses one with an
entry changed; `file_suite` is a vLLM suite whose cases are a file's, and `cache_from`
that suite's cache as asv pickles it, from a file written as the bench writes it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from helpers import DATA

from fwdasv.asv import suite as asvsuite
from fwdasv.asv.suite import SuiteCache
from fwdasv.backends import RunConfig, RunOutcome, shape_problems
from fwdasv.backends.measure import pool
from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.files import write_atomic
from fwdasv.core.numbers import finite_json
from fwdasv.core.results import parse, refusals

SINGLE = DATA / "vllm-0.33.0-forward-h200-qwen3-0.6b.json"
FOUR = DATA / "vllm-0.33.0-forward-h200-qwen3-0.6b-4cases.json"
LLAMA = DATA / "vllm-0.33.0-forward-h200-llama-3.1-8b.json"
PIPELINE = DATA / "vllm-0.33.0-forward-2xh200-qwen3-0.6b-pp2.json"
# vLLM's --output-json files (the kernel summaries beside them are another format).
FILES = sorted(p for p in DATA.glob("vllm-*.json") if not p.name.endswith(".kernels.json"))
# The recorded runs used vLLM's defaults: 20 replays per sample, 5 samples.
VLLM_ITERS, VLLM_SAMPLES = 20, 5


def raw(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())


def cases_of(parsed: list[results.CaseResult]) -> tuple[str, ...]:
    """Case strings whose requests are exactly the file's."""
    return tuple(BenchCase(r.case, r.requests).to_string() for r in parsed)


def file_suite(path: Path, data: list[dict[str, Any]] | None = None) -> type[asvsuite.ForwardSuite]:
    """A minimal vLLM suite whose cases are the file's cases, with its iters and samples."""
    parsed = results.parse(raw(path) if data is None else data, str(path))
    pipeline = any(r.pipeline for r in parsed)
    bases = (asvsuite.PipelineSuite, asvsuite.VllmSuite) if pipeline else (asvsuite.VllmSuite,)
    return type(
        "FileSuite",
        bases,
        {
            "__module__": __name__,
            "cases": cases_of(parsed),
            "iters": VLLM_ITERS,
            "samples": VLLM_SAMPLES,
        },
    )


def build_cache(
    suite: asvsuite.ForwardSuite, config: RunConfig, outcome: RunOutcome, log_dir: Path
) -> SuiteCache:
    """What `_measure` returns for one launch."""
    pooled = pool(config, [outcome], suite.tolerance)
    return SuiteCache(tuple(pooled.values()), config, str(log_dir))


def write_json(data: list[dict[str, Any]], path: Path) -> None:
    """An edited bench output as the bench writes it (a NaN as null)."""
    write_atomic(path, json.dumps(finite_json(data), indent=2, allow_nan=False))


def cache_from(
    tmp_path: Path, path: Path, data: list[dict[str, Any]] | None = None, suite_data=None
) -> tuple[asvsuite.ForwardSuite, SuiteCache, RunOutcome]:
    """Write `data` (default: the file as recorded) as a bench output and pool it.

    The suite's cases are those of `suite_data` (default: of `data`), so a file
    that ran other shapes than requested can be tested.
    """
    data = raw(path) if data is None else data
    out = tmp_path / "bench.json"
    write_json(data, out)
    parsed = results.load(out)
    suite = file_suite(path, data if suite_data is None else suite_data)()
    config = suite.run_config()
    outcome = RunOutcome(config, parsed, tmp_path / "bench.log", shape_problems(config, parsed))
    return suite, build_cache(suite, config, outcome, tmp_path), outcome


# --- verdicts on edited entries --------------------------------------------------------


def edited(path: Path, edit, case: int = 0) -> results.CaseResult:
    data = copy.deepcopy(raw(path))
    edit(data[case])
    return parse(data, "edited.json")[case]


def failed_checks(result) -> set[str]:
    return {v.check for v in refusals(result)}
