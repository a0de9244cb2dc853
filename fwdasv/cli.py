"""The `fwdasv` command: one click group, one verb per subcommand."""

from __future__ import annotations

import click

from fwdasv import __version__
from fwdasv.analysis.cli import bisect_command, compare_command, regressions_command
from fwdasv.analysis.export import export_command
from fwdasv.core.clitools import Command, Group
from fwdasv.demo.run import demo_command
from fwdasv.engine.cli import forward
from fwdasv.hw.cli import hw
from fwdasv.nightly import nightly_command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fwdasv")
def main() -> None:
    """Track model forward latency across commits with asv (airspeed velocity)."""


@click.command("publish", cls=Command, context_settings={"show_default": True})
@click.option(
    "--config", default="asv.conf.json", type=click.Path(dir_okay=False), help="asv configuration."
)
def publish_command(config: str) -> None:
    """`asv publish`, then the site made to work without the internet.

    asv's page loads its JavaScript libraries from CDNs; fwdasv points it at
    the copies it ships, so the site opens on a closed network too.
    """
    from fwdasv.asv import project as asvtools

    project = asvtools.AsvProject.load(config)
    html = asvtools.publish(project, echo=click.echo)
    click.echo(f"site: {html} (to view: python -m asv preview --config {project.config_path})")


main.add_command(forward)
main.add_command(hw)
main.add_command(export_command)
main.add_command(regressions_command)
main.add_command(compare_command)
main.add_command(bisect_command)
main.add_command(demo_command)
main.add_command(nightly_command)
main.add_command(publish_command)
