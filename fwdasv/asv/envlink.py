"""Let asv's per-commit environments see the parent environment's packages.

asv builds a virtualenv per configuration and installs the project under test
into it at every commit. Reinstalling torch (and fwdasv, asv's runner) there
costs gigabytes, minutes and a package index; instead `link` writes a .pth
file into the env's site-packages that adds, *after* the env's own, every
directory the parent interpreter imports from (`parent_site_packages`: its
site-packages with their .pth files, editable installs included, its user
site, its PYTHONPATH). The env imports torch, fwdasv and asv_runner as the
parent does, while the project installed into it per commit is found first.

fwdasv's environment type (`fwdasv.asv.envplugin`) links each environment it
creates; older configurations run `python -m fwdasv.asvenv link {env_dir}` from
`install_command`, with the parent's interpreter.
"""

from __future__ import annotations

import argparse
import os
import site
import sys
import sysconfig
from pathlib import Path

from fwdasv.core import installed

PTH_NAME = installed.PARENT_PTH


def env_site_packages(env_dir: str | Path) -> Path:
    """The site-packages directory of the virtualenv at `env_dir`."""
    env_dir = Path(env_dir)
    found = sorted(env_dir.glob("lib/python*/site-packages")) + sorted(
        env_dir.glob("Lib/site-packages")
    )
    if not found:
        raise FileNotFoundError(f"{env_dir} holds no lib/python*/site-packages (not a virtualenv?)")
    return found[0]


def _is_stdlib(path: str) -> bool:
    """Whether `path` is the standard library or a folder of it (lib-dynload), not a site dir."""
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    real = os.path.realpath(path)
    if real != stdlib and not real.startswith(stdlib + os.sep):
        return False
    return not any(part in ("site-packages", "dist-packages") for part in Path(real).parts)


def parent_site_packages() -> list[str]:
    """The directories this interpreter imports packages from, in its order.

    Its sys.path without the standard library (the env has its own, of the
    same version) and without the script's directory or the working
    directory (sys.path[0]: for an `install_command` that is the project's
    checkout, which must not shadow the installed commit).
    """
    safe_path = getattr(sys.flags, "safe_path", False)  # -P, Python 3.11+
    entries = list(sys.path if safe_path else sys.path[1:])
    # The site directories even where sys.path lacks them (python -S, a user site
    # switched off here but on in the env).
    entries += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    entries += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    unique: list[str] = []
    for path in entries:
        if not path:
            continue
        path = os.path.abspath(path)
        if path in unique or not Path(path).is_dir():
            continue
        if _is_stdlib(path):
            continue
        unique.append(path)
    return unique


def link(env_dir: str | Path, parents: list[str] | None = None) -> Path:
    """Write the .pth; returns its path. Idempotent."""
    parents = parent_site_packages() if parents is None else parents
    target = env_site_packages(env_dir)
    env_version = target.parent.name  # pythonX.Y
    mine = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if env_version.startswith("python") and env_version != mine:
        raise RuntimeError(
            f"{env_dir} is a {env_version} environment but the parent is {mine}: "
            "its packages cannot be shared; set asv's \"pythons\" to the parent's version"
        )
    lines = [f"import site; site.addsitedir({path!r})" for path in parents]
    pth = target / PTH_NAME
    pth.write_text("\n".join(lines) + "\n")
    return pth


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fwdasv.asvenv", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    link_parser = sub.add_parser("link", help="share this interpreter's packages with an asv env")
    link_parser.add_argument("env_dir")
    args = parser.parse_args(argv)
    print(f"fwdasv: linked {link(args.env_dir)}")


if __name__ == "__main__":
    main()
