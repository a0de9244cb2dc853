"""`fwdasv shard --ray`: what it refuses before joining any cluster."""

from __future__ import annotations

from click.testing import CliRunner
from toy_model import build_repo

from fwdasv.asv.scaffold import write_torch_project
from fwdasv.cli import main
from fwdasv.core.errors import EXIT_USAGE


def test_one_host_options_with_ray_are_one_line(tmp_path):
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=None)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    span = f"{hashes[0]}..{hashes[2]}"
    for extra in (["--gpus", "0"], ["--plan-only"]):
        done = CliRunner().invoke(
            main, ["shard", "--config", str(project.config_path), "--ray", "auto", *extra, span]
        )
        assert done.exit_code == EXIT_USAGE, done.output
        (line,) = [x for x in done.output.splitlines() if x.strip()]
        assert line == "Error: --gpus and --plan-only are for one host; drop them with --ray"
