"""Bisect measures each commit's own build: refuse environments that cannot show it.

asv's `existing` environment (and `--python=same`, or a python path) runs the
one installed build for every commit, so every commit would look the same
(asv find's pitfall). Bisect needs an environment asv installs per commit (each
commit it measures gets one of its own, `fwdasv.asv.install.env_dir_for`), and
skips the commits a compiled vLLM base cannot serve (`commit_refusal`).
"""

from __future__ import annotations

from collections.abc import Callable

from fwdasv.asv.project import AsvProject
from fwdasv.asv.vllm_base import BaseError, project_guard
from fwdasv.core.errors import UserError

# asv environment types that install the project at every commit ("fwdasv": the
# network-free virtualenv of fwdasv.asv.envplugin).
PER_COMMIT_ENVS = ("fwdasv", "virtualenv", "uv", "conda", "mamba", "rattler")


class BisectError(UserError):
    """Bisect cannot start or cannot go on (refused environment, no step, bad names)."""


def check_environment(project: AsvProject, python: str | None = None) -> None:
    """Refuse environments where asv does not install each commit (one clear error)."""
    why = (
        "bisect needs asv to install the project at every commit it measures; an existing "
        "environment (environment_type 'existing', --python=same, or a python path) runs "
        "the one build already installed for every commit, so every commit would look "
        "the same (asv find's pitfall). Use an asv-managed environment: "
        '"environment_type": "fwdasv" (what `fwdasv init` writes), "virtualenv" or "uv" '
        'with "pythons": ["X.Y"] and an install_command that installs {build_dir} per commit'
    )
    env_type = project.environment_type
    if env_type == "existing":
        raise BisectError(f"{project.config_path}: environment_type is 'existing': {why}")
    for spec in [python] if python else []:
        if spec == "same" or spec.startswith("existing") or "/" in spec:
            raise BisectError(f"--python={spec} selects an existing environment: {why}")
    pythons = project.raw.get("pythons")
    for spec in pythons if isinstance(pythons, list) else []:
        if spec == "same" or "/" in str(spec):
            raise BisectError(
                f"{project.config_path}: pythons holds {spec!r}, an existing environment: {why}"
            )
    if env_type not in PER_COMMIT_ENVS:
        raise BisectError(
            f"{project.config_path}: environment_type {env_type!r} is not one fwdasv knows "
            f"to install per commit ({', '.join(PER_COMMIT_ENVS)})"
        )


def commit_refusal(project: AsvProject) -> Callable[[str], str | None] | None:
    """vLLM over a compiled base: commit -> why the base cannot serve it (untestable, skipped
    unmeasured), None when it can; None for any other project."""
    try:
        guard: Callable[[str], str | None] | None = project_guard(
            project.config_path, project.raw.get("fwdasv"), project.repo
        )
    except BaseError as error:
        raise BisectError(str(error)) from None
    return guard
