"""GPU telemetry around a bench that has no block hooks: vLLM's `bench forward`.

fwdasv's engine reads the GPU at every sample-block boundary itself. vLLM's
bench is a subprocess with no such hook, so the launcher samples the GPUs the
bench uses on a thread (`fwdasv.hw.telemetry.Sampler`, every 0.1 s) while it
runs, and splits the readings per case at the case's `[forward] NAME:` line,
which rank 0 prints when the case is done. A case's window therefore holds its
setup, capture, warmup and timed replays (only readings of a busy GPU are
summarized), not its timed blocks alone: coarser than the engine's, and said
so in the `scope` it records. The summaries go into each rank dict under
`telemetry` (the GPU of rank r is the r-th visible one), which vLLM's schema
does not use, and the results file is rewritten with them (otherwise as vLLM
wrote it: `fwdasv.core.results` keeps its keys and their order).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fwdasv.core import results
from fwdasv.hw.telemetry import (
    DEFAULT_INTERVAL_S,
    GpuTelemetry,
    Sampler,
    TelemetryUnavailable,
    open_for_device,
    rank_telemetry,
)

SCOPE = (
    "sampled every {interval:g} s over the case's window (setup, capture, warmup and timed "
    "replays; vLLM's bench has no block hooks), busy readings only"
)


@contextlib.contextmanager
def sampling(gpu_count: int, interval_s: float = DEFAULT_INTERVAL_S) -> Iterator[Sampler | None]:
    """A running sampler of the first `gpu_count` visible GPUs; None where NVML cannot read them."""
    gpus: list[GpuTelemetry] = []
    try:
        for index in range(gpu_count):
            gpus.append(open_for_device(None, index))
    except TelemetryUnavailable:
        for gpu in gpus:
            gpu.close()
        yield None
        return
    sampler = Sampler(gpus, interval_s=interval_s).start()
    try:
        yield sampler
    finally:
        sampler.close()


def marking(
    echo: Callable[[str], None] | None, sampler: Sampler | None, cases: Sequence[str]
) -> Callable[[str], None] | None:
    """`echo`, which also closes a case's window when its `[forward] NAME:` line passes."""
    if sampler is None:
        return echo
    prefixes = [(f"[forward] {name}: ", name) for name in cases]

    def see(line: str) -> None:
        for prefix, name in prefixes:
            if line.startswith(prefix):
                sampler.mark(name)
                break
        if echo is not None:
            echo(line)

    return see


def attach(
    output_json: Path, parsed: Sequence[results.CaseResult], sampler: Sampler
) -> list[results.CaseResult]:
    """Each case's ranks with the telemetry of its window; the results file rewritten with them."""
    windows = {window.label: window for window in sampler.windows()}
    scope = SCOPE.format(interval=sampler.interval_s)
    attached = []
    for result in parsed:
        window = windows.get(result.case)
        if window is not None:
            ranks = []
            for index, rank in enumerate(result.ranks):
                gpu = index % len(sampler.gpus)
                telemetry = rank_telemetry(
                    sampler.gpus[gpu],
                    sampler.window_readings(gpu, window),
                    scope,
                    keep_readings=False,
                    source="nvml-sampler",
                )
                ranks.append(dataclasses.replace(rank, telemetry=telemetry))
            result = dataclasses.replace(result, ranks=tuple(ranks))
        attached.append(result)
    results.dump(attached, output_json, what="bench results")
    return attached
