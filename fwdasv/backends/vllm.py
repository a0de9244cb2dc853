"""The vLLM backend: `vllm bench forward` (vLLM >= 0.33) run by the environment's python.

The argv pins what tracking needs: `--kv-len-jitter 0` so every commit runs the
exact shapes, `--seed`, dummy weights (`--load-format dummy`, no download of
weights; the config must still resolve, so offline hosts pass a local model
directory), and `--skip-tokenizer-init` (the bench feeds token ids itself).
Several GPUs (pipeline stages) run under torchrun, one process per GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fwdasv.backends import RunConfig, find_module, visible_gpus

CLI_ENTRY = ["-m", "vllm.entrypoints.cli.main", "bench", "forward"]
# fwdasv's in-process shim: the same parser and main, without the CLI's server imports.
MODULE_ENTRY = ["-m", "fwdasv.backends.vllm_forward"]
# The same, with startup phase timers on stderr (fwdasv.backends.vllm_phases).
PHASES_ENTRY = ["-m", "fwdasv.backends.vllm_phases"]
# The same, each profiled kernel named by its op and line (fwdasv.backends.vllm_explain).
EXPLAIN_ENTRY = ["-m", "fwdasv.backends.vllm_explain"]
ENTRIES = {
    "cli": CLI_ENTRY,
    "module": MODULE_ENTRY,
    "phases": PHASES_ENTRY,
    "explain": EXPLAIN_ENTRY,
}


def argv(config: RunConfig, output_json: Path) -> list[str]:
    if config.entry not in ENTRIES:
        raise ValueError(f"vLLM entry must be one of {', '.join(ENTRIES)}, got {config.entry!r}")
    args = list(ENTRIES[config.entry])
    args += [
        "--model",
        config.model,
        "--load-format",
        "dummy",
        "--skip-tokenizer-init",
        "--seed",
        str(config.seed),
        "--kv-len-jitter",
        "0",
        "--iters",
        str(config.iters),
        "--samples",
        str(config.samples),
        "--output-json",
        str(output_json),
    ]
    if config.dtype != "auto":
        args += ["--dtype", config.dtype]
    if config.max_model_len is not None:
        args += ["--max-model-len", str(config.max_model_len)]
    if config.pipeline_stages > 1:
        args += ["--pipeline-parallel-size", str(config.pipeline_stages)]
    for case in config.cases:
        args += ["--case", case.to_string()]
    return args + list(config.extra_args)


def has_forward_bench(python: str = sys.executable) -> tuple[bool, str]:
    """Whether `python`'s vLLM has `vllm bench forward`, without importing vLLM."""
    found = find_module(python, "vllm")
    if found is None or not Path(found).is_dir():
        return False, "vLLM is not installed in this environment"
    root = Path(found)
    if not (root / "benchmarks" / "forward" / "main.py").is_file():
        return (
            False,
            f"this vLLM ({root}) has no vllm.benchmarks.forward (the forward bench needs vLLM >= 0.33)",
        )
    return True, str(root)


def unavailable(config: RunConfig) -> str | None:
    ok, reason = has_forward_bench(config.python)
    if not ok:
        return reason
    gpus = visible_gpus()
    if gpus < config.pipeline_stages:
        return f"vLLM's forward bench needs {config.pipeline_stages} CUDA device(s); {gpus} visible"
    return None
