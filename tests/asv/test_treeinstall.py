"""`fwdasv.asv.treeinstall`: a checkout that is not a package, on a real environment's path.

A real virtualenv (`python -m venv --without-pip`) and real checkouts of a
script-style repository (tests/script_model.py) at two commits: the commit's
`model.py` is what the environment's Python imports, the previous commit's
files do not survive, and a checkout without a named import path leaves
nothing importable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from script_model import SLOW_BODY, build_repo

from fwdasv.asv import envplugin, treeinstall


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    path = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def checkout(repo: Path, commit: str, into: Path) -> Path:
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(into), commit], cwd=repo, check=True
    )
    return into


def imported(venv: Path, module: str) -> subprocess.CompletedProcess:
    python = venv / "bin" / "python"
    # Found, not executed (model.py imports torch, which this bare environment lacks).
    code = (
        "import importlib.util, pathlib, sys; s = importlib.util.find_spec(sys.argv[1]); "
        "sys.exit(1) if s is None else print(pathlib.Path(s.origin).read_text())"
    )
    return subprocess.run([str(python), "-c", code, module], capture_output=True, text=True)


def test_the_commit_installed_is_the_one_imported(tmp_path: Path, venv: Path) -> None:
    repo = tmp_path / "repo"
    hashes = build_repo(repo, commits=3, slow_index=2)
    fast = checkout(repo, hashes[0], tmp_path / "fast")
    (fast / "helper.py").write_text("GONE_LATER = 1\n")  # only in this commit's tree
    slow = checkout(repo, hashes[2], tmp_path / "slow")

    pth = treeinstall.install_tree(fast, venv)
    assert pth.name == treeinstall.TREE_PTH
    first = imported(venv, "model")
    assert first.returncode == 0 and SLOW_BODY not in first.stdout, first.stderr
    assert imported(venv, "helper").returncode == 0

    treeinstall.install_tree(slow, venv)
    assert SLOW_BODY in imported(venv, "model").stdout
    assert imported(venv, "helper").returncode != 0  # the previous commit's files are gone
    assert not (venv / treeinstall.TREE_DIR / ".git").exists()


def test_named_import_paths_and_a_missing_one(tmp_path: Path, venv: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "src" / "pkg" / "__init__.py").write_text("")
    (tree / "top.py").write_text("")
    treeinstall.install_tree(tree, venv, ["src"])
    assert imported(venv, "pkg").returncode == 0
    assert imported(venv, "top").returncode != 0  # only src/ is on the path

    with pytest.raises(treeinstall.TreeInstallError, match="lib: not a directory of the checkout"):
        treeinstall.install_tree(tree, venv, ["src", "lib"])
    assert imported(venv, "pkg").returncode != 0  # nothing of the earlier install is left


@pytest.mark.parametrize("bad", ["../up", "/abs", "a b", "{env_dir}"])
def test_an_import_path_outside_the_repository_or_unquotable_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="import path"):
        treeinstall.check_import_path(bad)


def test_the_install_command_names_the_paths() -> None:
    (command,) = envplugin.tree_install_command(("src", "."))
    assert command == (
        "in-dir={env_dir} python -m fwdasv.asv.treeinstall --checkout {build_dir} "
        "--env {env_dir} --path src --path ."
    )


def test_the_install_process_ends_in_one_line_and_its_status(
    tmp_path: Path, venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What asv's build log shows of the install: its last line (fwdasv.core.errors.helper_main).
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    base = ["--checkout", str(tree), "--env", str(venv)]
    assert treeinstall.main([*base, "--path", "src"]) == 0
    said = capsys.readouterr()
    assert said.out.startswith("fwdasv: installed the checkout on the import path (")
    assert said.err == ""

    assert treeinstall.main([*base, "--path", "src", "--path", "lib"]) == 1
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.startswith("fwdasv: lib: not a directory of the checkout")
    assert said.err.count("\n") == 1  # one line, the error's own words (no type named)

    assert treeinstall.main([*base, "--path", "../up"]) == 1
    assert capsys.readouterr().err.startswith("fwdasv: import path '../up' must be a directory")
