"""A repository that is not a package, installed per commit: its checkout on the import path.

A script-style model repository (`model.py` at the root, no setup.py or
pyproject.toml) cannot be pip-installed, so fwdasv's environment type
(`fwdasv.asv.envplugin`) runs, after asv checks each commit out:

    python -m fwdasv.asv.treeinstall --checkout {build_dir} --env {env_dir} --path .

It copies the checkout (without `.git`) to `{env_dir}/fwdasv-tree/` and writes
`fwdasv-tree.pth` into the environment's site-packages, naming the copy's import
paths (`--path`, relative to the repository's root). Every process of the
environment imports the commit's modules from there, ahead of the parent link
(`zz-fwdasv-parent.pth` sorts after it). The previous commit's copy goes first,
so an install that fails leaves nothing of another commit importable.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from fwdasv.asv.envlink import env_site_packages
from fwdasv.core import installed
from fwdasv.core.errors import helper_main

TREE_DIR = installed.TREE_DIR
TREE_PTH = installed.TREE_PTH  # before zz-fwdasv-parent.pth: the commit's modules win
DEFAULT_PATHS = (".",)


class TreeInstallError(Exception):
    """The checkout lacks a named import path, or a path names something outside it."""


def check_import_path(path: str) -> str:
    """`path` normalized, relative to the repository root; ValueError when it leaves it."""
    pure = PurePosixPath(path.replace(os.sep, "/"))
    if not re.fullmatch(r"[A-Za-z0-9._/-]+", path):
        raise ValueError(
            f"import path {path!r}: use letters, digits and . _ / - only (it goes into asv's "
            "install command)"
        )
    if pure.is_absolute() or ".." in pure.parts:
        raise ValueError(
            f"import path {path!r} must be a directory inside the repository, relative to its "
            "root (`.` for the root itself)"
        )
    return str(pure) if pure.parts else "."


def missing_paths(tree: Path, paths: Sequence[str]) -> list[str]:
    """Which of `paths` are not directories of the source tree `tree`."""
    return [p for p in paths if not (tree / check_import_path(p)).is_dir()]


def install_tree(checkout: Path, env_dir: Path, paths: Sequence[str] = DEFAULT_PATHS) -> Path:
    """Copy `checkout` into the environment and put its `paths` on the import path; the .pth."""
    checkout, env_dir = Path(checkout).resolve(), Path(env_dir).resolve()
    site_packages = env_site_packages(env_dir)
    pth = site_packages / TREE_PTH
    tree = env_dir / TREE_DIR
    # The previous commit's files go first: nothing of it stays importable if this fails.
    pth.unlink(missing_ok=True)
    shutil.rmtree(tree, ignore_errors=True)
    missing = missing_paths(checkout, paths)
    if missing:
        raise TreeInstallError(
            f"{', '.join(missing)}: not a directory of the checkout at this commit "
            f"({checkout}); the suite's import paths must exist at every commit measured"
        )
    shutil.copytree(checkout, tree, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    lines = [str((tree / check_import_path(p)).resolve()) for p in paths]
    pth.write_text("\n".join(lines) + "\n")
    return pth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fwdasv.asv.treeinstall", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--checkout", required=True, help="asv's checkout of the commit")
    parser.add_argument("--env", required=True, help="the environment's directory")
    parser.add_argument(
        "--path",
        action="append",
        dest="paths",
        help="a directory of the checkout for the import path, repeatable (default: .)",
    )
    args = parser.parse_args(argv)

    def install() -> str:
        pth = install_tree(Path(args.checkout), Path(args.env), args.paths or DEFAULT_PATHS)
        return f"fwdasv: installed the checkout on the import path ({pth})"

    refused = (TreeInstallError, ValueError, OSError)  # each in its own words, no type named
    return helper_main(install, refused, named=refused)


if __name__ == "__main__":
    sys.exit(main())
