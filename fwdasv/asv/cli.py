"""`fwdasv init`: an asv project that tracks the forward latency of your own PyTorch repository."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.asv.scaffold import DEFAULT_CASES, DEFAULT_THRESHOLD, SuiteSpec, init_project
from fwdasv.core.clitools import CONTEXT, Command


def _machine_name() -> str:
    """The name `fwdasv hw machine` gives this box (its GPUs, or its CPU)."""
    from fwdasv.core.errors import UserError
    from fwdasv.hw.machine import this_machine

    try:
        return this_machine()["machine"]
    except UserError:
        return "NAME"


@click.command("init", cls=Command, context_settings=CONTEXT)
@click.option(
    "--repo",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The git clone of the model package to track (asv installs it at each commit).",
)
@click.option(
    "--target",
    required=True,
    metavar="PKG.MODULE:CALLABLE",
    help="The factory fwdasv's engine times, in that repository (see fwdasv/targets/base.py).",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="NAME=REQS",
    help=f"A batch to time, repeatable (grammar: `fwdasv forward --help`). "
    f"[default: {' '.join(DEFAULT_CASES)}]",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Where the asv project goes: asv.conf.json, benchmarks/, and later results/, env/ "
    "and html/.",
)
@click.option(
    "--branch",
    default=None,
    help="The branch whose history asv measures. [default: the repository's current branch]",
)
@click.option(
    "--name",
    "project",
    default=None,
    help="asv's project name. [default: pyproject.toml's name, else the repository's folder]",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing asv.conf.json and benchmarks/forward.py (results are kept).",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Do not import the target at HEAD first (for a package that needs a build).",
)
def init_command(
    repo: Path,
    target: str,
    cases: tuple[str, ...],
    directory: Path,
    branch: str | None,
    project: str | None,
    force: bool,
    no_check: bool,
) -> None:
    """Write an asv project that times a PyTorch repository's forward at each commit.

    Writes asv.conf.json (per-commit environments linked to this Python, which
    install only your package, without a package index; the regression
    thresholds) and benchmarks/forward.py (one suite timing --target on each
    --case). First checks, on the repository's HEAD, that the target imports,
    builds and prepares every case. Refuses to replace an existing project
    unless --force.
    """
    suite = SuiteSpec(target, tuple(cases) or DEFAULT_CASES)
    done = init_project(
        directory,
        repo,
        suite,
        project=project,
        branch=branch,
        regression_threshold=DEFAULT_THRESHOLD,
        force=force,
        check=not no_check,
        echo=lambda line: click.echo(line, err=True),
    )
    config = done.project.config_path
    if done.checked:
        click.echo(f"checked at {done.repo.head[:8]}: {done.checked}")
    verb = "replaced" if done.replaced else "wrote"
    click.echo(
        f"{verb} {config}: asv project {done.project.raw['project']!r}, branch "
        f"{done.project.branches[0]}, environments linked to this Python (no package index)"
    )
    click.echo(
        f"{verb} {done.project.benchmark_dir / 'forward.py'}: suite {suite.name}, "
        f"{len(suite.cases)} case(s): {', '.join(c.split('=')[0] for c in suite.cases)}"
    )
    machine = _machine_name()
    here = Path.cwd().resolve()
    steps = [] if config.parent == here else [(f"cd {_shown(config.parent, here)}", "")]
    steps += [
        (f"fwdasv hw machine --name {machine}", "this box (its GPUs, or its CPU) for asv"),
        (
            f"asv run --record-samples --machine {machine} ALL",
            "every commit of the branch (add --steps 20 on a long history)",
        ),
        ("fwdasv publish", "the site, in html/"),
        ("fwdasv regressions", "steps beyond each series' own noise; exit 1 on a regression"),
    ]
    width = max(len(command) for command, _ in steps)
    click.echo("next:")
    for command, why in steps:
        click.echo(f"  {command:<{width}}  # {why}" if why else f"  {command}")


def _shown(path: Path, here: Path) -> str:
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)


COMMANDS = (init_command,)
