"""`fwdasv.core.files`: the one atomic writer."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from fwdasv.core.files import OutputPathError, check_output_dir, check_project_dir, write_atomic


def test_write_atomic_replaces_the_file_whole(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "old")
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_atomic_interrupted_leaves_no_partial_file(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(path, "previous complete file")
    # Writing a non-str fails inside write_atomic after the temporary file
    # exists: the failure stands in for a run killed half way through a write.
    with pytest.raises(TypeError):
        write_atomic(path, 12345)  # type: ignore[arg-type]
    assert path.read_text() == "previous complete file"
    assert os.listdir(tmp_path) == ["out.json"]
    with pytest.raises(TypeError):
        write_atomic(tmp_path / "fresh.json", object())  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_atomic_gives_the_file_the_usual_permissions(tmp_path: Path) -> None:
    # mkstemp's 0600 would make results, machine files and published pages
    # unreadable to anyone else (a web server serving the site, a CI user).
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "page.html", "<html></html>\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "page.html").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "page.html").read_text() == "<html></html>\n"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_read_regular_names_what_is_there_and_never_waits(tmp_path: Path) -> None:
    from fwdasv.core.files import NotRegularFileError, read_regular

    (tmp_path / "file.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "file.json")
    assert read_regular(tmp_path / "file.json") == read_regular(tmp_path / "link.json") == b"{}"
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone.json")
    (tmp_path / "folder.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")  # no writer: a blocking open would wait forever
    expected = {
        "dangling.json": f"a symbolic link to {tmp_path / 'gone.json'}, which does not exist",
        "folder.json": "a directory, not a regular file",
        "fifo.json": "a FIFO, not a regular file",
    }
    for name, message in expected.items():
        with pytest.raises(NotRegularFileError, match=re.escape(message)):
            read_regular(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing.json")


def test_a_project_dir_is_checked_without_creating_anything(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert check_project_dir(tmp_path / "link") == tmp_path / "link"  # a link to a folder
    deep = tmp_path / "new" / "deeper"
    assert check_project_dir(deep) == deep
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
    assert not any((tmp_path / "real").iterdir())  # the probe file is gone


def test_an_existing_output_dir_that_takes_no_file_is_refused() -> None:
    # /proc is a directory root may "write" by its mode bits; no file can be made there.
    with pytest.raises(OutputPathError, match=r"^--profile-dir /proc: "):
        check_output_dir("/proc", what="--profile-dir")
