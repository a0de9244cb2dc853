"""`python -m fwdasv.backends.vllm_phases ...`: vLLM's forward bench with startup phase timers.

The same bench as `fwdasv.backends.vllm_forward` (the suites' entry
`FWDASV_VLLM_ENTRY=phases` picks it), with `[phase] NAME SECONDS` lines on
stderr (kept in the bench log) for: `import torch`, `import vllm` (and the
bench's modules), the engine configuration (`EngineArgs.create_engine_config`),
device init, model load, the memory profile, the KV cache, warm-up (graph
capture), the engine in all, and each case (capture plus timed replays), then
the total. Hooks wrap vLLM's own methods; nothing measured changes. `parse_phases`
reads the lines back (the per-commit cost tables of bench/h200/vllm_cost_table.py).
"""

from __future__ import annotations

import functools
import sys
import time

T0 = time.perf_counter()
try:  # the interpreter's own start, when the launcher exported it
    import os

    _launched = float(os.environ.get("FWDASV_LAUNCHED_AT", "nan"))
except ValueError:
    _launched = float("nan")


PHASE_PREFIX = "[phase] "


def parse_phases(lines) -> dict[str, float]:
    """The `[phase]` lines of a bench log: name -> seconds (a repeated name adds up)."""
    found: dict[str, float] = {}
    for line in lines:
        if not line.startswith(PHASE_PREFIX):
            continue
        parts = line[len(PHASE_PREFIX) :].split()
        if len(parts) == 2:
            try:
                found[parts[0]] = found.get(parts[0], 0.0) + float(parts[1])
            except ValueError:
                continue
    return found


def say(name: str, seconds: float) -> None:
    print(f"[phase] {name} {seconds:.2f}", file=sys.stderr, flush=True)


def timed(owner, attribute: str, name: str) -> None:
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            say(name, time.perf_counter() - start)

    setattr(owner, attribute, wrapper)


def main(argv: list[str] | None = None) -> None:
    if _launched == _launched:  # not NaN
        say("interpreter", time.time() - _launched - (time.perf_counter() - T0))
    start = time.perf_counter()
    import torch  # noqa: F401

    say("import_torch", time.perf_counter() - start)
    start = time.perf_counter()
    import vllm  # noqa: F401
    from vllm.benchmarks.forward import main as bench
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    say("import_vllm", time.perf_counter() - start)
    from vllm.v1.engine import core
    from vllm.v1.worker import gpu_worker

    timed(EngineArgs, "create_engine_config", "config")
    timed(gpu_worker.Worker, "init_device", "init_device")
    timed(gpu_worker.Worker, "load_model", "load_model")
    timed(gpu_worker.Worker, "determine_available_memory", "memory_profile")
    timed(gpu_worker.Worker, "initialize_from_config", "kv_cache")
    timed(gpu_worker.Worker, "compile_or_warm_up_model", "warm_up")
    timed(core.EngineCore, "__init__", "engine_core_total")
    original_run_case = bench.run_case

    def run_case(runner, case, args):
        start = time.perf_counter()
        try:
            return original_run_case(runner, case, args)
        finally:
            say(f"case:{case.name}", time.perf_counter() - start)

    bench.run_case = run_case
    from vllm import LLM

    timed(LLM, "from_engine_args", "engine_total")
    parser = FlexibleArgumentParser(prog="python -m fwdasv.backends.vllm_phases")
    bench.add_cli_args(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    start = time.perf_counter()
    bench.main(args)
    say("bench_main", time.perf_counter() - start)
    say("script_total", time.perf_counter() - T0)


if __name__ == "__main__":
    main()
