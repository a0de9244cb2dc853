"""A pipeline run: every case on this rank (under torchrun), or the relaunch that starts one.

`fwdasv forward --pipeline-stages N` outside torchrun relaunches itself through
`fwdasv.launch` with the engine's own command line (`fwdasv.engine.argv`);
under torchrun each rank builds its stage of the target, runs every case with
`fwdasv.engine.pipeline.bench_case`, and rank 0 prints and writes the results.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from fwdasv.core import results
from fwdasv.core.cases import BenchCase
from fwdasv.engine.pipeline import RankContext, bench_case
from fwdasv.engine.ranks import (
    CaseFailed,
    PipelineError,
    Topology,
    agree,
    init_groups,
    rank_device,
)
from fwdasv.engine.runner import EngineConfig, describe_error, free_device_memory
from fwdasv.targets.base import TargetSpec


def run_rank(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    num_stages: int,
    output_json: str | os.PathLike[str] | None,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """This rank's part of a pipeline run (under torchrun); returns the failed cases.

    Rank 0 prints one line per case and rewrites `output_json` after each.
    """
    topology = Topology.from_env(num_stages)
    device = rank_device(config, topology)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        config = dataclasses.replace(config, device=str(device))
    if config.options.timer == "graph" and device.type != "cuda":
        raise PipelineError("the graph timer needs CUDA; use --timer host (or auto) on CPU")
    groups = init_groups(device)
    context = RankContext(
        topology, groups, device, config, Path(dump_output) if dump_output else None
    )
    with torch.inference_mode():
        failed = _run_cases(context, cases, output_json, echo)
    # Only after a clean finish: a rank that raised leaves the group to torchrun,
    # which stops the others; tearing down NCCL with transfers in flight can hang.
    dist.destroy_process_group()
    return failed


def _run_cases(
    context: RankContext,
    cases: Sequence[BenchCase],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> list[str]:
    topology, config = context.topology, context.config
    entries: list[dict[str, Any]] = []
    failed: list[str] = []
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
            entries.append(results.error_entry(case.name, case.requests, str(failure)))
            failed.append(case.name)
            _publish(topology, entries, output_json, echo)
        return failed
    assert target is not None
    for case in cases:
        try:
            ranks = bench_case(context, target, case)
            entry = results.case_entry(case.name, case.requests, ranks)
        except CaseFailed as failure:
            entry = results.error_entry(case.name, case.requests, str(failure))
            failed.append(case.name)
        finally:
            free_device_memory(context.device)
        entries.append(entry)
        _publish(topology, entries, output_json, echo)
    return failed


def _publish(
    topology: Topology,
    entries: list[dict[str, Any]],
    output_json: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> None:
    if topology.rank != 0:
        return
    if output_json is not None:
        results.dump(entries, output_json, make_parents=False, what="--output-json")
    entry = entries[-1]
    echo(results.parse_case_result(entry, entry["case"]).line())


# --- entry point: relaunch under torchrun, or run this rank ---------------------------


def pipeline_main(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Run `cases` through a `stages`-stage pipeline; return the failed case names.

    Under torchrun (RANK set) this is one rank's part, and only rank 0
    returns the failed cases. Otherwise it starts
    `torchrun --nproc-per-node stages -m fwdasv.engine ...` with the same
    settings through `fwdasv.launch` (killed after `timeout_s`) and reads the
    results back, so `fwdasv forward --pipeline-stages N` just works.
    """
    if "RANK" in os.environ:
        failed = run_rank(config, cases, stages, output_json, dump_output, echo)
        # Every rank knows which cases failed; rank 0, which prints and writes
        # the results, is the one to report them (and exit 3).
        return failed if int(os.environ["RANK"]) == 0 else []
    return _relaunch(config, cases, stages, output_json, timeout_s, dump_output, echo)


def _relaunch(
    config: EngineConfig,
    cases: Sequence[BenchCase],
    stages: int,
    output_json: str | os.PathLike[str] | None,
    timeout_s: float,
    dump_output: str | os.PathLike[str] | None,
    echo: Callable[[str], None],
) -> list[str]:
    from fwdasv.engine.argv import EngineArgs, engine_argv
    from fwdasv.launch import LaunchSpec, launch

    if config.device.startswith("cuda") and torch.cuda.device_count() < stages:
        raise PipelineError(
            f"{stages} pipeline stages need {stages} GPUs; {torch.cuda.device_count()} visible"
        )
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
        pipeline_stages=stages,
        dump_output=dump_output,
    )
    spec = LaunchSpec(engine_argv(args), nproc_per_node=stages, timeout_s=timeout_s)
    outcome = launch(
        spec, results_path, workdir / "torchrun.log", echo=echo, cases=[c.name for c in cases]
    )
    # On failure launch raised and the log stays for the user; here all went through.
    shutil.rmtree(workdir, ignore_errors=True)
    return [r.case for r in outcome if not r.ok]
