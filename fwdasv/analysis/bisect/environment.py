"""Bisect measures each commit's own build: refuse environments that cannot show it.

asv's `existing` environment (and `--python=same`, or a python path) runs the
one installed build for every commit, so every commit would look the same
(asv find's pitfall). Bisect needs an environment asv installs per commit,
and checks after each `asv run` that the result files are that commit's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from fwdasv.asv.project import AsvProject
from fwdasv.asv.result_files import ResultFileError, result_header
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
    from fwdasv.asv.vllm_base import BaseError, project_guard

    try:
        guard: Callable[[str], str | None] | None = project_guard(
            project.config_path, project.raw.get("fwdasv"), project.repo
        )
    except BaseError as error:
        raise BisectError(str(error)) from None
    return guard


def check_per_commit(commit_hash: str | None, env_name: str | None, commit: str) -> None:
    """A result used by bisect (its commit and environment, as its file says) must be this
    commit's, from a per-commit environment."""
    if commit_hash != commit:
        raise BisectError(
            f"the result file for {commit[:8]} holds commit {commit_hash} "
            "(two commits share the 8-character prefix asv names files by); bisect cannot "
            "tell their results apart"
        )
    env_name = env_name or ""
    if env_name.split("-", 1)[0] not in PER_COMMIT_ENVS:
        raise BisectError(
            f"the result for {commit[:8]} comes from environment {env_name!r}, not one asv "
            "builds per commit: it may be another commit's build measured under this hash "
            "(see `fwdasv bisect --help`)"
        )


def installed_commits(project: AsvProject) -> set[str]:
    """The commit each asv-managed environment in env_dir last installed.

    asv writes `asv-install-status.json` when it installs the project into an
    environment it manages; an existing environment has none.
    """
    found = set()
    for status in project.env_dir.glob("*/asv-install-status.json"):
        try:
            commit = json.loads(status.read_text()).get("commit_hash")
        except (OSError, ValueError):
            continue
        if isinstance(commit, str):
            found.add(commit)
    return found


def verify_measured(
    project: AsvProject, machine: str, commits: Sequence[str], since: float = 0.0
) -> list[str]:
    """After `asv run` of `commits`: their result files are theirs, from per-commit installs.

    Only files written since `since` (a time.time()) are checked: older results
    of other environments may sit beside them. Returns the commits asv saved no
    result for (a failed build); raises on results bisect must not use.
    """
    folder = project.results_dir / machine
    unsaved = []
    for commit in commits:
        files = [
            p
            for p in folder.glob(f"{commit[:8]}-*.json")
            if p.is_file() and p.stat().st_mtime >= since
        ]
        if not files:
            unsaved.append(commit)
        for path in files:
            try:
                header = result_header(path)
            except ResultFileError as error:
                raise BisectError(f"unreadable after asv run: {error}") from None
            check_per_commit(header.commit_hash, header.env_name, commit)
    saved = [c for c in commits if c not in unsaved]
    if saved and not installed_commits(project) & set(saved):
        raise BisectError(
            f"no asv-managed environment in {project.env_dir} records installing "
            f"{', '.join(c[:8] for c in saved)}: the results cannot be shown to come from "
            "a build of that commit"
        )
    return unsaved
