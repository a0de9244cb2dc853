"""The fleet's commands: `fwdasv shard --ray` (its body), `fwdasv fleet-confirm`,
`fwdasv fleet-triage` and `fwdasv fleet-nightly`.

FWDASV_FLEET_HOOKS=MODULE:NAME names a `fwdasv.fleet.actor.Hooks` the workers use (a
test's fake GPU identities and gate, several fake nodes on one box); unset, none.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from fwdasv.analysis.commands.common import explain_switch
from fwdasv.analysis.confirm.reproduce import NOTHING_PENDING
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.finding import Finding, to_re_measure
from fwdasv.asv.project import AsvProject
from fwdasv.asv.shard_run import range_commits
from fwdasv.core.clitools import (
    CONTEXT,
    CliError,
    Command,
    bench_option,
    config_option,
    machine_option,
)
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.fleet import _ray
from fwdasv.fleet.actor import BISECT, CONFIRM, EXPLAIN, Hooks
from fwdasv.fleet.night import fleet_night
from fwdasv.fleet.remote import to_triage, triage_on_fleet
from fwdasv.fleet.run import connect, run_fleet

HOOKS_ENV = "FWDASV_FLEET_HOOKS"


def hooks_from_env() -> Hooks | None:
    """The `Hooks` FWDASV_FLEET_HOOKS names (MODULE:NAME), or None when it is unset."""
    named = os.environ.get(HOOKS_ENV)
    if not named:
        return None
    module, _, name = named.partition(":")
    hooks = getattr(importlib.import_module(module), name, None)
    if not isinstance(hooks, Hooks):
        raise CliError(f"{HOOKS_ENV}={named} names no fwdasv.fleet.actor.Hooks", EXIT_USAGE)
    return hooks


@contextmanager
def joined(address: str) -> Iterator[None]:
    """Inside: this process is joined to the cluster at `address`; after: left again, when
    it was this block that joined (`fwdasv.fleet.run.connect`)."""
    joined_here = connect(address)
    try:
        yield
    finally:
        if joined_here:
            _ray.ray.shutdown()


def shard_over_ray(
    project: AsvProject,
    commits: Sequence[str],
    spec: str,
    address: str,
    bench: Sequence[str],
    fleet_dir: str | None,
) -> None:
    """`fwdasv shard --ray`: the range over the cluster, its summary, its exit status."""
    with joined(address):
        outcome = run_fleet(
            project,
            commits,
            spec,
            bench=bench,
            root=fleet_dir,
            hooks=hooks_from_env(),
            echo=click.echo,
        )
    for line in outcome.lines():
        click.echo(line)
    ledger = outcome.ledger
    if ledger.failed or ledger.queue:
        left = len(ledger.failed) + len(ledger.queue)
        raise CliError(
            f"{left} commit(s) not measured (see {outcome.record}); rerun the same command "
            "to measure only those",
            EXIT_USAGE,
        )


class RayAddress(click.types.StringParamType):
    """A Ray cluster's address as `ray.init` takes it: `auto` (the cluster `ray start` runs
    on this host), `local`, HOST:PORT or ray://HOST:PORT. Anything else is refused by the
    option's name before any finding is read: `--ray ""` passed while there was nothing
    to send, and would have failed only on a night with a finding."""

    name = "Ray address"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if text in ("auto", "local") or re.fullmatch(r"(ray://)?[\w.\-\[\]:]+:\d{1,5}", text):
            return text
        self.fail(
            f"{text!r} is no Ray address; give auto (the cluster `ray start` runs here), "
            "HOST:PORT or ray://HOST:PORT",
            param,
            ctx,
        )


_ray_option = click.option(
    "--ray",
    "address",
    required=True,
    type=RayAddress(),
    metavar="ADDRESS",
    help="The Ray cluster: auto, HOST:PORT or ray://HOST:PORT.",
)
_fleet_dir_option = click.option(
    "--fleet-dir",
    metavar="DIR",
    help="Where each node keeps its copy of the project [default: <tmp>/fwdasv-fleet].",
)
_max_processes_option = click.option(
    "--max-processes",
    type=click.IntRange(min=3),
    default=6,
    show_default=True,
    help="Bench processes a side at most in each confirmation's re-measure, on the GPU that "
    "measured the finding.",
)


@dataclass(frozen=True)
class FleetOptions:
    """What fleet-confirm and fleet-triage take alike: the cluster's address, the project's
    configuration, which findings (`machine`, `bench`), where nodes keep the project's copy
    and the bench processes per side."""

    address: str
    config: Path
    machine: str | None
    bench: tuple[str, ...]
    fleet_dir: str | None
    max_processes: int

    def find(self, project: AsvProject) -> list[Finding]:
        """The project's findings (speed-ups too: the fleet re-measures them), of `machine`
        and `bench` where given."""
        return findings.find(project, machine=self.machine, bench=self.bench, improvements=True)

    def on_fleet(self, project: AsvProject, found: Sequence[Finding], steps: Sequence[str]) -> None:
        """`triage_on_fleet` from the command line: joined, run, left; what each GPU recorded."""
        with joined(self.address):
            done = triage_on_fleet(
                project,
                found,
                steps,
                root=self.fleet_dir,
                hooks=hooks_from_env(),
                max_processes=self.max_processes,
                echo=click.echo,
            )
        for remote in done:
            click.echo(f"{remote.worker.label}: {len(remote.verdicts)} verdict(s) recorded here")
        if not done:
            raise CliError("nothing confirmed", EXIT_USAGE)


def fleet_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options fleet-confirm and fleet-triage share, handed to the command as one
    `FleetOptions`, its first parameter (click's pattern of options packed into an object)."""

    @functools.wraps(command)
    def packed(
        address: str,
        config: Path,
        machine: str | None,
        bench: tuple[str, ...],
        fleet_dir: str | None,
        max_processes: int,
        **rest: object,
    ) -> None:
        command(FleetOptions(address, config, machine, bench, fleet_dir, max_processes), **rest)

    for option in reversed(
        (
            _ray_option,
            config_option(),
            machine_option("Only this machine's findings [default: every machine]."),
            bench_option,
            _fleet_dir_option,
            _max_processes_option,
        )
    ):
        packed = option(packed)
    return packed


