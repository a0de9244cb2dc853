"""`fwdasv demo`: the whole service on the embedded default, in one command."""

from __future__ import annotations

import click

from fwdasv.core.clitools import Command, MachineName, PathOption
from fwdasv.core.errors import EXIT_FINDING
from fwdasv.core.files import check_project_dir
from fwdasv.demo.run import MACHINE, run_demo


@click.command("demo", cls=Command, context_settings={"show_default": True})
@click.option(
    "--dir",
    "directory",
    type=PathOption(file_okay=False),
    default="fwdasv-demo",
    help="Where the demo project, its asv results and the site go (reused on re-runs).",
)
@click.option(
    "--every",
    type=click.IntRange(min=1),
    default=2,
    help="Measure every N-th commit (the rest is for bisect).",
)
@click.option(
    "--machine",
    default=None,
    type=MachineName(),
    help=f"asv machine name for the results; a name the project holds no results of starts "
    f"its series afresh [default: the one a re-run's project records, else {MACHINE}; "
    "another box is refused unless named here].",
)
def demo_command(directory: str, every: int, machine: str | None) -> None:
    """Run the whole service on a demo model repository: history, regression, bisect, site.

    Exits 0 when fwdasv named the commit the demo made slower, 1 when it did not
    (the last lines say what it found instead and what to do).
    """
    check_project_dir(directory)  # one line, before anything is built or measured
    outcome = run_demo(directory, every=every, machine=machine, echo=click.echo)
    if not outcome.found_injected:
        raise SystemExit(EXIT_FINDING)
