"""Let asv's per-commit environments see the parent environment's packages.

asv builds a virtualenv per configuration and installs the project under test
into it at every commit. Reinstalling torch (and fwdasv) there costs gigabytes
and minutes; instead `link` writes a .pth file into the env's site-packages
that adds the parent environment's site-packages *after* the env's own, with
their .pth files processed (editable installs included). The project installed
into the env per commit is still found first.

asv runs it from `install_command`, with the parent's interpreter:

    "/path/to/parent/python -m fwdasv.asv.envlink link {env_dir}"
"""

from __future__ import annotations

import argparse
import site
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "zz-fwdasv-parent.pth"


def env_site_packages(env_dir: str | Path) -> Path:
    """The site-packages directory of the virtualenv at `env_dir`."""
    env_dir = Path(env_dir)
    found = sorted(env_dir.glob("lib/python*/site-packages")) + sorted(
        env_dir.glob("Lib/site-packages")
    )
    if not found:
        raise FileNotFoundError(f"{env_dir} holds no lib/python*/site-packages (not a virtualenv?)")
    return found[0]


def parent_site_packages() -> list[str]:
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    paths += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    unique: list[str] = []
    for path in paths:
        if path not in unique and Path(path).is_dir():
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
        prog="python -m fwdasv.asv.envlink", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    link_parser = sub.add_parser("link", help="share this interpreter's packages with an asv env")
    link_parser.add_argument("env_dir")
    args = parser.parse_args(argv)
    print(f"fwdasv: linked {link(args.env_dir)}")


if __name__ == "__main__":
    main()
