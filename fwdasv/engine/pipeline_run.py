"""A pipeline run: every case on this rank (under torchrun), or the relaunch that starts one.

`fwdasv forward --pipeline-stages N` outside torchrun relaunches itself through
`fwdasv.launch` with the engine's own command line (`fwdasv.engine.argv`);
under torchrun each rank builds its stage of the target, runs every case with
`fwdasv.engine.pipeline.bench_case`, and rank 0 prints and writes the results.

The relaunch checks the limits first (stages against the visible GPUs, or the
usable CPUs for gloo; the target's layers were checked by the command line),
so a bad count costs no process. torchrun's own output goes to the log only;
the terminal gets the per-case lines, and a failure is one line naming the
failing rank, its exit status and the log.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.distributed as dist

from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.core.errors import EXIT_INTERRUPTED, UserError, describe_error
from fwdasv.engine.argv import EngineArgs, engine_argv
from fwdasv.engine.config import EngineConfig
from fwdasv.engine.pipeline import RankContext, bench_case
from fwdasv.engine.ranks import (
    CaseFailed,
    PipelineError,
    Topology,
    agree,
    init_groups,
    rank_device,
)
from fwdasv.engine.report import announce
from fwdasv.launch import MAX_RANKS_PER_CPU, LaunchError, LaunchSpec, launch, usable_cpus
from fwdasv.targets.base import TargetSpec
from fwdasv.targets.device import free_device_memory


def run_rank(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    num_stages: int,
    output_json: str | os.PathLike[str] | None,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] = print,
) -> list[results.CaseResult]:
    """This rank's part of a pipeline run (under torchrun); returns the judged results.

    Rank 0 prints one line per case and rewrites `output_json` after each.
    """
    topology = Topology.from_env(num_stages)
    device = rank_device(config, topology)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        config = dataclasses.replace(config, device=str(device))
    if config.options.timer == "graph" and device.type != "cuda":
        raise PipelineError("the graph timer needs CUDA; use --timer host (or auto) on CPU")
    if config.options.threads is not None:
        torch.set_num_threads(config.options.threads)
    groups = init_groups(device)
    context = RankContext(
        topology, groups, device, config, Path(dump_output) if dump_output else None
    )
    with torch.inference_mode():
        judged = _run_cases(context, cases, output_json, echo, warn)
    # Only after a clean finish: a rank that raised leaves the group to torchrun,
    # which stops the others; tearing down NCCL with transfers in flight can hang.
    dist.destroy_process_group()
    return judged


def _run_cases(
    context: RankContext,
    cases: Sequence[BenchCase],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> list[results.CaseResult]:
    topology, config = context.topology, context.config
    judged: list[results.CaseResult] = []
    error = None
    target = None
    try:
        spec = TargetSpec.parse(config.target, config.target_options)
        target = spec.build(
            config.device, config.dtype, stage=topology.stage, num_stages=topology.num_stages
        )
    except Exception as failure:
        error = describe_error(failure)
    try:
        agree(context.groups.control, error, "build")
    except CaseFailed as failure:
        # Nothing can run: every case carries the build error.
        for case in cases:
            failed = results.CaseResult.failed(case.name, case.requests, str(failure))
            _publish(topology, judged, failed, output_json, echo, warn)
        return judged
    assert target is not None
    for case in cases:
        try:
            ranks = bench_case(context, target, case)
            result = results.CaseResult.measured(case.name, case.requests, ranks)
        except CaseFailed as failure:
            result = results.CaseResult.failed(case.name, case.requests, str(failure))
        finally:
            free_device_memory(context.device)
        _publish(topology, judged, result, output_json, echo, warn)
    return judged


def _publish(
    topology: Topology,
    judged: list[results.CaseResult],
    result: results.CaseResult,
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> None:
    """Judge the newest result (every rank, the same verdict) into `judged`; rank 0 writes
    every result so far and prints this one."""
    judged.append(result.judge())
    if topology.rank == 0:
        if output_json is not None:
            results.dump(judged, output_json, make_parents=False, what="--output-json")
        announce(judged[-1], echo, warn)


# --- entry point: relaunch under torchrun, or run this rank ---------------------------


def pipeline_main(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] = print,
) -> list[results.CaseResult]:
    """Run `cases` through a `stages`-stage pipeline; return the judged results.

    Under torchrun (RANK set) this is one rank's part, and only rank 0
    returns the results. Otherwise it starts
    `torchrun --nproc-per-node stages -m fwdasv.engine ...` with the same
    settings through `fwdasv.launch` (killed after `timeout_s`) and reads the
    results back, so `fwdasv forward --pipeline-stages N` just works.
    """
    if "RANK" in os.environ:
        judged = run_rank(config, cases, stages, output_json, dump_output, echo, warn)
        # Every rank knows which cases failed; rank 0, which prints and writes
        # the results, is the one to report them (and exit 3).
        return judged if int(os.environ["RANK"]) == 0 else []
    return _relaunch(config, cases, stages, output_json, timeout_s, dump_output, echo, warn)


def check_stage_resources(stages: int, device: str, warn: Callable[[str], None] = print) -> None:
    """Refuse more stages than this host can hold, before anything starts.

    CUDA: one GPU per stage. gloo: `MAX_RANKS_PER_CPU` ranks per usable CPU;
    beyond one per CPU the ranks share CPUs and the timings include it, so
    that is a warning.
    """
    if device.startswith("cuda"):
        count = torch.cuda.device_count()
        if stages > count:
            raise PipelineError(f"{stages} pipeline stages need {stages} GPUs; {count} visible")
        return
    cpus = usable_cpus()
    if stages > MAX_RANKS_PER_CPU * cpus:
        raise PipelineError(
            f"--pipeline-stages {stages}: on CPU (gloo) each stage is a process; this host "
            f"gives {cpus} usable CPU(s), so at most {MAX_RANKS_PER_CPU * cpus} stages"
        )
    if stages > cpus:
        warn(
            f"Warning: {stages} pipeline stages on {cpus} usable CPU(s): the ranks share "
            "CPUs, so the timings include the sharing"
        )


def _relaunch(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> list[results.CaseResult]:
    check_stage_resources(stages, config.device, warn)
    workdir = Path(tempfile.mkdtemp(prefix="fwdasv-pipeline-"))
    results_path = Path(output_json) if output_json is not None else workdir / "results.json"
    options = config.options
    args = EngineArgs(
        target=config.target,
        cases=cases,
        output_json=results_path,
        target_options=config.target_options,
        dtype=config.dtype,
        # Each rank takes cuda:LOCAL_RANK.
        device="cuda" if config.device.startswith("cuda") else "cpu",
        timer=options.timer,
        iters=options.iters,
        samples=options.samples,
        seed=options.seed,
        warmup_s=options.warmup_s,
        protocol=options.protocol,
        threads=options.threads,
        pipeline_stages=stages,
        dump_output=dump_output,
    )
    spec = LaunchSpec(engine_argv(args), nproc_per_node=stages, timeout_s=timeout_s)
    log = workdir / "torchrun.log"

    def progress(line: str) -> None:
        # Rank 0's case lines and warnings; torchrun's own output stays in the log.
        if line.startswith("[forward] "):
            echo(line)
        elif line.startswith("Warning: "):
            warn(line)

    try:
        outcome = launch(spec, results_path, log, echo=progress, cases=[c.name for c in cases])
    except LaunchError as error:
        raise PipelineFailed(error.headline(f"{stages}-stage pipeline")) from None
    except KeyboardInterrupt:
        raise PipelineFailed(
            f"interrupted; every rank was stopped (their output: {log})",
            exit_code=EXIT_INTERRUPTED,
        ) from None
    # On failure the log stays for the user; here all went through.
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome


class PipelineFailed(UserError):
    """The torchrun group failed or was interrupted: one line, the log kept."""

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code
