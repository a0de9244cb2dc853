"""`python -m fwdasv.asv.locked_machine ARGS`: asv's command line, its machine file locked.

asv rewrites ~/.asv-machine.json each time a run loads its machine (truncating it, then
writing), so two runs started together (`fwdasv shard`, one per GPU) can read it
half-written and stop at "Error parsing JSON". Here asv's load-and-save of its machine
holds an exclusive lock on the file's `.lock` neighbour; a run waits for the other's write.
asv has no option naming its machine file: with MACHINE_FILE_ENV set, it reads that one
(`fwdasv nightly --machine-file F`).
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from asv.machine import Machine, MachineCollection
from asv.main import main as asv_main

from fwdasv.hw.machine import machine_file_path

MODULE = "fwdasv.asv.locked_machine"  # what `python -m` runs in asv's place
MACHINE_FILE_ENV = "FWDASV_ASV_MACHINE_FILE"  # the machine file asv reads, when set


@contextmanager
def machine_file_locked(path: str | Path | None = None) -> Iterator[None]:
    """Hold the exclusive lock of asv's machine file (`path`, or ~/.asv-machine.json)."""
    with open(f"{machine_file_path(path)}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_machine_loads() -> None:
    """Make every `asv.machine.Machine.load` of this process hold the lock (of the file
    MACHINE_FILE_ENV names, when set: asv reads that one)."""
    named = os.environ.get(MACHINE_FILE_ENV)
    if named:
        MachineCollection.get_machine_file_path = staticmethod(lambda: named)

    load = Machine.load.__func__
    if getattr(load, "fwdasv_locked", False):
        return

    def locked(cls: type, *args: Any, **kwargs: Any) -> Any:
        with machine_file_locked(kwargs.get("_path") or MachineCollection.get_machine_file_path()):
            return load(cls, *args, **kwargs)

    locked.fwdasv_locked = True  # type: ignore[attr-defined]
    Machine.load = classmethod(locked)


def main() -> None:
    lock_machine_loads()
    sys.argv[0] = "asv"
    asv_main()


if __name__ == "__main__":
    main()
