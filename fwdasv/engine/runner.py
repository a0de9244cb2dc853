"""Run a list of cases through the single-stage bench and write vLLM's JSON.

The target is built once; each case is prepared, timed and written out as soon
as it finishes (the whole file rewritten atomically), so a crash later loses
nothing already measured. A case that fails (a shape the target refuses, CUDA
out of memory) is recorded with its error and the next case still runs.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.engine.capture import BenchOptions, StateSnapshot, bench_forward
from fwdasv.targets.base import PreparedForward, TargetSpec


@dataclass(frozen=True)
class EngineConfig:
    target: str
    target_options: dict[str, Any]
    device: str
    dtype: str
    options: BenchOptions

    def describe(self) -> dict[str, Any]:
        """What produced a result, stored in every rank dict under `engine`."""
        info: dict[str, Any] = {
            "target": self.target,
            "target_options": self.target_options,
            "device": self.device,
            "dtype": self.dtype,
            **asdict(self.options),
            "torch": torch.__version__,
            "python": platform.python_version(),
        }
        if self.device.startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name(torch.device(self.device))
        return info


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device is visible; use --device cpu")
    return device


def resolve_dtype(dtype: str, device: str) -> str:
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return dtype


def resolve_timer(timer: str, device: str) -> str:
    if timer == "auto":
        return "graph" if device.startswith("cuda") else "host"
    if timer == "graph" and not device.startswith("cuda"):
        raise ValueError("--timer graph needs a CUDA device; use --timer host (or auto) on CPU")
    return timer


def describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def free_device_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def _write(entries: list[dict[str, Any]], output_json: str | os.PathLike[str]) -> None:
    try:
        results.dump(entries, output_json, make_parents=False, what="--output-json")
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
) -> dict[str, Any]:
    """--profile-dir: profiled runs of their own, after timing; a failure is recorded in
    the block and keeps the case's timing."""
    from fwdasv.engine.profile import ProfileOptions, profile_case

    free_device_memory(device)
    try:
        return profile_case(prepared, snapshot, device, ProfileOptions(), profile_dir, case_name)
    except Exception as error:
        return {"error": describe_error(error)}


def _profile_line(case_name: str, block: dict[str, Any]) -> str:
    if "error" in block:
        return f"[forward] {case_name}: profile FAILED: {block['error']}"
    return (
        f"[forward] {case_name}: profile {block['summary']} ({block['activities']} "
        f"{'ops' if block['device'] == 'cpu' else 'GPU activities'} per forward, "
        f"busy {block['busy_us']:.1f} us)"
    )


def run_cases(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None] = print,
    profile_dir: str | os.PathLike[str] | None = None,
) -> list[results.CaseResult]:
    """Bench every case; returns the parsed results (failed cases included).

    With `profile_dir`, each timed case is then profiled (`fwdasv.engine.profile`)
    and its rank dict gets vLLM's `profile` block.
    """
    device = torch.device(config.device)
    if device.type == "cuda":
        if device.index is None:
            # set_device refuses a bare "cuda" (what --device auto gives).
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    spec = TargetSpec.parse(config.target, config.target_options)
    engine_info = config.describe()
    entries: list[dict[str, Any]] = []
    with torch.inference_mode():
        target = spec.build(config.device, config.dtype)
        for case in cases:
            try:
                prepared = target.prepare(case, config.options.seed)
                # Timing leaves the state one step on: profiling restores this one.
                snapshot = StateSnapshot(prepared.state) if profile_dir is not None else None
                rank = bench_forward(prepared, config.options, device)
                rank["engine"] = engine_info
                if snapshot is not None and profile_dir is not None:
                    rank["profile"] = _profile(prepared, snapshot, device, profile_dir, case.name)
                entry = results.case_entry(case.name, case.requests, [rank])
            except Exception as error:  # recorded per case; the others still run
                entry = results.error_entry(case.name, case.requests, describe_error(error))
            finally:
                prepared = snapshot = None
                free_device_memory(device)
            entries.append(entry)
            if output_json is not None:
                _write(entries, output_json)
            echo(results.parse_case_result(entry, case.name).line())
            if profile_dir is not None and entry["ranks"]:
                echo(_profile_line(case.name, entry["ranks"][0]["profile"]))
            sys.stdout.flush()
    return results.parse(entries, str(output_json or "<engine>"))
