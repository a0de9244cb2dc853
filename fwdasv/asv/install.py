"""One commit installed into asv's own environment, and the interpreter that runs it.

Confirm (an interleaved A/B re-measure) and explain (profiled runs) need more
control over each bench process than asv's runner gives, but the same
per-commit build asv would make. `install_commit` asks asv itself, in a
subprocess started through `fwdasv.launch`, to create the configuration's first
environment (as `asv find` uses `environments[0]`) and install the project at
the commit (asv's `Environment.install_project`: checkout, build, install
command), and returns the environment's python. An existing environment
installs nothing per commit, so it is refused with the reason.

    python -m fwdasv.asv.install --config asv.conf.json --commit HASH [--env-dir DIR]

`--env-dir`: the environment under DIR instead of the configuration's env_dir.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from asv import environment, util
from asv.config import Config
from asv.console import log
from asv.plugin_manager import plugin_manager
from asv.repo import get_repo

from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.launch import LaunchError, LaunchSpec, run_process

INSTALL_TIMEOUT_S = 3600.0
_MARK = "fwdasv-install: "


PER_COMMIT_ENVS = ".fwdasv-envs"  # beside asv.conf.json


@dataclass(frozen=True)
class InstalledCommit:
    commit: str
    python: str  # the environment's interpreter
    env_name: str
    installed: bool = True  # False: the environment held the commit already
    seconds: float = 0.0  # this call, the subprocess included


def env_dir_for(project: AsvProject, commit: str) -> Path:
    """The environment directory that keeps `commit` installed for re-measures (`--env-dir`).

    One environment per commit: an interleaved A B A B re-measure installs A and B
    once each, and a commit installed once is found installed next time (asv skips
    an environment whose recorded commit is the one asked for).
    """
    return project.config_path.parent / PER_COMMIT_ENVS / commit[:12]


def install_commit(
    project: AsvProject,
    commit: str,
    echo: Callable[[str], None] | None = None,
    python: str = sys.executable,
    env_dir: Path | None = None,
) -> InstalledCommit:
    """Install `commit` into the project's asv environment (or one under `env_dir`); its
    interpreter."""
    started = time.perf_counter()
    where = [] if env_dir is None else ["--env-dir", str(env_dir)]
    spec = LaunchSpec(
        args=[
            "-m",
            "fwdasv.asv.install",
            "--config",
            str(project.config_path),
            "--commit",
            commit,
            *where,
        ],
        python=python,
        timeout_s=INSTALL_TIMEOUT_S,
        cwd=str(project.config_path.parent),
    )
    log = project.results_dir.parent / ".fwdasv-logs" / f"install-{commit[:8]}-{os.getpid()}.log"
    answer: list[str] = []

    def listen(line: str) -> None:
        if _MARK in line:  # asv's last log line may lack its newline
            answer.append(line.split(_MARK, 1)[1])
        elif echo is not None:
            echo(line)

    try:
        completed = run_process(spec, log, listen)
    except LaunchError as error:
        raise AsvError(f"installing {commit[:8]} with asv failed: {error}") from None
    if completed.returncode != 0 or not answer:
        tail = "\n".join(completed.lines[-15:])
        raise AsvError(
            f"asv could not install {commit[:8]} into its environment (status "
            f"{completed.returncode}, log {log}):\n{tail}"
        )
    data = json.loads(answer[-1])
    return InstalledCommit(
        data["commit"],
        data["python"],
        data["env_name"],
        installed=bool(data.get("installed", True)),
        seconds=time.perf_counter() - started,
    )


def _install(config: str, commit: str, env_dir: str | None = None) -> dict[str, object]:
    log.enable(False)
    os.chdir(Path(config).resolve().parent)
    conf = Config.load(config)
    if env_dir is not None:
        conf.env_dir = str(Path(env_dir).resolve())
    for plugin in conf.plugins:
        plugin_manager.import_plugin(plugin)
    environments = list(environment.get_environments(conf, None))
    if not environments or environment.is_existing_only(environments):
        raise util.UserError(
            f"{config}: an existing environment installs nothing per commit, so the commits "
            "cannot be measured apart; use an asv-managed environment (virtualenv, uv, or "
            "fwdasv's network-free one) that installs {build_dir} per commit"
        )
    env = environments[0]
    repo = get_repo(conf)
    repo.pull()
    commit_hash = repo.get_hash_from_name(commit)
    env.create()
    already = env.installed_commit_hash == commit_hash
    env.install_project(conf, repo, commit_hash)
    return {
        "commit": commit_hash,
        "python": env.find_executable("python"),
        "env_name": env.name,
        "installed": not already,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fwdasv.asv.install", description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--env-dir", default=None, help="instead of the configuration's env_dir")
    args = parser.parse_args(argv)
    try:
        result = _install(args.config, args.commit, args.env_dir)
    except (util.UserError, util.ProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    print("\n" + _MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
