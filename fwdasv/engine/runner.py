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
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.errors import describe_error
from fwdasv.core.results import CaseResult, ProfileBlock
from fwdasv.engine.attribute import source_roots
from fwdasv.engine.capture import StateSnapshot, bench_forward
from fwdasv.engine.config import EngineConfig
from fwdasv.engine.imports import project_modules
from fwdasv.engine.profile import ProfileOptions, profile_case
from fwdasv.engine.report import announce, host_context, profile_line
from fwdasv.hw.telemetry import TelemetryUnavailable, open_for_device
from fwdasv.targets.base import PreparedForward, TargetSpec
from fwdasv.targets.device import free_device_memory

if TYPE_CHECKING:
    from fwdasv.hw.telemetry import GpuTelemetry


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


def open_telemetry(device: torch.device) -> tuple[GpuTelemetry | None, str | None]:
    """The NVML view of the CUDA device (None and why, when NVML cannot read it)."""
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
                prepared: PreparedForward | None = None
                snapshot: StateSnapshot | None = None
                try:
                    prepared = target.prepare(case, config.options.seed)
                    # Timing leaves the state one step on: profiling restores this one.
                    snapshot = StateSnapshot(prepared.state) if profile_dir is not None else None
                    rank = dataclasses.replace(
                        bench_forward(prepared, config.options, device, telemetry),
                        telemetry_unavailable=no_telemetry,
                        # What a commit must change to reach this forward (lazily imported
                        # modules included: read after the case ran).
                        engine=dataclasses.replace(
                            engine_info, imported=project_modules(config.target)
                        ),
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
                    echo(profile_line(case.name, profiled))
                sys.stdout.flush()
    finally:
        if telemetry is not None:
            telemetry.close()
    return judged
