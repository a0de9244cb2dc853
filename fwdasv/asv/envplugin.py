"""asv environment type "fwdasv": per-commit virtualenvs that never reach a package index.

asv's virtualenv type installs wheel, build, asv_runner and pympler from an
index and builds each commit with `python -m build`; GPU boxes are often
air-gapped. This type makes the virtualenv from virtualenv's seed wheels, links
it to the parent environment (`fwdasv.asv.envlink`: torch, fwdasv and asv's
runner come from there) and installs only the project at each commit, with
`--no-deps --no-build-isolation --no-index` (`fwdasv init` writes the
configuration: `"plugins": [".fwdasv.asv.envplugin"], "environment_type":
"fwdasv"`, the parent's Python in `"pythons"`). Importing it defines the class and
makes asv's tables show values in other units than seconds and bytes briefly
(`fwdasv.asv.value_format`).

With `"fwdasv": {"vllm_base": PATH}` nothing is built: each commit's vllm/ goes
over the compiled base (`fwdasv.asv.vllm_base.VllmCache`), first on sys.path; a
commit whose compiled sources differ from the base's is refused with the reason,
and asv records its benchmarks as failed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from asv import util
from asv.console import log
from asv.plugins.virtualenv import Virtualenv

from fwdasv.asv import value_format, vllm_base
from fwdasv.asv.envlink import env_site_packages, link
from fwdasv.asv.settings import VllmBaseSettings

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

value_format.install()


class RefusedInstall(util.ProcessError):
    """A commit the compiled base cannot serve; asv records its benchmarks as failed."""

    def __init__(self, commit: str, reason: str):
        super().__init__(["fwdasv-vllm-install", commit], 1, reason, "")
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


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
        # Read before asv's __init__, which asks for the install checksum.
        self._vllm = VllmBaseSettings.from_block(getattr(conf, TOOL_NAME, None))
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

    def _get_install_checksum(self):
        # A new base makes every installed commit stale.
        return [*super()._get_install_checksum(), self._vllm.base, self._vllm.base_commit]

    def install_project(self, conf, repo, commit_hash):
        if not self._vllm.enabled:
            return super().install_project(conf, repo, commit_hash)
        if self._get_installed_commit_hash() == commit_hash:
            self._set_commit_hash(commit_hash)
            return
        self._set_installed_commit_hash(None)
        self._set_commit_hash(commit_hash)
        cache = vllm_base.VllmCache.beside(os.getcwd())  # asv runs in the configuration's dir
        try:
            installed = cache.install(Path(repo._path), commit_hash, self._vllm)
        except vllm_base.Refused as refused:
            # asv prints warnings while it builds (errors of a ProcessError are hidden).
            log.warning(f"fwdasv: {refused}")
            raise RefusedInstall(commit_hash, str(refused)) from None
        except vllm_base.BaseError as error:
            raise util.UserError(str(error)) from None
        vllm_base.activate(env_site_packages(self._path), installed.tree)
        how = "built" if installed.built else "cached"
        log.info(
            f"vLLM {commit_hash[:8]} over {self._vllm.base}: {how} in {installed.seconds:.2f} s"
        )
        self._set_installed_commit_hash(commit_hash)

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
