"""Seams for fleet tests on one CPU box, importable by Ray's workers (tests/ on their path).

`fake_identity`: the GPU a worker holds, as the fake libnvidia-ml (tests/fake_nvml.py)
reports it, one H200 of its own UUID per Ray node (`uuids`: node id -> UUID; `names`:
another model on some), read through fwdasv's real NVML path. `slot_gate`: at most `slots` asv runs at once on the
box, first come first served, so three fake nodes start no more than two torch processes
at a time, none starves, and a node killed while it waits or runs blocks no one.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from fwdasv.hw.shard import GpuMachine

# The hooks a test names to `fwdasv shard --ray` (FWDASV_FLEET_HOOKS=fleet_fakes:HOOKS).
HOOKS: object = None


def fake_identity(uuids: Mapping[str, str], names: Mapping[str, str] | None = None) -> GpuMachine:
    import ray
    from fake_nvml import FakeGpu, FakeNvml

    from fwdasv.hw.nvml import read_inventory
    from fwdasv.hw.shard import gpu_machines

    node = ray.get_runtime_context().get_node_id()
    name = (names or {}).get(node)
    FakeNvml([FakeGpu(uuids[node], name=name) if name else FakeGpu(uuids[node])]).install()
    (gpu,) = gpu_machines(read_inventory(("0",)))
    return gpu


def _locked(path: Path) -> IO[str] | None:
    """`path` opened and exclusively locked, or None when another process holds it."""
    handle = open(path, "a+")  # noqa: SIM115 (the caller keeps it while it holds the lock)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


@contextmanager
def slot_gate(folder: str, slots: int) -> Iterator[None]:
    """One of `slots` slots, first come first served. Each waiter holds a lock on its
    ticket's file and each runner on its slot's: a process that dies (a removed node's
    worker) frees its slot, and its ticket is skipped, so no one waits on it."""
    base = Path(folder)
    counter_path = base / "tickets"

    @contextmanager
    def counter() -> Iterator[list[int]]:
        with open(base / "tickets.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            text = counter_path.read_text() if counter_path.exists() else "0 0"
            state = [int(x) for x in text.split()]  # issued, served
            yield state
            # Atomically: a worker killed while writing (its node removed) leaves the old.
            fresh = base / f"tickets.{os.getpid()}"
            fresh.write_text(f"{state[0]} {state[1]}")
            os.replace(fresh, counter_path)

    with counter() as state:
        mine = state[0]
        state[0] += 1
        ticket = _locked(base / f"ticket-{mine}.lock")
    assert ticket is not None
    slot = None
    while slot is None:
        with counter() as state:
            served = state[1]
            if served == mine:
                for i in range(slots):
                    slot = _locked(base / f"slot-{i}.lock")
                    if slot is not None:
                        state[1] += 1
                        break
            elif served < mine:
                # The ticket being served: its holder gone (its lock free) is skipped.
                probe = _locked(base / f"ticket-{served}.lock")
                if probe is not None:
                    probe.close()
                    state[1] += 1
        if slot is None:
            time.sleep(0.05)
    ticket.close()
    try:
        yield
    finally:
        fcntl.flock(slot, fcntl.LOCK_UN)
        slot.close()
