"""`fwdasv shard --ray`, fleet-confirm and fleet-triage: what they read and refuse before
joining any cluster."""

from __future__ import annotations

import sys

from click.testing import CliRunner
from toy_model import build_repo

from fwdasv.asv.scaffold import write_torch_project
from fwdasv.cli import main
from fwdasv.core.errors import EXIT_USAGE
from fwdasv.fleet.cli import RayAddress


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


def test_fleet_confirm_and_triage_read_their_options_before_joining_any_cluster(tmp_path):
    """Their shared options reach the command as one value (`FleetOptions`): the project of
    --config, the findings of --machine; with no finding to send, --ray is never joined."""
    build_repo(tmp_path / "mymodel", commits=3, slow_index=None)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    project.results_dir.mkdir()  # the suite discovered, nothing measured: no finding
    (project.results_dir / "benchmarks.json").write_text("{}")
    said = {
        "fleet-confirm": "nothing to confirm: no finding has status 'regression' or "
        "'suspected', nor a speed-up not yet re-measured",
        "fleet-triage": "nothing to triage: no finding to confirm or explain and no range left "
        "to bisect",
    }
    for command, line in said.items():
        options = [command, "--ray", "127.0.0.1:1", "--config", str(project.config_path)]
        done = CliRunner().invoke(main, options)
        assert done.exit_code == 0, done.output
        assert done.output.splitlines() == [line]
        done = CliRunner().invoke(main, [*options, "--machine", "nowhere"])
        assert done.exit_code == EXIT_USAGE, done.output
        assert done.output.splitlines() == [
            f"Error: unknown machine 'nowhere' in {project.results_dir} (known: none): no "
            "results are stored under that name; measure under that name first "
            "(`asv run --machine NAME`)"
        ]


def test_shard_over_ray_without_ray_installed_is_one_line(tmp_path, monkeypatch):
    """Ray is an extra (`fwdasv[fleet]`): without it the fleet's commands once ended in a
    ModuleNotFoundError traceback, exit 1, which CI reads as a finding."""
    from fwdasv.fleet import _ray

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as when not installed
    monkeypatch.delitem(_ray.__dict__, "ray", raising=False)  # nothing imported before
    hashes = build_repo(tmp_path / "mymodel", commits=3, slow_index=None)
    project = write_torch_project(tmp_path / "asv", tmp_path / "mymodel", "mymodel", [])
    span = f"{hashes[0]}..{hashes[2]}"
    done = CliRunner().invoke(
        main, ["shard", "--config", str(project.config_path), "--ray", "auto", span]
    )
    assert done.exit_code == EXIT_USAGE, done.output
    assert done.output.splitlines() == [
        "Error: the fleet's commands need Ray, not installed in this environment: pip install "
        "'fwdasv[fleet]' (or the ray version of pyproject.toml's fleet extra)"
    ]


def test_a_ray_address_ray_could_not_join_is_refused_before_anything_is_read(tmp_path):
    """`fleet-confirm --ray ""` (or "not an address") exited 0 "nothing to confirm": the
    address was never checked, and would have failed only on a night with a finding."""
    config = str(tmp_path / "asv.conf.json")  # none there: the option is refused first
    for command in ("fleet-confirm", "fleet-triage", "fleet-nightly", "shard"):
        for bad in ("", "not an address", "host", "http://host:6379"):
            done = CliRunner().invoke(main, [command, "--ray", bad, "--config", config])
            assert done.exit_code == EXIT_USAGE, (command, bad, done.output)
            assert "is no Ray address; give auto" in done.output, done.output
    for good in ("auto", "127.0.0.1:6379", "ray://head.example:10001", "[::1]:6379"):
        assert RayAddress().convert(good, None, None) == good
