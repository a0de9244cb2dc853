"""The state file: what setup changed, so reset restores exactly that (and only in this boot)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from pathlib import Path
from typing import Any

from fwdasv.hw.errors import HardwareError

STATE_FILE_ENV = "FWDASV_HW_STATE_FILE"
DEFAULT_STATE_FILE = "~/.cache/fwdasv/hw-state.json"
STATE_VERSION = 1


# --------------------------------------------------------------------------- state file


def resolve_state_file(path: str | os.PathLike[str] | None = None) -> Path:
    """The given path, else $FWDASV_HW_STATE_FILE, else ~/.cache/fwdasv/hw-state.json."""
    chosen = path if path is not None else os.environ.get(STATE_FILE_ENV) or DEFAULT_STATE_FILE
    return Path(chosen).expanduser()


def boot_id() -> str | None:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return None


def load_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except OSError as error:
        raise HardwareError(f"cannot read the saved GPU state {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise HardwareError(
            f"the saved GPU state {path} is not valid JSON ({error}); restore the GPUs by hand "
            "(nvidia-smi -rgc -rmc) and delete it"
        ) from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise HardwareError(
            f"{path} is not a fwdasv GPU state file of version {STATE_VERSION}; "
            "restore the GPUs by hand (nvidia-smi -rgc -rmc) and delete it"
        )
    return state


def recorded_locks(path: Path | None) -> dict[str, dict[str, Any]]:
    """uuid -> the locks fwdasv's state file records, when it was written in this boot."""
    if path is None or not path.exists():
        return {}
    try:
        state = load_state(path)
    except HardwareError:
        return {}
    if state.get("boot_id") != boot_id():
        return {}  # a reboot cleared the locks the file describes
    locks: dict[str, dict[str, Any]] = {}
    for entry in state.get("gpus", []):
        applied = entry.get("applied", {})
        if applied.get("gpu_locked_clocks") or applied.get("memory_locked_clocks"):
            locks[entry["uuid"]] = {
                "gpu": applied.get("gpu_locked_clocks"),
                "memory": applied.get("memory_locked_clocks"),
                "set_at": state.get("created_at"),
                "state_file": str(path),
            }
    return locks


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