@click.command("fleet-confirm", cls=Command, context_settings=CONTEXT)
@fleet_options
def fleet_confirm_command(fleet: FleetOptions) -> None:
    """Confirm each regression on the GPU that measured it, from this (the head) host.

    Each finding's A/B re-measure runs on the Ray node and GPU of its machine
    (node affinity, CUDA_VISIBLE_DEVICES its UUID); the verdicts are appended
    to this project's verdicts file. Exit status 0, 2 when a machine's GPU is
    in no live node.
    """
    project = AsvProject.load(fleet.config)
    found = [f for f in fleet.find(project) if to_re_measure(f)]
    if not found:
        click.echo(f"nothing to confirm: {NOTHING_PENDING[True]}")
        return
    fleet.on_fleet(project, found, (CONFIRM,))


@click.command("fleet-triage", cls=Command, context_settings=CONTEXT)
@fleet_options
@explain_switch("Explain what confirm confirms.")
def fleet_triage_command(fleet: FleetOptions, explain: bool) -> None:
    """Confirm, explain and bisect each finding on the GPU that measured it, from the head.

    As nightly's triage, on the Ray node and GPU of each finding's machine:
    the A/B re-measure of each `regression` and `suspected` finding (each
    confirmed one explained, and each confirmed before without a kernel diff,
    as by fleet-confirm), then a bisect of each range of several commits not
    bisected yet. The verdicts (culprits too) are appended to this
    project's verdicts file, explain's profiles written under .fwdasv-explain/.
    Exit status 0, 2 when a machine's GPU is in no live node.
    """
    project = AsvProject.load(fleet.config)
    found = to_triage(fleet.find(project), explain=explain, bisect=True)
    if not found:
        click.echo(
            "nothing to triage: no finding to confirm"
            + (" or explain" if explain else "")
            + " and no range left to bisect"
        )
        return
    fleet.on_fleet(project, found, (CONFIRM, *((EXPLAIN,) if explain else ()), BISECT))


@click.command("fleet-nightly", cls=Command, context_settings=CONTEXT)
@click.argument("range_spec", metavar="RANGE")
@_ray_option
@config_option()
@_fleet_dir_option
@_max_processes_option
@explain_switch("Profile each confirmed regression at both commits, on its GPU.")
@click.option(
    "--bisect/--no-bisect",
    default=True,
    show_default=True,
    help="Bisect each regression or confirmed finding whose range holds commits the night "
    "left unmeasured, on its GPU.",
)
@click.option("--fail-on-suspected", is_flag=True, help="Exit 1 on a suspected finding too.")
def fleet_nightly_command(
    range_spec: str,
    address: str,
    config: Path,
    fleet_dir: str | None,
    max_processes: int,
    explain: bool,
    bisect: bool,
    fail_on_suspected: bool,
) -> None:
    """A night over a Ray cluster, from the head: measure, triage, publish, gate.

    RANGE as `fwdasv shard` takes it; commits a GPU of this kind recorded
    before are not measured again, so the same sliding range each night
    measures only the new ones. Every finding is then confirmed (and
    explained, and its range bisected) on the GPU that measured it, the site
    published here with every machine, and nightly's gate applied to every
    machine's findings. Exit status: 0; 1 a confirmed regression nobody
    triaged; 2 an unreadable result, a commit no GPU measured, or bad input.
    """
    project = AsvProject.load(config)
    commits = range_commits(project, range_spec)
    with joined(address):
        status = fleet_night(
            project,
            commits,
            range_spec,
            root=fleet_dir,
            hooks=hooks_from_env(),
            explain=explain,
            bisect=bisect,
            fail_on_suspected=fail_on_suspected,
            max_processes=max_processes,
            echo=click.echo,
        )
    raise SystemExit(status)
