"""`fwdasv shard RANGE`: a range measured on every GPU of this host at once, commits interleaved."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.asv.project import AsvProject
from fwdasv.asv.shard_run import (
    range_commits,
    run_folder,
    run_shards,
    write_machines,
    write_record,
)
from fwdasv.core.clitools import CONTEXT, CliError, Command, config_option
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.fleet.cli import RayAddress, shard_over_ray
from fwdasv.hw.nvml import parse_gpu_selection, read_inventory
from fwdasv.hw.shard import gpu_machines, plan_shards


@click.command("shard", cls=Command, context_settings=CONTEXT)
@click.argument("range_spec", metavar="RANGE")
@config_option()
@click.option(
    "--gpus", help="GPUs to shard over: NVML indices or UUIDs, comma separated [default: all]."
)
@click.option(
    "--bench",
    "-b",
    "bench",
    multiple=True,
    metavar="REGEX",
    help="Only the benchmarks matching REGEX (asv's --bench), repeatable.",
)
@click.option("--plan-only", is_flag=True, help="Print and record the split; measure nothing.")
@click.option(
    "--ray",
    "ray_address",
    type=RayAddress(),
    metavar="ADDRESS",
    help="Spread the range over a Ray cluster's GPUs instead (`auto`: the cluster `ray start` "
    "runs on this host); see README, A fleet.",
)
@click.option(
    "--fleet-dir",
    metavar="DIR",
    help="With --ray: where each node keeps its copy of the project [default: <tmp>/fwdasv-fleet].",
)
def shard_command(
    range_spec: str,
    config: Path,
    gpus: str | None,
    bench: tuple[str, ...],
    plan_only: bool,
    ray_address: str | None,
    fleet_dir: str | None,
) -> None:
    """`asv run RANGE` spread over this host's GPUs: one asv run per GPU at once.

    RANGE is A..B (the commits after A up to B, first parent, as asv run takes
    them) or HASHFILE:FILE. GPU k of N measures every Nth commit from the kth,
    so every GPU's series spans the whole range and a step shows on each of
    them; each GPU is a machine of its own (`fwdasv hw machine`'s name: its
    UUID's digest), written to asv's machine file. GPUs that differ in model,
    driver, CUDA or clock policy are refused: their series could not be
    compared. The split (which GPU measures which commit), each run's status
    and log go to .fwdasv-shards/<run>/plan.json beside asv.conf.json.
    Pipeline suites need 2 GPUs a process: measure them unsharded (`asv run
    --bench pipeline`). Confirm and bisect then re-measure each finding on its
    own machine's GPU.

    With --ray ADDRESS the range goes over every GPU of a Ray cluster instead:
    one worker per GPU, commits pulled from a queue, each result written here
    (this host owns the project), a lost node's commits re-run on another GPU;
    a rerun continues where a stopped one ended (`fwdasv.fleet`).

    Exit status: 0 every GPU's run ran (a benchmark may have failed in it:
    asv's status 2, said), 2 bad input or a run that could not (the first one
    named, with its log; the others run to their end), 4 no GPU, or GPUs that
    cannot share a history.
    """
    project = AsvProject.load(config)
    commits = range_commits(project, range_spec)
    if ray_address is not None:
        if gpus or plan_only:
            raise CliError(
                "--gpus and --plan-only are for one host; drop them with --ray", EXIT_USAGE
            )
        shard_over_ray(project, commits, range_spec, ray_address, bench, fleet_dir)
        return
    machines = gpu_machines(read_inventory(parse_gpu_selection(gpus)))
    plan = plan_shards(machines, commits)
    for line in plan.lines():
        click.echo(line)
    if plan_only:
        record = write_record(run_folder(project, plan), plan, range_spec)
        click.echo(f"split recorded in {record}; nothing measured (--plan-only)")
        return
    click.echo(f"machine entries written to {write_machines(machines)}")
    outcome = run_shards(project, plan, range_spec, bench=bench, echo=click.echo)
    for run in outcome.runs:
        click.echo(run.line())
    click.echo(
        f"{len(outcome.runs)} run(s) in {outcome.seconds:.1f} s; split and runs in {outcome.record}"
    )
    failed = outcome.first_failure()
    if failed is not None:
        raise CliError(f"the first run to fail: {failed.line()}", EXIT_USAGE)
