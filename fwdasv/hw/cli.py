"""`fwdasv hw`: GPU pre-flight checks, clock lock/unlock and asv's machine file.

The commands only parse options and print; fwdasv.hw.nvml does the work. Exit
statuses (`fwdasv.core.errors.EXIT_RULE`): 0 ok, 2 bad input, 4 hardware not ready:
a required pre-flight check failed, no NVIDIA driver or GPU (except `machine`, which
then writes a CPU entry unless --gpus names GPUs), root needed (or NVML refused the
change).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from fwdasv.core.clitools import CliError, F, Group, MachineName, format_option, path_option
from fwdasv.core.errors import EXIT_CHECKS_FAILED
from fwdasv.core.files import check_output_path
from fwdasv.hw import checks, statefile
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import setup as hw_setup
from fwdasv.hw.errors import HardwareError
from fwdasv.hw.nvml import parse_gpu_selection

STATE_DEFAULT = f"${statefile.STATE_FILE_ENV} or {statefile.DEFAULT_STATE_FILE}"


class GpuSelection(click.ParamType):
    """`--gpus`: NVML indices or UUIDs, comma-separated, or 'all'; the command gets the
    items (`parse_gpu_selection`), None for every GPU. A bad item is refused as the option
    is read, in parse_gpu_selection's words."""

    name = "gpus"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...] | None:
        if value is None or isinstance(value, tuple):
            return value
        try:
            return parse_gpu_selection(str(value))
        except HardwareError as error:
            raise click.UsageError(str(error), ctx) from None


def _gpus_option(command: F) -> F:
    return click.option(
        "--gpus",
        type=GpuSelection(),
        default="all",
        show_default=True,
        help="GPUs to use: NVML indices as nvidia-smi numbers them, or UUIDs, comma-separated "
        "(e.g. 0,1), or 'all'.",
    )(command)


def state_file_option(command: F) -> F:
    """`--state-file` (hw setup, reset, check, machine; nightly): where setup saves the GPUs'
    state that reset restores."""
    return path_option(
        "--state-file",
        show_default=STATE_DEFAULT,
        help="Where setup saves the GPUs' previous state and reset reads it.",
    )(command)


def machine_file_option(command: F) -> F:
    """`--machine-file` (hw machine, nightly): asv's machine file the entry is merged into."""
    return path_option(
        "--machine-file",
        show_default=hw_machine.DEFAULT_MACHINE_FILE,
        help="asv's machine file to merge the entry into (other machines are kept).",
    )(command)


def lock_clocks_option(help: str) -> Callable[[F], F]:
    """`--lock-clocks MHz|base|default` (hw setup, nightly): SM clocks to lock
    (`fwdasv.hw.setup`); unset, not locked."""
    return click.option("--lock-clocks", metavar="MHz|base|default", default=None, help=help)


def _clock_policy_option(choices: tuple[str, ...], default: str, help: str) -> Callable[[F], F]:
    return click.option(
        "--clock-policy",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help=help,
    )


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
def hw() -> None:
    """GPU hygiene: pre-flight checks, clock lock/unlock, asv's machine file.

    Exit statuses: 0 ok, 2 bad input, 4 hardware not ready: a required check
    failed, no NVIDIA driver/GPU (machine: a CPU entry instead, unless --gpus names
    GPUs), root needed.
    """


@hw.command()
@_gpus_option
@_clock_policy_option(
    checks.CLOCK_POLICIES,
    "any",
    "What the clocks must be: 'locked' (by fwdasv hw setup in this boot), 'default' "
    "(not locked, default applications clocks) or 'any' (only reported).",
)
@format_option(
    ("table", "json"),
    "Output: a table for people, or JSON (inventory and checks) to record with results.",
)
@click.option(
    "--allow-pid",
    type=click.IntRange(min=1),
    multiple=True,
    help="A compute process allowed on the GPUs (e.g. the benchmark itself); repeatable. "
    "[default: none]",
)
@state_file_option
def check(
    gpus: tuple[str, ...] | None,
    clock_policy: str,
    fmt: str,
    allow_pid: tuple[int, ...],
    state_file: Path | None,
) -> None:
    """Read-only pre-flight checks; exit 4 when a required one fails."""
    report = checks.preflight_snapshot(gpus, clock_policy, allow_pid, state_file)
    if fmt == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(_table(report))
    if not report["ok"]:
        failed = [
            f"{c['name']} on GPU {c['gpu']}" for c in report["checks"] if c["status"] == "FAIL"
        ]
        raise CliError(
            f"pre-flight failed: {', '.join(failed)} (details above)", EXIT_CHECKS_FAILED
        )


