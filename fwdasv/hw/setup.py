"""Setup and reset: changes saved before they are made and undone by `reset`, also when the
process is interrupted (atexit and SIGTERM/SIGINT handlers)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pynvml

from fwdasv.core.files import write_atomic
from fwdasv.hw.clocks import (
    Change,
    applier_for,
    check_lock_values,
    plan_reset,
    plan_setup,
    require_root,
)
from fwdasv.hw.errors import HardwareError
from fwdasv.hw.nvml import GpuInfo, nvml, read_gpu, read_inventory_in_session
from fwdasv.hw.statefile import HwState, boot_id, load_state, now_iso, resolve_state_file

# --------------------------------------------------------------------------- undo on interruption


class UndoGuard:
    """Runs `undo` once: when the block ends, at interpreter exit, or on SIGTERM/SIGINT.

    After undoing on a signal it hands the signal to the handler it replaced (so a
    SIGTERM still terminates and a SIGINT still raises KeyboardInterrupt).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, undo: Callable[[], object]) -> None:
        self._undo = undo
        self._done = False
        # Reentrant: a signal may arrive while the main thread is already undoing.
        self._lock = threading.RLock()
        self._previous: dict[int, Any] = {}

    def install(self) -> UndoGuard:
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def uninstall(self) -> None:
        atexit.unregister(self._at_exit)
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def run(self) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                self._undo()

    def __enter__(self) -> UndoGuard:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        try:
            self.run()
        finally:
            self.uninstall()

    def _run_quietly(self, when: str) -> None:
        try:
            self.run()
        except Exception as error:
            print(f"fwdasv: undoing the GPU setup {when} failed: {error}", file=sys.stderr)

    def _at_exit(self) -> None:
        self._run_quietly("at exit")

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self._done and pynvml.libLoadLock.locked():
            # The main thread may be inside pynvml, holding its non-reentrant lock: undoing
            # here would deadlock. Undo from a thread once the lock is free, then signal again.
            threading.Thread(target=self._undo_then_signal, args=(signum,), daemon=True).start()
            return
        self._run_quietly("on signal")
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.uninstall()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _undo_then_signal(self, signum: int) -> None:
        self._run_quietly("on signal")
        os.kill(os.getpid(), signum)


# --------------------------------------------------------------------------- setup / reset


def _setup(
    gpus: Sequence[str] | None,
    lock_clocks: str | None,
    lock_memory_clocks: str | None,
    persistence: bool,
    state_file: str | os.PathLike[str] | None,
    dry_run: bool,
    echo: Callable[[str], None],
) -> tuple[HwState | None, UndoGuard | None]:
    if not (lock_clocks or lock_memory_clocks or persistence):
        raise HardwareError(
            "nothing to set up: give --lock-clocks MHz|base|default, --lock-memory-clocks "
            "and/or --persistence"
        )
    check_lock_values(lock_clocks, lock_memory_clocks)
    path = resolve_state_file(state_file)
    if not dry_run:
        require_root("fwdasv hw setup")
    with nvml():
        if path.exists():
            raise HardwareError(
                f"the GPUs are already set up (saved state {path}); run 'fwdasv hw reset' first, "
                "so the state saved before the first setup is not lost"
            )
        inventory = read_inventory_in_session(gpus, None)
        saved, changes = plan_setup(inventory.gpus, lock_clocks, lock_memory_clocks, persistence)
        state = HwState(now_iso(), platform.node(), os.getpid(), boot_id(), tuple(saved))
        applier = applier_for(dry_run, echo)
        if not changes:
            echo("nothing to change: the GPUs are already as asked")
            return None, None
        if dry_run:
            echo(f"would save the current GPU state to {path}")
            for change in changes:
                applier.apply(change)
            echo("dry run: nothing was changed")
            return state, None
        write_atomic(path, json.dumps(state.to_json(), indent=2) + "\n")
        echo(f"saved the current GPU state to {path}")
        guard = UndoGuard(lambda: reset(path, missing_ok=True, echo=echo)).install()
        made = 0
        try:
            for change in changes:
                applier.apply(change)
                made += 1
        except BaseException as error:
            try:
                if made:
                    guard.run()
                else:  # nothing changed (typically NVML refused the first setter)
                    path.unlink(missing_ok=True)
            except Exception as undo_error:
                failed = HardwareError(
                    f"{error}; undoing the partial setup also failed ({undo_error}): "
                    f"run 'fwdasv hw reset --state-file {path}'"
                )
                failed.exit_code = getattr(error, "exit_code", HardwareError.exit_code)
                raise failed from error
            finally:
                guard.uninstall()
            raise
        return state, guard


def setup(
    gpus: Sequence[str] | None = None,
    lock_clocks: str | None = None,
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
    state_file: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> HwState | None:
    """Save the GPUs' state, then lock clocks / enable persistence; `reset` undoes it.

    The changes outlive the call (the operator resets later); an interruption while
    they are being made undoes them. Returns the saved state (None when nothing changes).
    """
    state, guard = _setup(
        gpus, lock_clocks, lock_memory_clocks, persistence, state_file, dry_run, echo
    )
    if guard is not None:
        guard.uninstall()
    return state


@contextlib.contextmanager
def locked_clocks(
    gpus: Sequence[str] | None = None,
    lock_clocks: str = "base",
    lock_memory_clocks: str | None = None,
    persistence: bool = False,
    state_file: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] = print,
) -> Iterator[HwState | None]:
    """Set up for the block and reset after it, also on an exception, exit or SIGTERM/SIGINT."""
    state, guard = _setup(
        gpus, lock_clocks, lock_memory_clocks, persistence, state_file, False, echo
    )
    try:
        yield state
    finally:
        if guard is not None:
            try:
                guard.run()
            finally:
                guard.uninstall()


def reset(
    state_file: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    missing_ok: bool = False,
    echo: Callable[[str], None] = print,
) -> list[Change]:
    """Restore exactly the state `setup` saved, then delete the state file."""
    path = resolve_state_file(state_file)
    if not path.exists():
        if missing_ok:
            return []
        raise HardwareError(
            f"no saved GPU state at {path}: nothing to reset (setup was not run with this "
            "--state-file, or reset already ran)"
        )
    if not dry_run:
        require_root("fwdasv hw reset")
    saved = load_state(path).gpus
    with nvml():
        current: dict[str, GpuInfo] = {}
        for entry in saved:
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(entry.uuid)
            except pynvml.NVMLError_NotFound:
                raise HardwareError(
                    f"GPU {entry.uuid} from the saved state {path} is not on this machine; "
                    "restore the remaining GPUs by hand (nvidia-smi -rgc -rmc) and delete the file"
                ) from None
            current[entry.uuid] = read_gpu(handle, pynvml.nvmlDeviceGetIndex(handle), {})
        changes = plan_reset(saved, current)
        applier = applier_for(dry_run, echo)
        for change in changes:
            applier.apply(change)
    if dry_run:
        echo(f"would delete {path}")
        echo("dry run: nothing was changed")
    else:
        path.unlink(missing_ok=True)
        echo(f"restored the saved GPU state and deleted {path}")
    return changes
