"""The state file: what setup changed, so reset restores exactly that (and only in this boot)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

from fwdasv.core.files import NotRegularFileError, read_regular
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


@dataclass(frozen=True)
class ClockLock:
    """A locked clock range in MHz (or NVML's TDP sentinel for `base`), and how it was asked."""

    min_mhz: int
    max_mhz: int
    label: str

    @classmethod
    def from_json(cls, data: object, where: str) -> ClockLock | None:
        if data is None:
            return None
        if not isinstance(data, dict) or not {"min_mhz", "max_mhz", "label"} <= data.keys():
            raise _not_a_state_file(where)
        return cls(int(data["min_mhz"]), int(data["max_mhz"]), str(data["label"]))


@dataclass(frozen=True)
class GpuSettings:
    """The settings `setup` may change, as one GPU had them (`before`) or as setup changed them
    (`applied`: None where it left a setting alone; no applications clocks, it never sets them).
    """

    persistence_mode: bool | None = None
    gpu_locked_clocks: ClockLock | None = None
    memory_locked_clocks: ClockLock | None = None
    app_graphics_clock_mhz: int | None = None
    app_memory_clock_mhz: int | None = None
    default_app_graphics_clock_mhz: int | None = None
    default_app_memory_clock_mhz: int | None = None

    def to_json(self, applied: bool = False) -> dict[str, object]:
        data = dataclasses.asdict(self)
        if applied:
            # What setup changes: persistence and the two locks, nothing else.
            data = {key: data[key] for key in _APPLIED}
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> GpuSettings:
        if not isinstance(data, dict):
            raise _not_a_state_file(where)
        return cls(
            persistence_mode=data.get("persistence_mode"),
            gpu_locked_clocks=ClockLock.from_json(data.get("gpu_locked_clocks"), where),
            memory_locked_clocks=ClockLock.from_json(data.get("memory_locked_clocks"), where),
            **{key: data.get(key) for key in _APP_CLOCKS},
        )


_APPLIED = ("persistence_mode", "gpu_locked_clocks", "memory_locked_clocks")
_APP_CLOCKS = (
    "app_graphics_clock_mhz",
    "app_memory_clock_mhz",
    "default_app_graphics_clock_mhz",
    "default_app_memory_clock_mhz",
)


@dataclass(frozen=True)
class SavedGpu:
    """One GPU of the state file: which, its settings before setup, and what setup changed."""

    index: int
    uuid: str
    name: str | None
    before: GpuSettings
    applied: GpuSettings

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "before": self.before.to_json(),
            "applied": self.applied.to_json(applied=True),
        }


@dataclass(frozen=True)
class HwState:
    """The state file `setup` writes before it changes anything, and `reset` restores."""

    created_at: str | None
    host: str | None
    pid: int | None
    boot_id: str | None
    gpus: tuple[SavedGpu, ...]
    version: int = STATE_VERSION

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            **{key: getattr(self, key) for key in _SESSION},
            "gpus": [gpu.to_json() for gpu in self.gpus],
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> HwState:
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise _not_a_state_file(where)
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(g, dict) and "uuid" in g for g in gpus):
            raise _not_a_state_file(where)
        return cls(
            **{key: data.get(key) for key in _SESSION},
            version=STATE_VERSION,  # as checked above
            gpus=tuple(
                SavedGpu(
                    index=g.get("index"),
                    uuid=str(g["uuid"]),
                    name=g.get("name"),
                    before=GpuSettings.from_json(g.get("before", {}), where),
                    applied=GpuSettings.from_json(g.get("applied", {}), where),
                )
                for g in gpus
            ),
        )


# When, where and by which process the file was written (a reboot clears the locks).
_SESSION = ("created_at", "host", "pid", "boot_id")


def _not_a_state_file(path: object) -> HardwareError:
    return HardwareError(
        f"{path} is not a fwdasv GPU state file of version {STATE_VERSION}; "
        "restore the GPUs by hand (nvidia-smi -rgc -rmc) and delete it"
    )


def load_state(path: Path) -> HwState:
    try:
        # Not path.read_text(): a FIFO with no writer would hold reset (and the clocks) forever.
        state = json.loads(read_regular(path))
    except NotRegularFileError as error:
        raise HardwareError(
            f"the saved GPU state {path} is {error}; give the --state-file setup wrote"
        ) from None
    except OSError as error:
        raise HardwareError(f"cannot read the saved GPU state {path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise HardwareError(
            f"the saved GPU state {path} is not valid JSON ({error}); restore the GPUs by hand "
            "(nvidia-smi -rgc -rmc) and delete it"
        ) from None
    return HwState.from_json(state, str(path))


@dataclass(frozen=True)
class RecordedLock:
    """The locks fwdasv's state file records for one GPU in this boot (NVML cannot read them)."""

    gpu: ClockLock | None
    memory: ClockLock | None
    set_at: str | None
    state_file: str


def recorded_locks(path: Path | None) -> dict[str, RecordedLock]:
    """uuid -> the locks fwdasv's state file records, when it was written in this boot."""
    if path is None or not path.exists():
        return {}
    try:
        state = load_state(path)
    except HardwareError:
        return {}
    if state.boot_id != boot_id():
        return {}  # a reboot cleared the locks the file describes
    return {
        gpu.uuid: RecordedLock(
            gpu.applied.gpu_locked_clocks,
            gpu.applied.memory_locked_clocks,
            state.created_at,
            str(path),
        )
        for gpu in state.gpus
        if gpu.applied.gpu_locked_clocks or gpu.applied.memory_locked_clocks
    }


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
