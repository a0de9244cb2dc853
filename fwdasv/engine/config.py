"""What the engine is asked to do, validated and resolved: `EngineConfig`, `ForwardRun`.

The command line (`fwdasv.engine.cli`) only maps its flags onto
`ForwardRun.from_options`, as vLLM's `EngineArgs.from_cli_args` builds its
config from parsed flags: every check runs here, in the order a user meets
them, each a one-line `UserError`. Torch-free until the settings are known to
be good: a bad --dtype or --device spelling, a bad output path
(--output-json, --dump-output, --profile-dir) fail in a fraction of a
second, before the target is imported (which imports torch); `auto` device,
timer, protocol and dtype are then resolved with torch (`fwdasv.targets.device`).
Running the checked `ForwardRun` is `fwdasv.engine.run`'s.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fwdasv.core.cases import BenchCase, load_cases, parse_case, suite_cases, unique_cases
from fwdasv.core.errors import UserError
from fwdasv.core.files import MissingParentError, check_output_dir, check_output_path
from fwdasv.core.results import EngineInfo
from fwdasv.engine.protocol import AUTO, PROTOCOLS, STEADY, resolve_protocol
from fwdasv.targets.base import TargetSpec, parse_options
from fwdasv.targets.device import check_dtype_name, resolve_device, resolve_dtype, torch_dtype


class EngineOptionError(UserError, ValueError):
    """Flags of `fwdasv forward` that cannot go together or do not fit this machine."""


@dataclass(frozen=True)
class BenchOptions:
    iters: int = 20
    samples: int = 5
    seed: int = 0
    # Replays before timing, for steady clocks (the seed's ~1 s).
    warmup_s: float = 1.0
    # "graph" (CUDA only) or "host".
    timer: str = "graph"
    # A name of fwdasv.engine.protocol.PROTOCOLS (resolved: not "auto").
    protocol: str = STEADY
    # torch's intra-op threads while timing (None: torch's own choice).
    threads: int | None = None
    # The host timer: time fwdasv's fixed workload after each timed replay
    # (`fwdasv.engine.yardstick`): the forward's time over it cancels the host's pace.
    reference: bool = False

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.iters < 1 or self.samples < 1:
            raise ValueError(f"iters ({self.iters}) and samples ({self.samples}) must be >= 1")
        if self.warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")
        if self.timer not in ("graph", "host"):
            raise ValueError(f"timer must be 'graph' or 'host', got {self.timer!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.reference and self.timer != "host":
            raise ValueError("reference is for the host timer: CUDA graphs' times need no pace")


_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def check_device_name(device: str) -> str:
    """--device's spelling, checked without torch: auto, cpu, cuda or cuda:N."""
    if not _DEVICE.fullmatch(device):
        raise EngineOptionError(f"--device {device!r}: use auto, cpu, cuda or cuda:N")
    return device


# The host timer's threads unless --threads says otherwise: the suites' choice. On a
# small shared CPU box torch's default (one thread per core) made a 1 ms forward's
# samples spread up to 1000x beside another job; one thread kept them together.
HOST_TIMER_THREADS = 1


def resolve_threads(threads: int | None, timer: str) -> int | None:
    """--threads, else HOST_TIMER_THREADS on the host timer, else torch's own choice."""
    if threads is not None:
        return threads
    return HOST_TIMER_THREADS if timer == "host" else None


def resolve_timer(timer: str, device: str) -> str:
    if timer == "auto":
        return "graph" if device.startswith("cuda") else "host"
    if timer == "graph" and not device.startswith("cuda"):
        raise EngineOptionError(
            "--timer graph needs a CUDA device; use --timer host (or auto) on CPU"
        )
    return timer


@dataclass(frozen=True)
class EngineConfig:
    """How to time: the target and its options, device, dtype and the bench options."""

    target: str
    # The target factory's keyword options (JSON values, from --target-option).
    target_options: Mapping[str, object]
    device: str
    dtype: str
    options: BenchOptions

    @classmethod
    def from_options(
        cls,
        *,
        target: str,
        target_options: Mapping[str, object],
        device: str,
        dtype: str,
        timer: str,
        protocol: str,
        iters: int,
        samples: int,
        seed: int,
        warmup_s: float,
        pipeline: bool,
        threads: int | None = None,
        reference: bool = False,
    ) -> EngineConfig:
        """The config with every `auto` resolved on this machine (this imports torch).

        A pipeline streams its microbatches back to back: its protocol is steady.
        """
        device = resolve_device(device)
        timer = resolve_timer(timer, device)
        dtype = resolve_dtype(dtype, device)
        torch_dtype(dtype)
        if reference and (timer != "host" or device != "cpu" or pipeline):
            raise EngineOptionError(
                f"--reference times a CPU workload beside a CPU forward: it needs --device cpu "
                f"and the host timer in one stage (got device {device}, timer {timer}"
                f"{', a pipeline' if pipeline else ''})"
            )
        return cls(
            target=target,
            target_options=target_options,
            device=device,
            dtype=dtype,
            options=BenchOptions(
                iters=iters,
                samples=samples,
                seed=seed,
                warmup_s=warmup_s,
                timer=timer,
                protocol=STEADY if pipeline else resolve_protocol(protocol, timer),
                threads=resolve_threads(threads, timer),
                reference=reference,
            ),
        )

    def describe(self) -> EngineInfo:
        """What produced a result, stored in every rank's result (`engine`)."""
        import torch

        options = self.options
        return EngineInfo(
            target=self.target,
            target_options=self.target_options,
            device=self.device,
            dtype=self.dtype,
            iters=options.iters,
            samples=options.samples,
            seed=options.seed,
            warmup_s=options.warmup_s,
            timer=options.timer,
            protocol=options.protocol,
            threads=options.threads,
            torch=torch.__version__,
            python=platform.python_version(),
            gpu=torch.cuda.get_device_name(torch.device(self.device))
            if self.device.startswith("cuda")
            else None,
        )


