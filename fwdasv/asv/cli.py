"""`fwdasv init`: an asv project that tracks the forward latency of your own PyTorch repository."""

from __future__ import annotations

from pathlib import Path

import click

from fwdasv.asv.project import AsvProject
from fwdasv.asv.project_machine import ProjectMachine, recorded_machine
from fwdasv.asv.scaffold import (
    DEFAULT_THRESHOLD,
    Initialized,
    init_project,
    init_vllm_project,
)
from fwdasv.asv.suitespec import DEFAULT_CASES, InitError, SuiteSpec, paced_by_default
from fwdasv.core.clitools import CONTEXT, Command, command_here, path_option
from fwdasv.core.errors import UserError
from fwdasv.core.files import check_project_dir
from fwdasv.hw.machine import this_machine


def _this_machine(name: str | None) -> ProjectMachine | None:
    """This box, under `name` or as `fwdasv hw machine` names it (its GPUs, or its CPU);
    None if unreadable."""
    try:
        return ProjectMachine.of(this_machine(name))
    except UserError:
        return None


@click.command("init", cls=Command, context_settings=CONTEXT)
@path_option(
    "--repo",
    required=True,
    kind="dir",
    help="The git clone of the model to track (asv installs it at each commit: pip for a "
    "package, its checkout on the import path for a repository without setup.py or "
    "pyproject.toml).",
)
@click.option(
    "--target",
    default=None,
    metavar="PKG.MODULE:CALLABLE",
    help="The factory fwdasv's engine times, in that repository or in --target-path (see "
    "fwdasv/targets/base.py); not with --vllm.",
)
@path_option(
    "--target-path",
    kind="dir",
    metavar="DIR",
    help="A directory outside the repository that holds the target's module (a bench file "
    "old commits lack): on the import path of every bench, at every commit.",
)
@click.option(
    "--import-path",
    "import_paths",
    multiple=True,
    metavar="PATH",
    help="A directory of the repository put on the import path at each commit, repeatable "
    "(installs the checkout instead of pip). [default: the root, when the repository has "
    "no setup.py or pyproject.toml]",
)
@click.option(
    "--vllm",
    is_flag=True,
    help="--repo is a vLLM clone: measure its commits with fwdasv's vLLM suites, each commit's "
    "Python over the compiled --base (no build, no index).",
)
@path_option(
    "--base",
    kind="any",
    exists=True,
    help="With --vllm: a vLLM wheel, or a directory holding an installed vllm/ with its compiled "
    "extensions (a site-packages, the offline bundle's tree).",
)
@click.option(
    "--base-commit",
    default=None,
    metavar="REV",
    help="With --vllm: the commit the base was built from, when the base records none "
    "[default: its recorded commit, else the tag v<version>]",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="NAME=REQS",
    help=f"A batch to time, repeatable (grammar: `fwdasv forward --help`). "
    f"[default: {' '.join(DEFAULT_CASES)}]",
)
@path_option(
    "--dir",
    "directory",
    kind="dir",
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
    "--machine",
    default=None,
    metavar="NAME",
    help="The project's machine: the asv name its results are stored under, recorded with "
    "what identifies this box (its GPU UUIDs, or its host and torch); nightly, confirm, "
    "bisect, explain and check measure under it and refuse another box unless given "
    "--machine. [default: the name `fwdasv hw machine` gives this box]",
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
@click.option(
    "--canary/--no-canary",
    default=True,
    show_default=True,
    help="Also time fwdasv's tiny decoder (suite CanaryDecoder, no code of yours) at each "
    "commit: a step there is the machine (load, torch, a driver), and findings that step "
    "with it are `drift`, not regressions.",
)
@click.option(
    "--reference/--no-reference",
    default=None,
    help="Pace the suite: time the forward on the CPU (host timer) with fwdasv's fixed "
    "workload right after each replay, in the same process, and record the series "
    "track_relative, the forward's time over the workload's: a shared box's own changes of "
    "speed cancel. `fwdasv regressions` judges it in place of the latency (bisect it: "
    "`fwdasv bisect GOOD..BAD SUITE.track_relative`). [default: paced on a machine without "
    "an NVIDIA GPU, where the suite times on the CPU; --no-reference records latency alone]",
)
def init_command(
    repo: Path,
    target: str | None,
    target_path: Path | None,
    import_paths: tuple[str, ...],
    vllm: bool,
    base: Path | None,
    base_commit: str | None,
    cases: tuple[str, ...],
    directory: Path,
    branch: str | None,
    project: str | None,
    machine: str | None,
    force: bool,
    no_check: bool,
    canary: bool,
    reference: bool | None,
) -> None:
    """Write an asv project that times a PyTorch repository's forward at each commit.

    Writes asv.conf.json (per-commit environments linked to this Python, which
    install only your package, without a package index; the regression
    thresholds) and benchmarks/forward.py (one suite timing --target on each
    --case). First checks, on the repository's HEAD, that the target imports,
    builds and prepares every case. A repository without setup.py or
    pyproject.toml is installed per commit by putting its checkout on the
    import path (--import-path picks directories of it); a target kept outside
    the repository is imported from --target-path in every bench. Refuses to
    replace an existing project unless --force.
    """
    check_project_dir(directory)  # before the HEAD check: a bad --dir costs nothing
    if vllm:
        base = _vllm_base(target, target_path, import_paths, cases, reference, base)
        written, commit = init_vllm_project(
            directory,
            repo,
            base,
            base_commit=base_commit,
            project=project,
            branch=branch,
            force=force,
            machine=_this_machine(machine),
        )
        _said_vllm(written, base, commit)
        return
    if target is None:
        raise InitError("--target PKG.MODULE:CALLABLE is needed (or --vllm for a vLLM clone)")
    if base is not None or base_commit is not None:
        raise InitError("--base and --base-commit go with --vllm (a vLLM clone)")
    if reference is None:
        reference = paced_by_default()
    suite = SuiteSpec(
        target,
        tuple(cases) or DEFAULT_CASES,
        target_path=(str(target_path),) if target_path is not None else (),
        device="cpu" if reference else "auto",
        reference=reference,
    )
    done = init_project(
        directory,
        repo,
        suite,
        project=project,
        branch=branch,
        regression_threshold=DEFAULT_THRESHOLD,
        force=force,
        check=not no_check,
        canary=canary,
        echo=lambda line: click.echo(line, err=True),
        import_paths=import_paths or None,
        machine=_this_machine(machine),
    )
    _said_init(done, canary)


def _vllm_base(
    target: str | None,
    target_path: Path | None,
    import_paths: tuple[str, ...],
    cases: tuple[str, ...],
    reference: bool | None,
    base: Path | None,
) -> Path:
    """--base, once what does not go with --vllm is refused."""
    if target_path is not None or import_paths:
        raise InitError("--target-path and --import-path do not go with --vllm")
    if reference:
        raise InitError("--reference is for PyTorch models timed on the CPU, not --vllm")
    if target is not None or cases:
        raise InitError("--vllm writes fwdasv's vLLM suites: drop --target and --case")
    if base is None:
        raise InitError(
            "--vllm needs --base PATH: a vLLM wheel or a directory holding an installed "
            "vllm/ with its compiled extensions"
        )
    return base


def _said_init(done: Initialized, canary: bool) -> None:
    """What `init` checked and wrote, and what to run next."""
    suite = done.suite
    config = done.project.config_path
    if done.checked:
        click.echo(f"checked at {done.repo.head[:8]}: {done.checked}")
    verb = "replaced" if done.replaced else "wrote"
    click.echo(
        f"{verb} {config}: asv project {done.project.raw['project']!r}, branch "
        f"{done.project.branches[0]}, environments linked to this Python (no package index)"
    )
    click.echo(f"install per commit: {done.install}")
    click.echo(
        f"{verb} {done.project.benchmark_dir / 'forward.py'}: suite {suite.name}, "
        f"{len(suite.cases)} case(s): {', '.join(c.split('=')[0] for c in suite.cases)}"
        + ("; and the environment canary CanaryDecoder" if canary else "")
    )
    if suite.reference:
        click.echo(
            "paced: the forward on the CPU with fwdasv's fixed workload beside each replay; "
            "track_relative (the forward over the workload) is what the verdicts judge "
            "(--no-reference: latency alone)"
        )
    if suite.target_path:
        click.echo(f"target imported from {', '.join(suite.target_path)} (every bench)")
    _next_steps(
        config.parent,
        "this box (its GPUs, or its CPU) for asv",
        ("", "every commit of the branch (add --steps 20 on a long history)"),
        [("publish", "the site, in html/")],
    )


def _next_steps(
    project_dir: Path, machine_why: str, run: tuple[str, str], more: list[tuple[str, str]]
) -> None:
    """Print the commands to run next, after a `cd` into `project_dir` unless already there:
    name the machine (`machine_why`), `asv run` every commit (`run`: its extra arguments and
    why), the fwdasv commands of `more` (a command and its arguments, with why), and the
    regressions. The machine is the one recorded in the project."""
    recorded = recorded_machine(AsvProject.load(project_dir / "asv.conf.json").raw)
    machine = recorded.name if recorded is not None else "NAME"
    run_args, run_why = run
    here = Path.cwd().resolve()
    # As this shell runs them, from the project's directory (`cd` first below).
    fwdasv, asv = (command_here(name, relative=project_dir == here) for name in ("fwdasv", "asv"))
    steps = [
        (f"{fwdasv} hw machine --name {machine}", machine_why),
        (f"{asv} run --record-samples --machine {machine} {run_args}ALL", run_why),
        *((f"{fwdasv} {command}", why) for command, why in more),
        (f"{fwdasv} regressions", "steps beyond each series' own noise; exit 1 on a regression"),
    ]
    if project_dir != here:
        steps = [(f"cd {_shown(project_dir, here)}", ""), *steps]
    if recorded is not None:
        click.echo(
            f"machine {machine}: recorded in asv.conf.json; nightly, confirm, bisect, explain "
            "and check measure under it (another box is refused unless --machine NAME)"
        )
    width = max(len(command) for command, _ in steps)
    click.echo("next:")
    for command, why in steps:
        click.echo(f"  {command:<{width}}  # {why}" if why else f"  {command}")


def _said_vllm(written: AsvProject, base: Path, commit: str) -> None:
    """What `init --vllm` wrote, and what to run next."""
    config = written.config_path
    click.echo(
        f"wrote {config}: asv project {written.raw['project']!r}, branch {written.branches[0]}, "
        f"each commit's vllm/ over the compiled base {base} (built at {commit[:12]}); commits "
        "whose compiled sources differ from it are refused"
    )
    click.echo(
        f"wrote {written.benchmark_dir / 'forward.py'}: Qwen3_0_6B, Qwen3_0_6B_Verify, Llama31_8B"
    )
    click.echo(
        f"wrote {written.benchmark_dir / 'pipeline.py'}: Qwen3_0_6B_PP2, DecoderPP2 (2 GPUs a "
        "process; DecoderPP2 also on a CPU, with gloo)"
    )
    _next_steps(
        config.parent,
        "this box's GPUs for asv",
        ("--bench Qwen3_0_6B ", "every commit of the branch over the base"),
        [],
    )


def _shown(path: Path, here: Path) -> str:
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)


COMMANDS = (init_command,)
