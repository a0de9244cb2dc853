"""How long asv takes to create an environment and install one commit, for two configurations.

On the same git history of a small model package (tests/toy_model.py), through asv's own
environment objects (`Environment.create()`, then `install_project()` per commit):
  before  asv's `virtualenv` type (pip-installs wheel, pip, build, asv_runner, pympler at
          creation), per commit `fwdasv.asvenv link`, `pip uninstall`, then `pip install
          --no-deps --no-build-isolation --no-index {build_dir}`; needs a package index
  after   fwdasv's `fwdasv` type (what `fwdasv init` writes): virtualenv's seed wheels, the
          link written once, per commit one `pip install --no-deps --no-build-isolation
          --no-index --no-compile {build_dir}`; with pip reaching nothing
Each repetition creates a fresh environment of each kind (order alternating) and installs
every commit. Prints median seconds and after/before ratios, then how `before` fails
without an index.

    python bench/speed/env_speed.py [--repeat 3] [--commits 4] [--kinds after]
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from toy_model import build_repo  # noqa: E402

from fwdasv.asv import envplugin  # noqa: E402  (registers asv's environment type "fwdasv")
from fwdasv.asv.scaffold import project_config  # noqa: E402

# pip reaching nothing: no index, no wheel directory, no configuration file
# (which could name either).
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}


def config(kind: str, repo: Path, env_dir: Path) -> dict[str, Any]:
    conf = project_config(str(repo), "mymodel", env_dir=str(env_dir))
    if kind == "before":
        conf.update(
            environment_type="virtualenv",
            plugins=[],
            install_command=[
                f"{sys.executable} -m fwdasv.asvenv link {{env_dir}}",
                "in-dir={env_dir} python -m pip install --no-deps --no-build-isolation "
                "--no-index {build_dir}",
            ],
        )
        del conf["uninstall_command"]  # asv's default: pip uninstall -y {project}
    return conf


@contextlib.contextmanager
def environ(changes: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def measure(
    kind: str, repo: Path, hashes: list[str], work: Path, env_vars: dict[str, str]
) -> dict[str, Any]:
    """Create one environment of `kind` and install every commit; seconds of each step."""
    from asv import environment
    from asv.config import Config
    from asv.repo import get_repo

    project = work / kind
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    path = project / "asv.conf.json"
    path.write_text(json.dumps(config(kind, repo, project / "env")))
    cwd = Path.cwd()
    os.chdir(project)  # as asv does: its base requirements read ./pyproject.toml
    try:
        with environ(env_vars):
            conf = Config.load(str(path))
            (env,) = environment.get_environments(conf, None)
            git = get_repo(conf)
            started = time.perf_counter()
            env.create()
            create_s = time.perf_counter() - started
            installs = []
            for commit in hashes:
                started = time.perf_counter()
                env.install_project(conf, git, commit)
                installs.append(time.perf_counter() - started)
    finally:
        os.chdir(cwd)
    return {"create_s": create_s, "install_s": installs}


def failure(repo: Path, hashes: list[str], work: Path) -> str:
    """How `before` ends without an index."""
    from asv import util

    try:
        measure("before", repo, hashes[:1], work / "offline", OFFLINE)
    except util.ProcessError as error:
        command = " ".join(["python", *list(error.args)[1:]])
        return f"fails at environment creation: `{command}` exited with status {error.retcode}"
    return "succeeded (an index was reachable anyway?)"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--commits", default=4, show_default=True, help="Commits installed per environment.")
@click.option("--repeat", default=3, show_default=True, help="Environments created of each kind.")
@click.option(
    "--kinds",
    type=click.Choice(["both", "after"]),
    default="both",
    show_default=True,
    help="'after' alone where no index is reachable (before cannot create an environment).",
)
def main(commits: int, repeat: int, kinds: str) -> None:
    assert envplugin.TOOL_NAME == "fwdasv"
    with tempfile.TemporaryDirectory(prefix="fwdasv-env-speed-") as tmp:
        work = Path(tmp)
        repo = work / "mymodel"
        hashes = build_repo(repo, commits=max(commits, 2), slow_index=1)[:commits]
        click.echo(
            f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"{commits} commits, {repeat} repetitions; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        )
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for rep in range(repeat):
            order = ("before", "after") if rep % 2 == 0 else ("after", "before")
            for kind in order if kinds == "both" else ("after",):
                env_vars = OFFLINE if kind == "after" else {}
                result = measure(kind, repo, hashes, work, env_vars)
                runs[kind].append(result)
                installs = ", ".join(f"{s:.2f}" for s in result["install_s"])
                click.echo(
                    f"  rep {rep + 1} {kind:6} create {result['create_s']:6.2f} s, "
                    f"installs {installs} s"
                )

        def median(kind: str, key: str) -> float:
            if key == "create_s":
                return statistics.median(r["create_s"] for r in runs[kind])
            if key == "total_s":
                return statistics.median(r["create_s"] + sum(r["install_s"]) for r in runs[kind])
            return statistics.median(s for r in runs[kind] for s in r["install_s"])

        click.echo("")
        if kinds == "after":
            click.echo(f"{'median seconds':32} {'after':>8}")
        else:
            click.echo(f"{'median seconds':32} {'before':>8} {'after':>8} {'after/before':>13}")
        for label, key in (
            ("create an environment", "create_s"),
            ("install one commit", "install_s"),
            (f"create + {commits} commits", "total_s"),
        ):
            a = median("after", key)
            if kinds == "after":
                click.echo(f"{label:32} {a:8.2f}")
            else:
                b = median("before", key)
                click.echo(f"{label:32} {b:8.2f} {a:8.2f} {a / b:12.2f}x")
        if kinds == "both":
            click.echo("")
            click.echo(f"before with PIP_NO_INDEX=1: {failure(repo, hashes, work)}")


if __name__ == "__main__":
    main()
