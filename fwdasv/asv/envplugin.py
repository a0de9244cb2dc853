"""asv environment type "fwdasv": per-commit virtualenvs that never reach a package index.

asv's own virtualenv environment runs `pip install wheel pip>=8`, then
`pip install build asv_runner pympler` when it creates an environment, and
builds each commit with `python -m build`: every step needs an index, and GPU
boxes are often air-gapped. This type creates the virtualenv from the seed
wheels virtualenv ships (pip, setuptools; `--no-download`), links it to the
parent environment (`fwdasv.asv.envlink`: torch, fwdasv and asv's runner come
from there) and installs only the project at each commit, from its checkout,
with `--no-deps --no-build-isolation --no-index`. Requirements in asv's
`matrix` are still installed with pip (from wherever PIP_FIND_LINKS points).

In asv.conf.json (`fwdasv init` writes this):

    "plugins": [".fwdasv.asv.envplugin"],
    "environment_type": "fwdasv",
    "pythons": ["3.11"]          # the parent's version: its packages are shared

asv imports a plugin named with a leading dot as a module; this one only
defines the class, so importing it for any asv command costs nothing.
"""

from __future__ import annotations

import os
import sys

from asv import util
from asv.console import log
from asv.plugins.virtualenv import Virtualenv

from fwdasv.asv.envlink import link

TOOL_NAME = "fwdasv"
PLUGIN = ".fwdasv.asv.envplugin"
# The only commands that touch the project per commit: no build step (pip
# builds from the checkout), no uninstall (pip replaces the installed version,
# and asv skips a commit whose install failed), no index.
BUILD_COMMAND: list[str] = []
INSTALL_COMMAND = [
    "in-dir={env_dir} python -m pip install --no-deps --no-build-isolation --no-index "
    "--no-compile --disable-pip-version-check {build_dir}"
]
UNINSTALL_COMMAND: list[str] = []


def tree_install_command(paths: tuple[str, ...] = (".",)) -> list[str]:
    """The install for a repository that is not a package (no setup.py or pyproject.toml):
    each commit's checkout copied into the environment, `paths` of it on the import path
    (`fwdasv.asv.treeinstall`)."""
    named = "".join(f" --path {path}" for path in paths)
    return [
        "in-dir={env_dir} python -m fwdasv.asv.treeinstall --checkout {build_dir} "
        "--env {env_dir}" + named
    ]


class LinkedVirtualenv(Virtualenv):
    """A virtualenv linked to the parent environment; installs nothing but the project."""

    tool_name = TOOL_NAME

    def __init__(self, conf, python, requirements, tagged_env_vars):
        super().__init__(conf, python, requirements, tagged_env_vars)
        # The parent's interpreter: its packages are the ones linked.
        current = f"{sys.version_info.major}.{sys.version_info.minor}"
        if python != current:
            raise util.UserError(
                f'asv environment "{TOOL_NAME}" shares the packages of the interpreter '
                f'running asv (Python {current}); set "pythons": ["{current}"] in the asv '
                f"configuration (it asks for {python})"
            )
        self._executable = sys.executable
        # Network-free defaults where the configuration sets none (asv's would
        # run `python -m build`, which the environment does not have).
        if conf.build_command is None:
            self._build_command = BUILD_COMMAND
        if conf.install_command is None:
            self._install_command = INSTALL_COMMAND
        if conf.uninstall_command is None:
            self._uninstall_command = UNINSTALL_COMMAND
        self._set_commit_hash(self._get_installed_commit_hash())

    def _setup(self):
        env = dict(os.environ)
        env.update(self.build_env_vars)
        log.info(f"Creating virtualenv for {self.name} (linked to {sys.prefix}, no index)")
        util.check_call(
            [
                sys.executable,
                "-m",
                "virtualenv",
                "--no-download",
                "--no-periodic-update",
                "--setuptools=bundle",
                "-p",
                self._executable,
                self._path,
            ],
            env=env,
        )
        pth = link(self._path)
        log.info(f"Linked {self.name} to the parent environment ({pth.name})")
        self._install_requirements()

    def _install_requirements(self):
        """Only the matrix's requirements; asv's own (wheel, pip, build, asv_runner,
        pympler) come from the parent environment through the link."""
        for key, val in self._requirements.items():
            name = key[4:] if key.startswith("pip+") else key
            declaration = util.ParsedPipDeclaration(f"{name} {val}")
            util.construct_pip_call(self._run_pip, declaration)()
