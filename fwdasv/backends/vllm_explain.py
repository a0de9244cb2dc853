"""`python -m fwdasv.backends.vllm_explain ...`: vLLM's forward bench, each profiled kernel named
by its aten op and source line (the entry `fwdasv explain` runs vLLM suites with).

The bench of `fwdasv.backends.vllm_forward`, plus one step after vLLM has timed a case and
traced its graph replays (`--profile-dir`): one eager forward of the same prepared batch, in
the same process (the bench's own `ForwardBench._run_model`: the model called directly under
the runner's forward context, no graph), under torch's profiler (shapes recorded) and fwdasv's
recording dispatch mode (`fwdasv.engine.profile.attribution_forward`). `attribute_vllm_profile`
(pure) ties the graph's kernels to its launches (`profile_summary.match_launches`: in order,
by name where the order differs, the rest unmatched) and the case's kernels.json is rewritten
with each kernel's op, lines, what stayed unmatched and `attribution_s`. The latency was
measured before it; a failure leaves vLLM's rows, with `attribution` saying why. Source lines
are the commit's vLLM tree (`fwdasv.engine.attribute.source_roots("vllm")`).
"""

from __future__ import annotations

import functools
import gzip
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fwdasv.core.files import write_atomic
from fwdasv.core.kernels import KERNELS_SUFFIX, TRACE_SUFFIX, KernelSummary, load_summary
from fwdasv.engine import attribute
from fwdasv.engine.attribute import Call
from fwdasv.engine.profile_summary import (
    GPU_CATEGORIES,
    ProfileRunError,
    gpu_activities,
    with_gpu_ops,
)

EagerPass = Callable[[Any], tuple[list[dict[str, Any]], list[Call]]]


def attribute_vllm_profile(
    summary: KernelSummary,
    graph_events: Sequence[Mapping[str, object]],
    eager_events: Sequence[Mapping[str, object]],
    calls: Sequence[Call],
) -> KernelSummary:
    """vLLM's summary of a case with each kernel row's op, sources and unmatched launches,
    from its graph replays' trace and the eager forward's; no `ops` (explain diffs vLLM's
    kernels, each shown under its op)."""
    replays = summary.replays
    activities = gpu_activities(graph_events)
    per_replay, rest = divmod(len(activities), replays)
    skip = per_replay - summary.activities
    if rest or skip < 0:
        raise ProfileRunError(
            f"the graph trace holds {len(activities)} GPU activities, not {replays} replays of "
            f"at least {summary.activities}"
        )
    found = attribute.attribute_events(eager_events, attribute.FORWARD_LABEL, GPU_CATEGORIES)
    return replace(with_gpu_ops(summary, graph_events, skip, found, calls), ops=None)


def eager_pass(bench: Any) -> tuple[list[dict[str, Any]], list[Call]]:
    """The CUDA part: the bench's model call once more, eagerly, profiled and recorded."""
    import torch

    from fwdasv.engine.profile import attribution_forward

    roots = attribute.source_roots("vllm")
    return attribution_forward(bench._run_model, roots, torch.cuda.synchronize)


def attribute_case(bench: Any, eager: EagerPass = eager_pass) -> KernelSummary | None:
    """Run the eager pass for a profiled case (every rank: the forward may hold collectives),
    then rewrite the case's kernels.json with what it says."""
    prefix = bench.profile_prefix
    started = time.perf_counter()
    try:
        eager_events, calls = eager(bench)
    except Exception as error:  # the profile stands without it
        failure: str | None = f"failed: {type(error).__name__}: {error}"
    else:
        failure = None
    kernels_path = Path(f"{prefix}{KERNELS_SUFFIX}")
    try:
        summary = load_summary(kernels_path)
    except Exception as error:
        print(f"[fwdasv] {bench.name}: no kernels.json to attribute ({error})", file=sys.stderr)
        return None
    if failure is None:
        try:
            with gzip.open(f"{prefix}{TRACE_SUFFIX}", "rt") as handle:
                graph_events = json.load(handle)["traceEvents"]
            summary = attribute_vllm_profile(summary, graph_events, eager_events, calls)
        except Exception as error:
            failure = f"failed: {type(error).__name__}: {error}"
    if failure is not None:
        summary = replace(summary, attribution=failure)
    summary = replace(summary, attribution_s=round(time.perf_counter() - started, 3))
    write_atomic(kernels_path, json.dumps(summary.to_json(), indent=1) + "\n")
    print(
        f"[fwdasv] {bench.name}: eager pass {summary.attribution_s:.2f} s, attribution: "
        f"{summary.attribution}",
        file=sys.stderr,
        flush=True,
    )
    return summary


def install(bench_class: Any = None, eager: EagerPass = eager_pass) -> None:
    """Wrap `ForwardBench._capture_and_time` (vLLM's, or `bench_class`): after it, a case with
    a profile prefix gets `attribute_case`. Idempotent."""
    if bench_class is None:
        from vllm.benchmarks.forward.capture import ForwardBench

        bench_class = ForwardBench
    original = bench_class._capture_and_time
    if getattr(original, "fwdasv_explain", False):
        return

    @functools.wraps(original)
    def capture_and_time(self: Any) -> Any:
        output = original(self)
        if self.profile_prefix is not None:
            attribute_case(self, eager)
        return output

    capture_and_time.fwdasv_explain = True  # type: ignore[attr-defined]
    bench_class._capture_and_time = capture_and_time


def main(argv: list[str] | None = None) -> None:
    """vLLM's bench (`vllm_forward.main`), the hook installed when the first case runs: after
    the bench's own environment setup and engine start, as vllm_phases hooks `run_case`
    (importing vLLM's capture module earlier would import vLLM before the bench sets it up)."""
    from vllm.benchmarks.forward import main as bench

    from fwdasv.backends import vllm_forward

    original = bench.run_case

    @functools.wraps(original)
    def run_case(runner: Any, case: Any, args: Any) -> Any:
        install()
        return original(runner, case, args)

    bench.run_case = run_case
    vllm_forward.main(argv)


if __name__ == "__main__":
    main()
