"""The `fwdasv` command: one click group, one verb per subcommand."""

from __future__ import annotations

import click

from fwdasv import __version__
from fwdasv.clibase import Group
from fwdasv.demo import demo_command
from fwdasv.engine.cli import forward
from fwdasv.export import export_command
from fwdasv.hwcli import hw
from fwdasv.nightly import nightly_command
from fwdasv.regressionscli import bisect_command, compare_command, regressions_command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fwdasv")
def main() -> None:
    """Track model forward latency across commits with asv (airspeed velocity)."""


main.add_command(forward)
main.add_command(hw)
main.add_command(export_command)
main.add_command(regressions_command)
main.add_command(compare_command)
main.add_command(bisect_command)
main.add_command(demo_command)
main.add_command(nightly_command)
