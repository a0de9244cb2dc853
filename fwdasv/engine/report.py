"""What the terminal gets for each measured case: vLLM's case line, the GPU's state, and a
warning (with what helps) when the timing is unstable.

Inputs are judged `CaseResult`s; outputs go to the `echo` and `warn` callables the
command line passes (stdout and stderr). Shared by the single-stage runner and rank 0
of a pipeline, so both print the same lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from fwdasv.core.results import CaseResult, ProfileBlock
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT


def host_context(threads: int | None) -> str:
    """Why a host-timed spread may be high (the threads, the CPUs' load beside them) and
    what helps: the tail of the unstable-timing warning on the host timer."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    used = f"{threads} thread{'s' if threads != 1 else ''}" if threads else "torch's threads"
    try:
        load = os.getloadavg()[0]
        text = f"host timer, {used}, load {load:.1f} on {cpus} CPUs"
        if cpus is not None and load > cpus - 1:
            text += ": other processes share these CPUs, so whole samples come out slow"
    except OSError:
        text = f"host timer, {used}, {cpus} CPUs"
    fewer = ", --threads 1" if threads != 1 else ""
    return (
        f"{text}. The median is kept and the point marked unstable; steadier: fewer other "
        f"jobs{fewer}, more --samples"
    )


def announce(
    result: CaseResult,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
    host: str | None = None,
) -> None:
    """The case's line (vLLM's), its GPU state, and a warning when its timing is unstable;
    `host` (the host timer's `host_context`) says why it may be and what helps."""
    line = result.line()
    telemetry = result.telemetry
    if result.ok and telemetry is not None and telemetry.readings:
        line += f"; GPU {telemetry.line()}"
    echo(line)
    if result.ok and not result.refused and result.unstable:
        spread = (
            f"Warning: {result.case}: unstable timing (sample spread "
            f"{result.latency.sample_spread_pct:.2f}% > {UNSTABLE_SPREAD_PCT}%)"
        )
        warn(f"{spread}; {host}" if host else f"{spread}; the point is marked unstable")


def profile_line(case_name: str, block: ProfileBlock) -> str:
    """The line after a profiled case: where its profile went, or why it failed."""
    if block.error is not None:
        return f"[forward] {case_name}: profile FAILED: {block.error}"
    return (
        f"[forward] {case_name}: profile {block.summary} ({block.activities} "
        f"{'ops' if block.device == 'cpu' else 'GPU activities'} per forward, "
        f"busy {block.busy_us:.1f} us)"
    )
