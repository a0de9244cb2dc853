"""asv's per-commit environments without a package index: fwdasv's environment type.

Real asv (its own Config, environment classes and plugin loading) over a real
git history of a small model package, with pip told to reach no index
(PIP_NO_INDEX=1), no wheel directory (an empty PIP_FIND_LINKS) and no pip
configuration file (PIP_CONFIG_FILE=/dev/null: this box's names a local index
and a wheel directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from toy_model import SLOW_PASS, build_repo

from fwdasv.asv import envplugin
from fwdasv.asv.envlink import PTH_NAME
from fwdasv.asv.scaffold import write_torch_project


def _asv_environment(config: Path):
    """asv's own objects for the configuration: its Config (plugins imported) and one env."""
    from asv import environment
    from asv.config import Config
    from asv.plugin_manager import plugin_manager
    from asv.repo import get_repo

    conf = Config.load(str(config))
    for plugin in conf.plugins:
        plugin_manager.import_plugin(plugin)
    # asv runs with the configuration's directory as working directory.
    conf.env_dir = str(config.parent / conf.env_dir)
    (env,) = environment.get_environments(conf, None)
    return conf, env, get_repo(conf)


def _dists(site_packages: Path) -> set[str]:
    return {p.name.split("-")[0].lower() for p in site_packages.glob("*.dist-info")}


def test_an_environment_is_created_and_commits_installed_with_no_index(
    tmp_path: Path, offline: None
) -> None:
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=2)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    conf, env, repo = _asv_environment(project.config_path)
    assert type(env).__name__ == "LinkedVirtualenv" and env.name == "fwdasv-py3.11"

    env.create()
    env.install_project(conf, repo, hashes[0])
    env_dir = Path(env._path)
    site_packages = next(env_dir.glob("lib/python*/site-packages"))
    # Only the seed wheels virtualenv ships and the project: asv's own requirements
    # (wheel, pip upgrade, build, asv_runner, pympler) were never pip-installed.
    assert _dists(site_packages) == {"pip", "setuptools", "mymodel"}
    assert (site_packages / PTH_NAME).is_file()

    def inside(code: str) -> str:
        # As asv runs benchmarks: the env's python, without the caller's PYTHONPATH.
        env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run(
            [str(env_dir / "bin" / "python"), "-c", code],
            env=env_vars,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    slow = f"print({SLOW_PASS!r} in open(m.__file__).read())"
    where = inside(
        "import fwdasv, asv_runner, torch, mymodel.model as m; "
        f"print(fwdasv.__file__); print(m.__file__); {slow}"
    ).splitlines()
    # The fwdasv that asv ran with (this checkout), and the commit's own model.
    import fwdasv

    assert where == [fwdasv.__file__, where[1], "False"]
    assert where[1].startswith(str(site_packages))

    env.install_project(conf, repo, hashes[2])
    assert json.loads((env_dir / "asv-install-status.json").read_text())["commit_hash"] == hashes[2]
    assert inside(f"import mymodel.model as m; {slow}") == "True"


def test_asvs_own_virtualenv_needs_an_index_where_fwdasvs_does_not(
    tmp_path: Path, offline: None
) -> None:
    """The failure fwdasv's type exists for: asv's virtualenv pip-installs wheel and pip."""
    build_repo(tmp_path / "mymodel", commits=2, slow_index=1)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    config = json.loads(project.config_path.read_text())
    config.update(environment_type="virtualenv", plugins=[])
    project.config_path.write_text(json.dumps(config))
    _, env, _ = _asv_environment(project.config_path)
    from asv import util

    with pytest.raises(util.ProcessError) as failed:
        env.create()
    assert "wheel" in str(failed.value.args) and "pip>=8" in str(failed.value.args)


def test_a_configuration_asking_for_another_python_is_one_clear_error(tmp_path: Path) -> None:
    from asv import util

    build_repo(tmp_path / "mymodel", commits=2, slow_index=1)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    config = json.loads(project.config_path.read_text())
    # "3": an interpreter asv finds here (python3), but not this version's packages.
    config["pythons"] = ["3"]
    project.config_path.write_text(json.dumps(config))
    current = f"{sys.version_info.major}.{sys.version_info.minor}"
    with pytest.raises(util.UserError, match=rf'set "pythons": \["{current}"\]'):
        _asv_environment(project.config_path)


def test_the_plugin_is_what_the_configuration_names() -> None:
    from asv.plugin_manager import plugin_manager

    plugin_manager.import_plugin(envplugin.PLUGIN)
    from asv.environment import get_environment_class_by_name

    assert get_environment_class_by_name("fwdasv") is envplugin.LinkedVirtualenv
