"""`fwdasv.core.installed`: the code under test a per-commit environment holds, per install mode.

Real installs: a real virtualenv linked as fwdasv links asv's environments, the commit's
checkout of a script-style repository put on its import path by `treeinstall` (and asked
from the environment's own Python, its target kept outside the repository, no
FWDASV_SOURCE_ROOTS); a package installed by pip from a directory; a vLLM tree activated as
`vllm_base` does. A plain site-packages (not linked) says nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from script_model import build_repo, write_target

from fwdasv.asv import envlink, treeinstall, vllm_base
from fwdasv.core import installed


def _package(root: Path) -> Path:
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "mypkg"\nversion = "0.1"\n'
    )
    return root


def _pip_install(source: Path, site: Path) -> None:
    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    argv += ["--no-index", "--no-compile", "--disable-pip-version-check", "--target", str(site)]
    subprocess.run([*argv, str(source)], check=True, timeout=120)


def test_a_linked_environment_names_the_commits_checkout_not_the_outside_target(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "ngmodel"
    hashes = build_repo(repo, commits=2, slow_index=1)
    target_dir = write_target(tmp_path / "ngbench")
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    envlink.link(env)
    work = tmp_path / "checkout"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(work), hashes[1]], cwd=repo)
    treeinstall.install_tree(work, env)
    code = (
        "from fwdasv.engine.attribute import source_roots; "
        "print([(r.path, r.base) for r in source_roots('ngbench:target')])"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("FWDASV_SOURCE_ROOTS",)}
    clean["PYTHONPATH"] = str(target_dir)  # the target outside, as the suites put it
    shown = subprocess.run(
        [str(env / "bin" / "python"), "-c", code],
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    tree = os.path.realpath(env / treeinstall.TREE_DIR)
    assert eval(shown.stdout) == [(tree, tree)]  # model.py is named as the repository names it
    # The same environment with FWDASV_SOURCE_ROOTS: the override wins.
    clean["FWDASV_SOURCE_ROOTS"] = str(target_dir)
    override = subprocess.run(
        [str(env / "bin" / "python"), "-c", code], env=clean, capture_output=True, text=True
    )
    assert eval(override.stdout) == [(os.path.realpath(target_dir),) * 2]


def test_a_package_pip_installed_from_a_checkout_is_named_from_site_packages(tmp_path: Path):
    site = tmp_path / "site"
    _pip_install(_package(tmp_path / "src"), site)
    assert installed.installed_code(site) is None  # not a fwdasv environment: nothing said
    (site / envlink.PTH_NAME).write_text("")
    found = installed.installed_code(site)
    assert found is not None and found.paths == (site / "mypkg",) and found.base == site
    assert "package" in found.how
    # An editable install is the checkout itself (pip names it editable): not counted.
    direct = next(site.glob("mypkg-*.dist-info")) / "direct_url.json"
    direct.write_text(json.dumps({"url": "file:///x", "dir_info": {"editable": True}}))
    assert installed.installed_code(site) is None


def test_a_vllm_tree_is_the_tree_activate_put_first(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / envlink.PTH_NAME).write_text("")
    tree = tmp_path / ".fwdasv-vllm" / "trees" / ("a" * 40)
    (tree / "vllm").mkdir(parents=True)
    vllm_base.activate(site, tree)
    assert installed.active_tree(site) == tree
    found = installed.installed_code(site)
    assert found is not None and found.paths == (tree,) and found.base == tree
    vllm_base.activate(site, None)
    assert installed.installed_code(site) is None
