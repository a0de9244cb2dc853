"""Files written for users, written safely: one atomic writer for all of fwdasv.

Results, exports, machine files, state files and published pages are written
to a temporary file beside the target and renamed onto it, so an interrupted
write leaves the old file (or none), never half a file. Only a regular file is
ever replaced: a symlink, FIFO or device node at the path is refused, not
overwritten (run as root, a rename onto `/dev/full` would replace the device).
`read_regular` is the reading side: a FIFO or device where a file is read is
refused, never waited on. `check_outside` keeps a user-named output off the files a
project reads itself (its configuration, asv's results).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fwdasv.core.errors import UserError


class OutputPathError(UserError, ValueError):
    """A path fwdasv will not write to (not a regular file, or no such directory)."""


class MissingParentError(OutputPathError):
    """An output whose parent directory does not exist: a command with an option that
    creates it (`forward --create-dirs`) adds that option to the message."""


class NotRegularFileError(OSError):
    """A path read as a file holds something else (a FIFO, a directory, a dangling link)."""


def _kind(mode: int) -> str:
    return (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )


def _parent_ready(path: Path, make_parents: bool, what: str) -> None:
    parent = path.parent
    if not parent.is_dir():
        if parent.exists():
            raise OutputPathError(f"{what} {path}: {parent} is not a directory")
        if not make_parents:
            raise MissingParentError(
                f"{what} {path}: the directory {parent} does not exist; create it first"
            )
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputPathError(
                f"{what} {path}: cannot create {parent} ({error.strerror})"
            ) from None
    _takes_files(parent, f"{what} {path}")


def _takes_files(directory: Path, said: str) -> None:
    """One clear error, starting with `said`, unless a new file can be made in `directory`."""
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputPathError(f"{said}: the directory {directory} is not writable")
    # os.access answers yes to root wherever the mode bits allow: /proc, a read-only mount
    # or a full disk refuse a new file only when one is made.
    try:
        fd, probe = tempfile.mkstemp(prefix=".fwdasv-probe-", dir=directory)
    except OSError as error:
        raise OutputPathError(
            f"{said}: no file can be created in {directory} ({error.strerror})"
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_output_dir(
    path: str | os.PathLike[str], *, make_parents: bool = False, what: str = "output directory"
) -> Path:
    """`path` as a Path, when fwdasv may write files into it; else one clear error.

    An existing real directory must be writable; a missing one is created (its
    parent must exist unless `make_parents`: `MissingParentError`). A symlink, a file, a FIFO or a
    device at the path is refused. The files written inside are each checked
    with `check_output_path`.
    """
    path = Path(path)
    mode = _mode_at(path, what)
    if mode is not None:
        if not stat.S_ISDIR(mode):
            raise OutputPathError(
                f"{what} {path} is {_kind(mode)}; give a directory (new or existing)"
            )
        _takes_files(path, f"{what} {path}")
        return path
    _parent_ready(path, make_parents, what)
    try:
        path.mkdir()
    except OSError as error:
        raise OutputPathError(f"{what} {path}: cannot create it ({error.strerror})") from None
    return path


def _mode_at(path: Path, what: str) -> int | None:
    """The mode of what stands at `path` itself (a link not followed), None when nothing
    does; one clear error when a parent is a file or the path cannot be checked."""
    try:
        return path.lstat().st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputPathError(
            f"{what} {path}: a parent of it is a file, not a directory; give a path in a directory"
        ) from None
    except OSError as error:
        raise OutputPathError(f"{what} {path}: cannot be checked ({error.strerror})") from None


def check_project_dir(path: str | os.PathLike[str], *, what: str = "--dir") -> Path:
    """`path` as a Path, when a project directory can live there; else one clear error.

    For the directory a command fills with a tree of its own (`fwdasv init`, `fwdasv
    demo`): an existing directory (or a link to one) must take a new file; a missing one
    must be creatable, from its nearest existing ancestor, which must be a directory that
    takes a new entry. Nothing is created: a command refused later leaves no empty folder.
    """
    path = Path(path)
    if path.is_dir():
        _takes_files(path, f"{what} {path}")
        return path
    if path.exists() or path.is_symlink():
        mode = path.lstat().st_mode
        raise OutputPathError(f"{what} {path} is {_kind(mode)}; give a directory (new or existing)")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        mode = ancestor.lstat().st_mode
        kind = "a file" if stat.S_ISREG(mode) else _kind(mode)
        raise OutputPathError(
            f"{what} {path}: {ancestor} is {kind}, not a directory; give a path in a directory"
        )
    _takes_files(ancestor, f"{what} {path}")
    return path


def check_output_path(
    path: str | os.PathLike[str], *, make_parents: bool = False, what: str = "output"
) -> Path:
    """`path` as a Path, when fwdasv may write a regular file there; else one clear error.

    Refuses a symlink, a directory, a FIFO, a socket or a device at the path,
    and a missing parent directory unless `make_parents` (then it is created;
    else `MissingParentError`).
    Checked before any work starts, so a bad path costs nothing measured.
    """
    path = Path(path)
    mode = _mode_at(path, what)
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputPathError(
            f"{what} {path} is {_kind(mode)}; fwdasv writes only regular files (and replaces "
            "them atomically): give the path of a new or regular file"
        )
    _parent_ready(path, make_parents, what)
    return path


@dataclass(frozen=True)
class Owned:
    """A file, or with `tree` a directory and everything under it (with `suffix`, only the
    files so named: a benchmark directory's Python modules), that a project reads or
    rewrites itself: `name` says what it is ("the project's results directory"), `why` why
    no output may land there ("asv and fwdasv read it")."""

    path: Path
    name: str
    why: str
    tree: bool = False
    suffix: str | None = None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def check_outside(
    path: str | os.PathLike[str], owned: Iterable[Owned], *, what: str = "output"
) -> Path:
    """`path` as a Path, unless it is one of `owned`'s files or lies inside one of its
    trees; then one clear error naming `what`, the path and the owner.

    Compared after relative parts and symlinks resolve, and by device and inode too (a
    bind mount, another spelling of the same directory). Checked before anything is
    measured or written: an export over benchmarks.json or a JSON over the verdicts file
    would exit 0 and break every later command.
    """
    path = Path(path)
    resolved = Path(os.path.realpath(path))  # Path.resolve raises on a symlink loop
    here = _identity(resolved)
    above = {i for i in map(_identity, (resolved, *resolved.parents)) if i is not None}
    for own in owned:
        target = Path(os.path.realpath(own.path))
        there = _identity(target)
        same = resolved == target or (here is not None and here == there)
        inside = own.tree and (resolved.is_relative_to(target) or there in above)
        if (same or inside) and (own.suffix is None or resolved.suffix == own.suffix):
            where = "is" if same or own.suffix else "is inside"  # a module, not a folder
            raise OutputPathError(
                f"{what} {path} {where} {own.name} ({own.path}): {own.why}; write elsewhere"
            )
    return path


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str],
    *,
    make_parents: bool = True,
    what: str = "output",
    binary: bool = False,
) -> Iterator[IO[Any]]:
    """A text (or, with `binary`, bytes) stream to a temporary file beside `path`, renamed
    onto it on success.

    An interrupted write leaves the old file (or none), never half a file. The
    file gets the usual permissions (0666 minus the umask), not mkstemp's 0600:
    results, machine files and published pages are read by other users.
    """
    path = check_output_path(path, make_parents=make_parents, what=what)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        with opened as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        # Checked again at the last moment: something may have appeared meanwhile.
        check_output_path(path, make_parents=False, what=what)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(
    path: str | os.PathLike[str], text: str, *, make_parents: bool = True, what: str = "output"
) -> None:
    """Write `text` to `path` through a temporary file and a rename."""
    with atomic_output(path, make_parents=make_parents, what=what) as stream:
        stream.write(text)


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path` (a symlink to one is followed).

    A FIFO, device, socket or directory there, or a symlink to nothing, raises
    NotRegularFileError naming what is there; a missing path, FileNotFoundError.
    Opened non-blocking and checked before a byte is read: a FIFO with no writer
    would otherwise hold the reader until it is killed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if os.path.islink(path):
            raise NotRegularFileError(
                f"a symbolic link to {os.readlink(path)}, which does not exist"
            ) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFileError(f"{_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as stream:
        return stream.read()
