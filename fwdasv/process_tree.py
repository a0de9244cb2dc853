"""Every process a child started, and how to end them all: the process-tree kill.

torchrun starts each worker in a session of its own and a worker that outlives torchrun
is reparented, so killing the child's process group does not reach the ranks.
`ProcessTree` samples the child's descendants from /proc (Linux) while it runs and keeps
every one it saw, by pid and start time, so a reused pid is never signalled; `kill_tree`
sends SIGTERM to each and its group, waits the grace period, then SIGKILL.

A child in a session of its own is also out of reach of a signal sent to the caller's
group: `timeout` ending `fwdasv check`, a CI job cancelled, a scheduler stopping a run.
`ended_by_signal` ends the tree on such a SIGTERM (or SIGHUP) before the caller exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType


@dataclass(frozen=True)
class _Proc:
    ppid: int
    state: str
    # Clock ticks after boot: tells a process from a later one with its pid.
    start: int


def _proc_table() -> dict[int, _Proc]:
    table: dict[int, _Proc] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return table
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry.name)] = _Proc(int(fields[1]), fields[0], int(fields[19]))
    return table


class ProcessTree:
    """The descendants of a child, remembered as they appear.

    torchrun starts each worker in a new session and a worker that outlives
    torchrun is reparented, so the tree is sampled while the child runs and
    every process ever seen in it stays known (by pid and start time, so a
    reused pid is never signalled).
    """

    def __init__(self, root: int):
        self.root = root
        self.known: dict[int, int] = {}

    def refresh(self, from_root: bool = True) -> None:
        """Add the descendants running now; `from_root` only while the child is unreaped."""
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, info in table.items():
            children.setdefault(info.ppid, []).append(pid)
        queue = [
            pid for pid, start in self.known.items() if pid in table and table[pid].start == start
        ]
        if from_root:
            queue.append(self.root)
        while queue:
            for pid in children.get(queue.pop(), []):
                if pid not in self.known:
                    self.known[pid] = table[pid].start
                    queue.append(pid)

    def alive(self) -> list[int]:
        """Known descendants still running (a zombie has finished)."""
        table = _proc_table()
        return [
            pid
            for pid, start in self.known.items()
            if pid in table and table[pid].start == start and table[pid].state not in "ZX"
        ]

    def signal(self, sig: signal.Signals, root_group: bool) -> None:
        """Signal each live descendant and its process group (torchrun makes one per worker).

        `root_group` also signals the child's own group: only while the child
        is unreaped, so that its pid (the group id) cannot have been reused.
        """
        targets = self.alive()
        if root_group:
            targets.insert(0, self.root)
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


# After SIGKILL, how long to wait for the descendants to be gone: a process ends only when
# the kernel next runs it, which on a loaded box (a nice-19 test lane) can take a moment.
KILLED_WAIT_S = 5.0


def kill_tree(child: subprocess.Popen[bytes], tree: ProcessTree, grace_s: float) -> None:
    """SIGTERM the child's group and every descendant, wait `grace_s`, SIGKILL what is left,
    and return once they are gone (up to KILLED_WAIT_S): what follows (hw setup's undo
    guard resetting the GPUs) comes after the bench, not beside it."""
    unreaped = child.returncode is None
    tree.refresh(from_root=unreaped)
    tree.signal(signal.SIGTERM, root_group=unreaped)
    _wait_gone(child, tree, grace_s, child_too=unreaped)
    tree.refresh(from_root=child.returncode is None)
    tree.signal(signal.SIGKILL, root_group=unreaped and child.returncode is None)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=KILLED_WAIT_S)
    _wait_gone(child, tree, KILLED_WAIT_S, child_too=False)


def _wait_gone(
    child: subprocess.Popen[bytes], tree: ProcessTree, seconds: float, *, child_too: bool
) -> None:
    """Poll until every known descendant is gone (and, `child_too`, the child has exited and
    is reaped), for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (not child_too or child.poll() is not None) and not tree.alive():
            return
        time.sleep(0.05)


# Signals whose default action ends the process without running any cleanup.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# What `signal.signal` takes and returns: a handler, SIG_DFL or SIG_IGN, or None (one
# not installed from Python).
Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class EndedBySignal(SystemExit):
    """SIGTERM or SIGHUP while fwdasv waited on children of its own: raised once they are
    ended; exits 128 + the signal's number, as the shell reports a process it ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


@contextlib.contextmanager
def ended_by_signal(cleanup: Callable[[], object]) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP first run `cleanup` (end the children this
    process started in sessions of their own, which a signal to its group does not reach),
    then act as before: the handler they replaced runs (hw setup's undo guard), or, where
    they ended the process at once, `EndedBySignal` is raised, so that the caller's
    `finally` blocks run too. A second signal acts as before at once. Only in the main
    thread (where Python runs signal handlers); an ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced: dict[int, Handler] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        for number, previous in replaced.items():
            signal.signal(number, previous)
        cleanup()
        previous = replaced[signum]
        if callable(previous):
            previous(signum, frame)
            return
        raise EndedBySignal(signum)

    for ending in ENDING_SIGNALS:
        handler = signal.getsignal(ending)
        if handler is not signal.SIG_IGN and handler is not None:
            replaced[ending] = signal.signal(ending, on_signal)
    try:
        yield
    finally:
        for number, previous in replaced.items():
            if signal.getsignal(number) is on_signal:
                signal.signal(number, previous)
