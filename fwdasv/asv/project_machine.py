"""The project's machine: the one name its series are measured under, recorded by `fwdasv init`.

asv stores results per machine name, so a name derived afresh each night (another
environment's digest, a demo's name against the box's) starts a new, empty series.
`init` records the name and what identifies the box (`IDENTITY_KEYS` of its asv entry:
the GPU UUIDs, or the host and torch of a CPU box) in asv.conf.json's `"fwdasv"` block:

    "machine": {"name": "fwdasv-demo", "host": "vm-1", "torch": "2.5.1"}

`choose_machine` is what nightly, confirm, bisect, explain and demo take by default: the
recorded name when this box is that machine, else one line naming both (`MachineMismatch`)
unless `--machine NAME` said which name to measure under. A project without a record
keeps each command's older default (None here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fwdasv.core.errors import UserError
from fwdasv.hw.machine import this_machine

if TYPE_CHECKING:
    from fwdasv.asv.project import AsvProject

MACHINE_KEY = "machine"  # in the "fwdasv" block
# What tells one box from another in an asv entry (`fwdasv.hw.machine`): the GPUs' UUIDs;
# on a CPU box, the host and the torch that times the kernels.
IDENTITY_KEYS = ("gpu_uuids", "host", "torch")


class MachineMismatch(UserError):
    """This box is not the project's recorded machine, and no --machine said what to do."""


@dataclass(frozen=True)
class ProjectMachine:
    """The project's machine: its asv name and the identity keys of its entry."""

    name: str
    identity: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        assert self.name, "a machine needs a name"

    @classmethod
    def of(cls, entry: Mapping[str, str]) -> ProjectMachine:
        """From an asv machine entry (`fwdasv.hw.machine.this_machine`)."""
        return cls(
            str(entry["machine"]),
            tuple((k, str(entry[k])) for k in IDENTITY_KEYS if entry.get(k)),
        )

    @classmethod
    def from_json(cls, raw: object, where: str) -> ProjectMachine:
        """The block's `machine` value; UserError naming `where` when malformed."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise UserError(
                f'{where}.{MACHINE_KEY} must be an object with a "name" (as `fwdasv init` '
                f"writes it), not {raw!r}"
            )
        return cls(raw["name"], tuple((k, str(raw[k])) for k in IDENTITY_KEYS if raw.get(k)))

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, **dict(self.identity)}

    def differs(self, entry: Mapping[str, str]) -> str | None:
        """How `entry` (this box) is another machine than this one; None when it is this one."""
        for key, value in self.identity:
            here = str(entry.get(key, ""))
            if _normal(key, here) != _normal(key, value):
                return f"{key} {here or 'none'}, the project's {value}"
        return None


def _normal(key: str, value: str) -> str:
    """GPU UUIDs compare as a set (the order NVML lists them in is not the machine)."""
    return ",".join(sorted(value.split(","))) if key == "gpu_uuids" else value


def recorded_machine(
    raw: Mapping[str, object], where: str = "asv.conf.json"
) -> ProjectMachine | None:
    """The machine a parsed asv.conf.json (`raw`) records; None when it records none."""
    block = raw.get("fwdasv")
    if not isinstance(block, Mapping) or MACHINE_KEY not in block:
        return None
    return ProjectMachine.from_json(block[MACHINE_KEY], f"{where}: 'fwdasv'")


def choose_machine(
    raw: Mapping[str, object],
    asked: str | None,
    this_box: Callable[[], Mapping[str, str]],
    where: str = "asv.conf.json",
) -> str | None:
    """The machine name to measure under: `asked` (told); else the recorded one when
    `this_box()` (this box's asv entry) is that machine; else MachineMismatch.
    None: nothing asked, nothing recorded (the caller's older default)."""
    if asked:
        return asked
    recorded = recorded_machine(raw, where)
    if recorded is None:
        return None
    here = this_box()
    why = recorded.differs(here)
    if why is not None:
        raise MachineMismatch(
            f"this box is machine {here['machine']!r} ({why}), not the project's machine "
            f"{recorded.name!r} recorded in {where}: pass --machine {here['machine']} to "
            f"measure here as a machine (a series) of its own, or --machine {recorded.name} "
            "if it is that machine, changed"
        )
    return recorded.name


def project_machine(
    project: AsvProject, asked: str | None, gpus: Sequence[str] | None = None
) -> str | None:
    """`choose_machine` for a project, this box read as `fwdasv hw machine` reads it."""
    return choose_machine(
        project.raw, asked, lambda: this_machine(None, gpus), str(project.config_path)
    )
