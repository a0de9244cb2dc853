"""The one place the engine's command line is built.

Two callers start the engine in a new process: the torch backend (a bench
launch per suite and commit) and `fwdasv forward --pipeline-stages N`, which
relaunches itself under torchrun. Both build the argv here, from the same
value, so a flag is added, renamed or defaulted in one place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwdasv.core.cases import BenchCase

ENGINE_MODULE = "fwdasv.engine"


@dataclass(frozen=True)
class EngineArgs:
    """What `python -m fwdasv.engine` is asked to do (its flags, as values)."""

    target: str
    cases: Sequence[BenchCase]
    output_json: str | os.PathLike[str] | None = None
    target_options: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "auto"
    device: str = "auto"
    timer: str = "auto"
    iters: int = 20
    samples: int = 5
    seed: int = 0
    warmup_s: float = 1.0
    protocol: str = "auto"
    threads: int | None = None  # None: the engine's default (1 on the host timer)
    reference: bool = False  # the host timer: fwdasv's fixed workload beside each replay
    pipeline_stages: int = 1
    dump_output: str | os.PathLike[str] | None = None
    profile_dir: str | os.PathLike[str] | None = None
    extra: Sequence[str] = ()


def engine_argv(args: EngineArgs) -> list[str]:
    """What follows the interpreter (or torchrun) to run the engine with `args`."""
    argv = ["-m", ENGINE_MODULE, "--target", args.target]
    for key, value in args.target_options.items():
        argv += ["--target-option", f"{key}={json.dumps(value)}"]
    argv += [
        "--dtype",
        args.dtype,
        "--device",
        args.device,
        "--timer",
        args.timer,
        "--iters",
        str(args.iters),
        "--samples",
        str(args.samples),
        "--seed",
        str(args.seed),
        "--warmup-s",
        str(args.warmup_s),
        "--protocol",
        args.protocol,
    ]
    if args.threads is not None:
        argv += ["--threads", str(args.threads)]
    if args.reference:
        argv.append("--reference")
    if args.output_json is not None:
        argv += ["--output-json", str(args.output_json)]
    if args.pipeline_stages > 1:
        argv += ["--pipeline-stages", str(args.pipeline_stages)]
    if args.dump_output is not None:
        argv += ["--dump-output", str(args.dump_output)]
    if args.profile_dir is not None:
        argv += ["--profile-dir", str(args.profile_dir)]
    for case in args.cases:
        argv += ["--case", case.to_string()]
    return argv + list(args.extra)
