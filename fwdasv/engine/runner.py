"""Run a list of cases through the single-stage bench and write vLLM's JSON.

The target is built once; each case is prepared, timed, judged and written
out as soon as it finishes (the whole file rewritten atomically), so a crash
later loses nothing already measured. A case that fails (a shape the target
refuses, CUDA out of memory) is recorded with its error and the next case
still runs; a case that ran but computed garbage (non-finite output, graph
unlike eager, replays that differ) is recorded with `refused`, the asv suites'
rule (`fwdasv.core.results.CaseResult.judge`), and counts as failed too.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.results import CaseResult, ProfileBlock
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT
from fwdasv.engine.capture import StateSnapshot, bench_forward
from fwdasv.engine.config import EngineConfig
from fwdasv.targets.base import PreparedForward, TargetSpec

if TYPE_CHECKING:
    from fwdasv.hw.telemetry import GpuTelemetry


def describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def free_device_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def _write(done: Sequence[CaseResult], output_json: str | os.PathLike[str]) -> None:
    try:
        results.dump(done, output_json, make_parents=False, what="--output-json")
    except OSError as error:
        raise results.ResultsError(
            f"--output-json {output_json}: cannot write the results ({error.strerror or error})"
        ) from None


def _profile(
    prepared: PreparedForward,
    snapshot: StateSnapshot,
    device: torch.device,
    profile_dir: str | os.PathLike[str],
    case_name: str,
    target: str | None = None,
) -> ProfileBlock:
    """--profile-dir: profiled runs of their own, after timing; a failure is recorded in
    the block and keeps the case's timing. The target's package names the sources."""
    from fwdasv.engine.attribute import source_roots
    from fwdasv.engine.profile import ProfileOptions, profile_case

    free_device_memory(device)
    try:
        return profile_case(
            prepared,
            snapshot,
            device,
            ProfileOptions(),
            profile_dir,
            case_name,
            roots=source_roots(target),
        )
    except Exception as error:
        return ProfileBlock.failed(describe_error(error))


def _profile_line(case_name: str, block: ProfileBlock) -> str:
    if block.error is not None:
        return f"[forward] {case_name}: profile FAILED: {block.error}"
    return (
        f"[forward] {case_name}: profile {block.summary} ({block.activities} "
        f"{'ops' if block.device == 'cpu' else 'GPU activities'} per forward, "
        f"busy {block.busy_us:.1f} us)"
    )


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
    result: results.CaseResult,
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


def open_telemetry(device: torch.device) -> tuple[GpuTelemetry | None, str | None]:
    """The NVML view of the CUDA device (None and why, when NVML cannot read it)."""
    from fwdasv.hw.telemetry import TelemetryUnavailable, open_for_device

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    try:
        return open_for_device(str(uuid) if uuid is not None else None, device.index or 0), None
    except TelemetryUnavailable as error:
        return None, str(error)


def run_cases(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] = print,
    profile_dir: str | os.PathLike[str] | None = None,
) -> list[results.CaseResult]:
    """Bench every case; returns the judged results (failed and refused cases included).

    With `profile_dir`, each timed case is then profiled (`fwdasv.engine.profile`)
    and its rank result gets vLLM's `profile` block.
    """
    device = torch.device(config.device)
    telemetry, no_telemetry = None, None
    if device.type == "cuda":
        if device.index is None:
            # set_device refuses a bare "cuda" (what --device auto gives).
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        telemetry, no_telemetry = open_telemetry(device)
    if config.options.threads is not None:
        torch.set_num_threads(config.options.threads)
    host = config.options.timer == "host"
    spec = TargetSpec.parse(config.target, config.target_options)
    engine_info = config.describe()
    judged: list[CaseResult] = []
    try:
        with torch.inference_mode():
            target = spec.build(config.device, config.dtype)
            for case in cases:
                snapshot = None
                try:
                    prepared = target.prepare(case, config.options.seed)
                    # Timing leaves the state one step on: profiling restores this one.
                    snapshot = StateSnapshot(prepared.state) if profile_dir is not None else None
                    rank = dataclasses.replace(
                        bench_forward(prepared, config.options, device, telemetry),
                        telemetry_unavailable=no_telemetry,
                        engine=engine_info,
                    )
                    if snapshot is not None and profile_dir is not None:
                        profile = _profile(
                            prepared, snapshot, device, profile_dir, case.name, config.target
                        )
                        rank = dataclasses.replace(rank, profile=profile)
                    result = CaseResult.measured(case.name, case.requests, [rank])
                except Exception as error:  # recorded per case; the others still run
                    result = CaseResult.failed(case.name, case.requests, describe_error(error))
                finally:
                    prepared = snapshot = None
                    free_device_memory(device)
                result = result.judge()
                judged.append(result)
                if output_json is not None:
                    _write(judged, output_json)
                announce(result, echo, warn, host_context(config.options.threads) if host else None)
                profiled = result.ranks[0].profile if result.ranks else None
                if profiled is not None:
                    echo(_profile_line(case.name, profiled))
                sys.stdout.flush()
    finally:
        if telemetry is not None:
            telemetry.close()
    return judged
