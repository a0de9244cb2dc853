"""Which code under test a per-commit environment holds: what its install put there.

Read in a bench process (`fwdasv.engine.attribute.source_roots`) from the environment's own
site-packages, and only in an environment fwdasv linked (`PARENT_PTH`: asv's and the
re-measures' per-commit environments), one install mode each: a repository that is not a
package (the commit's checkout copied into `<env>/fwdasv-tree/`, `fwdasv.asv.treeinstall`),
a vLLM commit (its tree in `.fwdasv-vllm/trees/<commit>/`, `vllm_base.activate`), or a
package pip installed from asv's checkout (its `direct_url.json` names a directory, not an
editable one: its top-level packages and modules). `Installed.base` names the files: as the
repository does for a tree (`model.py`, `vllm/...`), from site-packages for a package
(`tinylm/model.py`, the repository's path or its tail). None anywhere else: what a plain
environment has installed says nothing about which code is under test.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

# The files fwdasv's installs write into an environment's site-packages (`fwdasv.asv`
# writes them; this module and the bench process read them).
PARENT_PTH = "zz-fwdasv-parent.pth"  # `fwdasv.asv.envlink`: the environment is fwdasv's
TREE_DIR = "fwdasv-tree"  # `fwdasv.asv.treeinstall`: the commit's checkout, copied
TREE_PTH = "fwdasv-tree.pth"  # before zz-fwdasv-parent.pth: the commit's modules win
VLLM_PTH = "00-fwdasv-vllm.pth"  # `fwdasv.asv.vllm_base.activate`: sorts before the parent link


@dataclass(frozen=True)
class Installed:
    """The code under test as installed: `paths` (directories, or a module's file), their
    files named relative to `base`; `how` the install mode, in words."""

    how: str
    paths: tuple[Path, ...]
    base: Path


def checkout_tree(site_packages: Path) -> Path | None:
    """The commit's checkout that `treeinstall` put on the environment's import path."""
    try:
        lines = (site_packages / TREE_PTH).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if not line.strip() or line.startswith(("#", "import ")):
            continue
        path = Path(line.strip())
        for folder in (path, *path.parents):
            if folder.name == TREE_DIR:
                return folder
        return path
    return None


def _top_level(dist_info: Path) -> list[str]:
    """The top-level packages and modules a distribution installed."""
    try:
        names = (dist_info / "top_level.txt").read_text().split()
    except OSError:
        names = []
    if names:
        return names
    try:
        record = (dist_info / "RECORD").read_text().splitlines()
    except OSError:
        return []
    found: list[str] = []
    for line in record:
        first = line.split(",", 1)[0].split("/", 1)[0]
        if not first or first == ".." or first.endswith((".dist-info", ".pth")):
            continue
        name = first.removesuffix(".py")
        if name != "__pycache__" and name not in found:
            found.append(name)
    return found


def active_tree(site_packages: Path) -> Path | None:
    """The vLLM tree `fwdasv.asv.vllm_base.activate` put first on sys.path here, or None."""
    try:
        text = (site_packages / VLLM_PTH).read_text()
    except OSError:
        return None
    found = re.search(r"sys\.path\.insert\(0, ('.*'|\".*\")\)", text)
    return Path(ast.literal_eval(found.group(1))) if found else None


def pip_installed(site_packages: Path) -> tuple[Path, ...]:
    """What pip installed here from a local directory (asv's checkout), not editable."""
    found: list[Path] = []
    for dist_info in sorted(site_packages.glob("*.dist-info")):
        try:
            direct = json.loads((dist_info / "direct_url.json").read_text())
        except (OSError, ValueError):
            continue
        info = direct.get("dir_info") if isinstance(direct, dict) else None
        if not isinstance(info, dict) or info.get("editable"):
            continue
        for name in _top_level(dist_info):
            for path in (site_packages / name, site_packages / f"{name}.py"):
                if path.exists() and path not in found:
                    found.append(path)
    return tuple(found)


def installed_code(site_packages: Path) -> Installed | None:
    """The code under test in the fwdasv environment whose site-packages this is, or None."""
    if not (site_packages / PARENT_PTH).is_file():
        return None
    tree = checkout_tree(site_packages)
    if tree is not None:
        return Installed("the commit's checkout on the import path", (tree,), tree)
    vllm = active_tree(site_packages)
    if vllm is not None:
        return Installed("the commit's vLLM tree", (vllm,), vllm)
    packages = pip_installed(site_packages)
    if packages:
        return Installed("the package installed at the commit", packages, site_packages)
    return None