def collect_cases(
    case: Sequence[str], shapes: str | None, suite: Sequence[str]
) -> tuple[BenchCase, ...]:
    """--case, then --shapes, then --suite cases, each name once."""
    cases = [parse_case(text) for text in case]
    if shapes:
        cases += load_cases(shapes)
    for name in suite:
        cases += suite_cases(name)
    if not cases:
        raise EngineOptionError("No cases: pass at least one --case, --shapes or --suite")
    return tuple(unique_cases(cases))


def under_torchrun() -> bool:
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


@dataclass(frozen=True)
class ForwardRun:
    """One `fwdasv forward`: the cases, the engine config, where the results go.

    `pipeline`: several stages, or one rank of a torchrun group.
    """

    config: EngineConfig
    cases: tuple[BenchCase, ...]
    pipeline_stages: int = 1
    pipeline: bool = False
    timeout_s: float = 3600.0
    output_json: str | None = None
    dump_output: str | None = None
    profile_dir: str | None = None

    @classmethod
    def from_options(
        cls,
        *,
        target: str,
        target_options: Sequence[str],
        case: Sequence[str],
        shapes: str | None,
        suite: Sequence[str],
        iters: int,
        samples: int,
        seed: int,
        dtype: str,
        device: str,
        timer: str,
        warmup_s: float,
        protocol: str,
        pipeline_stages: int,
        timeout_s: float,
        output_json: str | None,
        create_dirs: bool,
        dump_output: str | None,
        profile_dir: str | None,
        threads: int | None = None,
        reference: bool = False,
    ) -> ForwardRun:
        """Check the flags of `fwdasv forward` and build the run; the first problem is a
        one-line `UserError` (status 1), before anything is measured."""
        cases = collect_cases(case, shapes, suite)
        pipeline = pipeline_stages > 1 or under_torchrun()
        if pipeline and protocol not in (AUTO, STEADY):
            raise EngineOptionError(
                f"--protocol {protocol} is for single-stage runs: a pipeline streams its "
                "microbatches back to back (use --protocol steady or auto)"
            )
        if dump_output is not None and not pipeline:
            raise EngineOptionError("--dump-output is for pipeline runs (--pipeline-stages N > 1)")
        if pipeline and profile_dir is not None:
            raise EngineOptionError(
                "--profile-dir is not supported for pipeline runs yet; profile with one stage"
            )
        # Checks that need no torch come first: importing the target imports torch (seconds).
        if dtype != "auto":
            check_dtype_name(dtype)
        check_device_name(device)
        # Before anything is measured: a bad path must cost nothing.
        try:
            if output_json is not None:
                check_output_path(output_json, make_parents=create_dirs, what="--output-json")
            if dump_output is not None:
                check_output_dir(dump_output, make_parents=create_dirs, what="--dump-output")
            if profile_dir is not None:
                check_output_dir(profile_dir, make_parents=create_dirs, what="--profile-dir")
        except MissingParentError as error:
            raise MissingParentError(f"{error}, or pass --create-dirs") from None
        options = parse_options(tuple(target_options))
        spec = TargetSpec.parse(target, options)
        spec.resolve()
        if pipeline_stages > 1 and not under_torchrun():
            # Before any rank starts (64 stages of a 4-layer target ran a box out of memory).
            spec.check_stages(pipeline_stages)
        config = EngineConfig.from_options(
            target=target,
            target_options=options,
            device=device,
            dtype=dtype,
            timer=timer,
            protocol=protocol,
            iters=iters,
            samples=samples,
            seed=seed,
            warmup_s=warmup_s,
            pipeline=pipeline,
            threads=threads,
            reference=reference,
        )
        return cls(
            config=config,
            cases=cases,
            pipeline_stages=pipeline_stages,
            pipeline=pipeline,
            timeout_s=timeout_s,
            output_json=output_json,
            dump_output=dump_output,
            profile_dir=profile_dir,
        )
