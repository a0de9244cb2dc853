"""`fwdasv publish`: `asv publish` with fwdasv's findings in the site, readable offline
(`fwdasv.analysis.publish.publish`)."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.analysis.commands.common import analysis_command, count_unreadable
from fwdasv.analysis.findings.dark import dark_line
from fwdasv.analysis.findings.format import summary_line, unreadable_line
from fwdasv.analysis.publish.publish import publish
from fwdasv.analysis.rules.gate import FINDINGS
from fwdasv.asv.project import AsvProject, site_hint
from fwdasv.core.clitools import config_option, end, skip_unreadable_option


@analysis_command("publish")
@config_option()
@skip_unreadable_option
def publish_command(config: Path, skip_unreadable: bool) -> None:
    """`asv publish`, with fwdasv's findings in the site, working without the internet.

    asv's Regressions page and Atom feed list fwdasv's findings (each series
    judged by its own noise) with their status; a Findings page, linked from
    the navigation bar, adds the noise, the confirmation and the kernel diff.
    asv's page loads its JavaScript libraries from CDNs; fwdasv points it at
    the copies it ships, so the site opens on a closed network too. Series no
    timer measured (graph vs eager under the host timer) are left out. Prints
    where the site is and how to open it. A result file that cannot be read is
    named on stderr and fails the command (2; the site is still written) unless
    --skip-unreadable. Exits 0 when published, 2 on bad input (nothing measured
    yet, html_dir a file).
    """
    project = AsvProject.load(config)
    found = publish(project, echo=click.echo)
    unreadable = count_unreadable(found, skip_unreadable)
    if found.findings:
        click.echo(summary_line(found.findings))
    else:
        where = "readable" if found.unreadable else "stored"
        click.echo(f"no regressions in the {where} results")
    if found.unreadable:
        click.echo(unreadable_line(found.unreadable))
    if found.dark:  # said, not gated: publishing is not a check (regressions, nightly are)
        click.echo(dark_line(found.dark))
    for line in site_hint(project):
        click.echo(line)
    end(FINDINGS.exit_status((), unreadable))
