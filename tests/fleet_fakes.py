"""Seams for fleet tests on one CPU box, importable by Ray's workers (tests/ on their path).

`fake_identity`: the GPU a worker holds, as the fake libnvidia-ml (tests/fake_nvml.py)
reports it, one H200 of its own UUID per Ray node (`uuids`: node id -> UUID), read
through fwdasv's real NVML path. `slot_gate`: at most `slots` asv runs at once on the
box, first come first served (a ticket, then an exclusive lock on one of `slots` files),
so three fake nodes start no more than two torch processes at a time and none starves.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from fwdasv.hw.shard import GpuMachine

# The hooks a test names to `fwdasv shard --ray` (FWDASV_FLEET_HOOKS=fleet_fakes:HOOKS).
HOOKS: object = None


def fake_identity(uuids: Mapping[str, str]) -> GpuMachine:
    import ray
    from fake_nvml import FakeGpu, FakeNvml

    from fwdasv.hw.nvml import read_inventory
    from fwdasv.hw.shard import gpu_machines

    node = ray.get_runtime_context().get_node_id()
    FakeNvml([FakeGpu(uuids[node])]).install()
    (gpu,) = gpu_machines(read_inventory(("0",)))
    return gpu


@contextmanager
def slot_gate(folder: str, slots: int) -> Iterator[None]:
    """One of `slots` slots, first come first served; a holder's slot is freed when it
    ends or dies (an flock), so a removed node's run does not keep it."""
    base = Path(folder)
    with open(base / "tickets.lock", "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        issued, served = (int(x) for x in (counter.read().split() or ["0", "0"]))
        mine = issued
        counter.seek(0)
        counter.truncate()
        counter.write(f"{issued + 1} {served}")
        counter.flush()
        fcntl.flock(counter, fcntl.LOCK_UN)
    paths = [base / f"slot-{i}.lock" for i in range(slots)]
    while True:
        with open(base / "tickets.lock", "a+") as counter:
            fcntl.flock(counter, fcntl.LOCK_EX)
            counter.seek(0)
            issued, served = (int(x) for x in counter.read().split())
            if served == mine:  # my turn: take a free slot, if one is
                for path in paths:
                    handle = open(path, "a")  # noqa: SIM115 (held until the run ends)
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        handle.close()
                        continue
                    counter.seek(0)
                    counter.truncate()
                    counter.write(f"{issued} {served + 1}")
                    counter.flush()
                    fcntl.flock(counter, fcntl.LOCK_UN)
                    break
                else:
                    handle = None
            else:
                handle = None
        if handle is not None:
            break
        time.sleep(0.05)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
