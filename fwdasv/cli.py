"""The `fwdasv` command: one click group; each package's commands come from its own cli.py.

`fwdasv nightly` is defined here: it is the one command that composes the
packages (hardware setup, asv runs, the analyses) rather than belonging to one.
"""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv import __version__
from fwdasv.analysis.commands import COMMANDS as ANALYSIS_COMMANDS
from fwdasv.analysis.commands.common import explain_option, improvements_option
from fwdasv.asv.cli import COMMANDS as ASV_COMMANDS
from fwdasv.core.clitools import (
    CONTEXT,
    AnalysisCommand,
    Group,
    MachineName,
    config_option,
    skip_unreadable_option,
    warn_unreadable,
)
from fwdasv.core.errors import EXIT_RULE
from fwdasv.demo.cli import demo_command
from fwdasv.engine.cli import forward
from fwdasv.fleet.cli import (
    fleet_confirm_command,
    fleet_nightly_command,
    fleet_triage_command,
)
from fwdasv.fleet.shard_cli import shard_command
from fwdasv.hw.cli import (
    GpuSelection,
    hw,
    lock_clocks_option,
    machine_file_option,
    state_file_option,
)
from fwdasv.nightly import run_nightly


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_RULE)
@click.version_option(__version__, prog_name="fwdasv")
def main() -> None:
    """Track model forward latency across commits with asv (airspeed velocity)."""


@click.command("nightly", cls=AnalysisCommand, context_settings=CONTEXT)
@config_option()
@click.option(
    "--machine",
    "-m",
    type=MachineName(),
    help="asv machine name [default: the project's machine, which `fwdasv init` records: "
    "another box is refused unless named here; with none recorded, the name `fwdasv hw "
    "machine` gives this box].",
)
@click.option(
    "--gpus",
    type=GpuSelection(),
    help="GPUs to use and check: indices or UUIDs, comma separated [default: all].",
)
@lock_clocks_option("Lock SM clocks for the run (root); reset afterwards. [default: not locked]")
@state_file_option
@click.option(
    "--spec",
    default="NEW",
    help="asv run range: NEW (commits since the last run), A..B, a branch; not with --existing.",
)
@click.option(
    "--existing",
    "existing_python",
    help="Measure this prepared environment's build (asv existing env).",
)
@click.option(
    "--commit", help="The commit of the --existing build (asv --set-commit-hash); only with it."
)
@machine_file_option
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
@click.option(
    "--fail-on-open",
    is_flag=True,
    help="Exit 1 on an acknowledged regression too (known, not fixed) [default: only one "
    "nobody triaged; accepted, fixed-by and invalid ones never gate].",
)
@explain_option
@improvements_option
@click.option(
    "--bisect/--no-bisect",
    default=True,
    show_default=True,
    help="After confirm, bisect every regression or confirmed finding whose range holds "
    "commits asv left unmeasured (`asv run --steps`), the culprit recorded with it.",
)
@skip_unreadable_option
@click.option(
    "--notify",
    "notify",
    multiple=True,
    metavar="URL",
    help="POST one JSON document (Slack's `text` and `blocks`, and the findings under "
    "`fwdasv`) to this webhook (an http or https URL, checked before the night) when the "
    "night brings a new finding; repeatable. A failed POST is retried, logged and never "
    "changes the exit status.",
)
@click.option(
    "--site-url",
    metavar="URL",
    default=None,
    help="Where html/ is served (an http or https URL), for the message's links to each "
    "finding's row.",
)
def nightly_command(
    config: str,
    machine: str | None,
    gpus: tuple[str, ...] | None,
    lock_clocks: str | None,
    state_file: Path | None,
    spec: str,
    existing_python: str | None,
    commit: str | None,
    machine_file: Path | None,
    confirm: bool | None,
    fail_on_suspected: bool,
    fail_on_open: bool,
    explain: bool,
    improvements: bool,
    bisect: bool,
    skip_unreadable: bool,
    notify: tuple[str, ...],
    site_url: str | None,
) -> None:
    """Setup, machine file, asv run, findings, confirm, bisect, publish, gate, reset (always).

    Exit status: 0 no confirmed regression left untriaged, 1 a confirmed regression
    first seen tonight or that nobody triaged (`fwdasv triage`; with --no-confirm: any
    such regression; a suspected one, a step among the newest 1-3 commits, is
    re-measured the same night), 2 the run could not be made (asv failed),
    a result file could not be read, whatever else was found (named in the
    listing; --skip-unreadable to pass anyway), or a suite measured before has no
    value in any case at its newest commit (named in the listing: skipped or failed
    there, a step would not show), 4 a pre-flight check failed.
    """
    given = click.get_current_context().get_parameter_source("spec")
    if existing_python and given not in (None, click.core.ParameterSource.DEFAULT):
        raise click.UsageError(
            "--spec goes without --existing: an --existing build is measured as the one "
            "commit --commit names; drop --spec"
        )
    outcome = run_nightly(
        config,
        machine=machine,
        gpus=gpus,
        lock_clocks=lock_clocks,
        state_file=state_file,
        spec=spec,
        existing_python=existing_python,
        commit=commit,
        machine_file=machine_file,
        confirm=confirm,
        fail_on_suspected=fail_on_suspected,
        fail_on_open=fail_on_open,
        explain=explain,
        improvements=improvements,
        bisect=bisect,
        skip_unreadable=skip_unreadable,
        notify=notify,
        site_url=site_url,
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
    fleet_triage_command,
    fleet_nightly_command,
    *ANALYSIS_COMMANDS,
    demo_command,
    nightly_command,
):
    main.add_command(command)
