"""vLLM's forward bench in-process, with the wall time of each startup phase printed.

    python scripts/gpu/vllm_phases.py [vllm bench forward args...]

Prints `[phase] NAME SECONDS` lines (stderr) for: the interpreter up to this
script, `import vllm` (and the bench's modules), the engine configuration
(`EngineArgs.create_engine_config`), device init, model load, the memory
profile, the KV cache, warm-up, and each case (capture plus timed replays),
then the total. Hooks wrap vLLM's own methods; nothing measured changes.
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


def main() -> None:
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
    parser = FlexibleArgumentParser(prog="vllm_phases.py")
    bench.add_cli_args(parser)
    args = parser.parse_args(sys.argv[1:])
    start = time.perf_counter()
    bench.main(args)
    say("bench_main", time.perf_counter() - start)
    say("script_total", time.perf_counter() - T0)


if __name__ == "__main__":
    main()
