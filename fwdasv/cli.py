"""The `fwdasv` command: one click group; each package's commands come from its own cli.py.

`fwdasv nightly` is defined here: it is the one command that composes the
packages (hardware setup, asv runs, the analyses) rather than belonging to one.
"""

from __future__ import annotations

import click

from fwdasv import __version__
from fwdasv.analysis.commands import COMMANDS as ANALYSIS_COMMANDS
from fwdasv.analysis.commands.common import explain_option
from fwdasv.asv.cli import COMMANDS as ASV_COMMANDS
from fwdasv.asv.shard_cli import shard_command
from fwdasv.core.clitools import (
    CONTEXT,
    AnalysisCommand,
    Group,
    config_option,
    skip_unreadable_option,
    warn_unreadable,
)
from fwdasv.core.errors import EXIT_RULE
from fwdasv.demo.cli import demo_command
from fwdasv.engine.cli import forward
from fwdasv.fleet.cli import fleet_confirm_command
from fwdasv.hw.cli import hw


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_RULE)
@click.version_option(__version__, prog_name="fwdasv")
def main() -> None:
    """Track model forward latency across commits with asv (airspeed velocity)."""


@click.command("nightly", cls=AnalysisCommand, context_settings=CONTEXT)
@config_option("asv configuration.")
@click.option(
    "--machine", help="asv machine name [default: host, GPU count and model, UUID digest]."
)
@click.option(
    "--gpus", help="GPUs to use and check: indices or UUIDs, comma separated [default: all]."
)
@click.option(
    "--lock-clocks",
    metavar="MHz|base|default",
    help="Lock SM clocks for the run (root); reset afterwards. [default: not locked]",
)
@click.option(
    "--state-file",
    type=click.Path(dir_okay=False),
    help="Where setup saves the GPU state that reset restores.",
)
@click.option(
    "--spec", default="NEW", help="asv run range: NEW (commits since the last run), A..B, a branch."
)
@click.option(
    "--existing",
    "existing_python",
    help="Measure this prepared environment's build (asv existing env).",
)
@click.option("--commit", help="The commit of the --existing build (asv --set-commit-hash).")
@click.option(
    "--machine-file",
    type=click.Path(dir_okay=False),
    help="asv machine file to write. [default: ~/.asv-machine.json]",
)
@click.option(
    "--confirm/--no-confirm",
    default=None,
    help="Re-measure each new regression (A/B on this machine) and gate on confirmed ones; "
    "without, gate on every regression found [default: asv.conf.json's fwdasv.confirm, "
    "else --confirm].",
)
@click.option(
    "--fail-on-suspected",
    is_flag=True,
    help="Exit 1 on a suspected finding left after the re-measure (undecided), too "
    "[default: only a confirmed regression, or any regression with --no-confirm].",
)
@explain_option
@click.option(
    "--bisect/--no-bisect",
    default=True,
    show_default=True,
    help="After confirm, bisect every regression or confirmed finding whose range holds "
    "commits asv left unmeasured (`asv run --steps`), the culprit recorded with it.",
)
@skip_unreadable_option
def nightly_command(
    config: str,
    machine: str | None,
    gpus: str | None,
    lock_clocks: str | None,
    state_file: str | None,
    spec: str,
    existing_python: str | None,
    commit: str | None,
    machine_file: str | None,
    confirm: bool | None,
    fail_on_suspected: bool,
    explain: bool,
    bisect: bool,
    skip_unreadable: bool,
) -> None:
    """Setup, machine file, asv run, findings, confirm, bisect, publish, gate, reset (always).

    Exit status: 0 no confirmed regression, 1 a confirmed regression (with
    --no-confirm: any regression; a suspected one, a step among the newest 1-3
    commits, is re-measured the same night), 2 the run could not be made (asv failed)
    or a result file could not be read, whatever else was found (named in the
    listing; --skip-unreadable to pass anyway), 4 a pre-flight check failed.
    """
    from fwdasv.hw.nvml import parse_gpu_selection
    from fwdasv.nightly import run_nightly

    outcome = run_nightly(
        config,
        machine=machine,
        gpus=parse_gpu_selection(gpus),
        lock_clocks=lock_clocks,
        state_file=state_file,
        spec=spec,
        existing_python=existing_python,
        commit=commit,
        machine_file=machine_file,
        confirm=confirm,
        fail_on_suspected=fail_on_suspected,
        explain=explain,
        bisect=bisect,
        skip_unreadable=skip_unreadable,
        echo=click.echo,
    )
    warn_unreadable(outcome.unreadable, skip_unreadable)
    raise SystemExit(outcome.status)


for command in (
    forward,
    hw,
    *ASV_COMMANDS,
    shard_command,
    fleet_confirm_command,
    *ANALYSIS_COMMANDS,
    demo_command,
    nightly_command,
):
    main.add_command(command)