def _table(report: dict[str, Any]) -> str:
    inventory = report["inventory"]
    lines = [
        f"driver {inventory['driver_version'] or '?'}, CUDA {inventory['cuda_driver_version'] or '?'}"
    ]
    for gpu in inventory["gpus"]:
        events = gpu["clock_event_reasons"]
        lines.append(
            f"GPU {gpu['index']}  {gpu['name'] or '?'}  {gpu['uuid'] or '?'}  "
            f"SM {_v(gpu['sm_clock_mhz'])}/{_v(gpu['sm_clock_max_mhz'])} MHz  "
            f"mem {_v(gpu['memory_clock_mhz'])}/{_v(gpu['memory_clock_max_mhz'])} MHz  "
            f"{_v(gpu['memory_used_mib'])}/{_v(gpu['memory_total_mib'])} MiB  "
            f"{_v(gpu['temperature_c'])} C  "
            f"{_v(gpu['power_draw_w'])}/{_v(gpu['power_limit_w'])} W  "
            f"events {','.join(events) if events is not None else '?'}"
        )
    checks = report["checks"]
    width = max([len(c["name"]) for c in checks] + [5])
    lines.append("")
    lines.append(f"{'check':<{width}}  gpu  status  detail")
    for c in checks:
        lines.append(f"{c['name']:<{width}}  {c['gpu']:>3}  {c['status']:<6}  {c['detail']}")
    failed = [c for c in checks if c["status"] == "FAIL"]
    warned = [c for c in checks if c["status"] == "warn"]
    verdict = "FAILED" if failed else "ok"
    lines.append(
        f"pre-flight {verdict}: {len(failed)} required check(s) failed, {len(warned)} warning(s)"
    )
    return "\n".join(lines)


def _v(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@hw.command()
@_gpus_option
@lock_clocks_option(
    "Lock the SM clocks: a frequency in MHz, 'base' (the clock the GPU sustains at TDP, "
    "as nvidia-smi -lgc tdp) or 'default' (the default applications clock). "
    "[default: not locked]"
)
@click.option(
    "--lock-memory-clocks",
    metavar="MHz|max",
    default=None,
    help="Lock the memory clocks too: a frequency in MHz or 'max'. [default: not locked]",
)
@click.option(
    "--persistence/--no-persistence",
    default=False,
    show_default=True,
    help="Turn persistence mode on (reset turns it back off if it was off); "
    "--no-persistence leaves it as it is.",
)
@state_file_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print every change and make none: no NVML setter is called, no file is written.",
)
def setup(
    gpus: tuple[str, ...] | None,
    lock_clocks: str | None,
    lock_memory_clocks: str | None,
    persistence: bool,
    state_file: Path | None,
    dry_run: bool,
) -> None:
    """Save the GPUs' state, then lock clocks / enable persistence (root; undo with reset)."""
    hw_setup.setup(
        gpus=gpus,
        lock_clocks=lock_clocks,
        lock_memory_clocks=lock_memory_clocks,
        persistence=persistence,
        state_file=state_file,
        dry_run=dry_run,
        echo=click.echo,
    )


@hw.command()
@state_file_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print every change and make none: no NVML setter is called, the state file stays.",
)
def reset(state_file: Path | None, dry_run: bool) -> None:
    """Restore exactly the state setup saved, then delete the state file (root)."""
    hw_setup.reset(state_file, dry_run=dry_run, echo=click.echo)


@hw.command()
@click.option(
    "--name",
    default=None,
    type=MachineName(),
    help="asv machine name. [default: <host>-<count>x<model>-<digest of the GPU UUIDs>; "
    "without GPUs <host>-cpu-<digest of this Python environment and its torch>]",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Rewrite an entry of this name even when it was written for another environment "
    "(another host or torch); refused otherwise.",
)
@machine_file_option
@_clock_policy_option(
    ("auto", *checks.CLOCK_POLICIES),
    "auto",
    "Clock policy recorded with the results; 'auto' is 'locked-<how>' when fwdasv hw setup "
    "locked every selected GPU in this boot, else 'default'.",
)
@_gpus_option
@state_file_option
def machine(
    name: str | None,
    replace: bool,
    machine_file: Path | None,
    clock_policy: str,
    gpus: tuple[str, ...] | None,
    state_file: Path | None,
) -> None:
    """Write this machine into asv's machine file: GPU model, UUIDs, driver, CUDA, clock policy;
    on a box without NVIDIA GPUs, a CPU entry (host, CPU model, cores, RAM, OS, torch)."""
    # Before NVML is asked anything: a path that cannot be written is one line, at once.
    check_output_path(hw_machine.machine_file_path(machine_file), what="--machine-file")
    recorded = hw_machine.record_machine(
        gpus=gpus,
        name=name,
        machine_file=machine_file,
        clock_policy=clock_policy,
        state_file=state_file,
        replace=replace,
    )
    entry = recorded.entry
    if recorded.no_gpu is not None:
        click.echo(
            f"no NVIDIA GPU found ({recorded.no_gpu}): a CPU machine entry, for the host timer",
            err=True,
        )
    click.echo(json.dumps(entry, indent=4, sort_keys=True))
    click.echo(
        f"wrote machine '{entry['machine']}' to {recorded.path} (asv run --machine {entry['machine']})",
        err=True,
    )
