"""`fwdasv.core.files`: the one atomic writer."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from fwdasv.core.files import (
    OutputPathError,
    Owned,
    check_output_dir,
    check_outside,
    check_project_dir,
    write_atomic,
)


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


def _owned(root: Path) -> tuple[Owned, ...]:
    return (
        Owned(root / "asv.conf.json", "the configuration", "it is read"),
        Owned(root / "results", "the results directory", "asv reads it", tree=True),
    )


def test_an_output_over_an_owned_file_or_inside_an_owned_tree_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "asv.conf.json").write_text("{}")
    (tmp_path / "results" / "box").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "into-results").symlink_to(tmp_path / "results" / "box")
    monkeypatch.chdir(tmp_path / "elsewhere")
    refused = {
        tmp_path / "asv.conf.json": "is the configuration",
        Path("../asv.conf.json"): "is the configuration",  # relative
        tmp_path / "results": "is the results directory",
        Path("../results/benchmarks.json"): "is inside the results directory",  # not there yet
        tmp_path / "into-results" / "machine.json": "is inside the results directory",  # a link
        tmp_path / "elsewhere" / ".." / "results" / "box" / "new" / "deeper.json": "is inside",
    }
    for path, said in refused.items():
        with pytest.raises(OutputPathError) as error:
            check_outside(path, _owned(tmp_path), what="--output")
        line = str(error.value)
        assert line.startswith(f"--output {path} {said}"), line
        assert line.endswith("; write elsewhere") and "\n" not in line
    # Beside them, or a name that only starts alike, is fine.
    for path in ("out.csv", "../results.csv", "../asv.conf.json.bak", tmp_path / "resultsx"):
        assert check_outside(path, _owned(tmp_path), what="--output") == Path(path)


def test_an_owned_tree_of_one_suffix_refuses_only_those_files(tmp_path: Path) -> None:
    """`export -o benchmarks/bench.py` replaced a suite with a CSV: a benchmark directory's
    Python modules are the project's own; another file there (or the folder's name given
    to a writer of folders) is not, as a benchmark directory of `.` would refuse every
    path."""
    modules = Owned(tmp_path / "benchmarks", "a suite", "asv imports it", tree=True, suffix=".py")
    for path in ("benchmarks/bench.py", "benchmarks/new/deeper.py"):
        with pytest.raises(OutputPathError) as error:
            check_outside(tmp_path / path, (modules,), what="-o")
        assert str(error.value).startswith(f"-o {tmp_path / path} is a suite ("), error.value
    for path in ("benchmarks/out.csv", "benchmarks", "bench.py", "benchmarks.py"):
        assert check_outside(tmp_path / path, (modules,), what="-o") == tmp_path / path


def test_an_owned_tree_is_known_by_its_inode_under_another_name(tmp_path: Path) -> None:
    """The configuration may name the results through a link; the output the real folder."""
    (tmp_path / "real-results").mkdir()
    (tmp_path / "results").symlink_to(tmp_path / "real-results")
    with pytest.raises(OutputPathError, match=r"is inside the results directory \("):
        check_outside(tmp_path / "real-results" / "x.csv", _owned(tmp_path), what="-o")
    # A hard link to the configuration is the same file.
    (tmp_path / "asv.conf.json").write_text("{}")
    os.link(tmp_path / "asv.conf.json", tmp_path / "twin.json")
    with pytest.raises(OutputPathError, match=r"twin\.json is the configuration"):
        check_outside(tmp_path / "twin.json", _owned(tmp_path), what="-o")
