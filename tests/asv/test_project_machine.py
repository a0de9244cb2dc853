"""The project's machine: recorded by init, taken by default, another box refused in one line."""

from __future__ import annotations

import pytest

from fwdasv.asv.project_machine import (
    MachineMismatch,
    ProjectMachine,
    choose_machine,
    recorded_machine,
)
from fwdasv.asv.scaffold import project_config
from fwdasv.core.errors import UserError
from fwdasv.core.verdicts import VerdictSettings

CPU_BOX = {"machine": "vm-cpu-1efc85", "host": "vm", "torch": "2.5.1", "gpu": "none"}
GPU_BOX = {"machine": "gpu-2xh200-abc", "gpu_uuids": "GPU-b,GPU-a", "gpu": "H200"}


def _config(entry: dict[str, str], name: str) -> dict[str, object]:
    return project_config("/repo", "p", machine=ProjectMachine.of({**entry, "machine": name}))


def test_the_recorded_name_is_taken_when_this_box_is_that_machine() -> None:
    raw = _config(CPU_BOX, "fwdasv-demo")
    assert raw["fwdasv"]["machine"] == {"name": "fwdasv-demo", "host": "vm", "torch": "2.5.1"}
    assert choose_machine(raw, None, lambda: CPU_BOX) == "fwdasv-demo"
    # The block stays one the verdict settings read (the key is known, not refused).
    VerdictSettings.from_config(raw)


def test_gpu_uuids_are_the_machine_in_any_order() -> None:
    raw = _config(GPU_BOX, "gpubox")
    assert choose_machine(raw, None, lambda: {**GPU_BOX, "gpu_uuids": "GPU-a,GPU-b"}) == "gpubox"


def test_another_box_is_refused_in_one_line_naming_both() -> None:
    raw = _config(CPU_BOX, "fwdasv-demo")
    other = {**CPU_BOX, "machine": "vm-cpu-99aa00", "torch": "2.6.0"}
    with pytest.raises(MachineMismatch) as refused:
        choose_machine(raw, None, lambda: other, "asv.conf.json")
    line = str(refused.value)
    assert "\n" not in line
    assert "'vm-cpu-99aa00'" in line and "'fwdasv-demo'" in line
    assert "torch 2.6.0, the project's 2.5.1" in line
    assert "--machine vm-cpu-99aa00" in line


def test_a_name_given_is_measured_under_as_told() -> None:
    raw = _config(CPU_BOX, "fwdasv-demo")

    def unread() -> dict[str, str]:
        raise AssertionError("a name given needs no look at this box")

    assert choose_machine(raw, "newbox", unread) == "newbox"


def test_a_project_without_a_record_keeps_the_older_default() -> None:
    raw = project_config("/repo", "p")
    assert recorded_machine(raw) is None
    assert choose_machine(raw, None, lambda: CPU_BOX) is None


def test_a_malformed_record_is_one_line_naming_the_key() -> None:
    with pytest.raises(UserError, match=r"asv.conf.json: 'fwdasv'.machine must be an object"):
        recorded_machine({"fwdasv": {"machine": "fwdasv-demo"}})


def _elsewhere(tmp_path):
    """A project whose recorded machine is this host under another torch: another box."""
    import json
    import platform

    from fwdasv.asv.project_machine import ProjectMachine

    other = {"machine": "benchbox", "host": platform.node(), "torch": "0.0-elsewhere"}
    raw = project_config(str(tmp_path / "repo"), "p", machine=ProjectMachine.of(other))
    (tmp_path / "asv.conf.json").write_text(json.dumps(raw))
    return tmp_path / "asv.conf.json"


@pytest.mark.parametrize(
    "args",
    [
        ["nightly", "--no-confirm"],
        ["confirm"],
        ["bisect"],
        ["explain", "A", "B", "forward.TinyLM"],
        ["check", "A", "B"],
    ],
    ids=lambda args: args[0],
)
def test_every_measuring_command_refuses_another_box_in_one_line(tmp_path, args) -> None:
    from click.testing import CliRunner

    from fwdasv.cli import main

    config = _elsewhere(tmp_path)
    result = CliRunner().invoke(main, [*args, "--config", str(config)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "not the project's machine 'benchbox'" in lines[0]
    assert "torch" in lines[0] and "0.0-elsewhere" in lines[0]


def test_the_demo_rerun_takes_the_recorded_machine_or_refuses_another_box(tmp_path) -> None:
    import json

    from fwdasv.demo.run import MACHINE, demo_machine
    from fwdasv.hw.machine import this_machine

    assert demo_machine(tmp_path, None) == MACHINE  # a first run: the demo's name
    _elsewhere(tmp_path)
    with pytest.raises(MachineMismatch, match="not the project's machine 'benchbox'"):
        demo_machine(tmp_path, None)
    assert demo_machine(tmp_path, "newbox") == "newbox"  # told
    here = ProjectMachine.of(this_machine("demo-box"))
    raw = project_config(str(tmp_path / "repo"), "p", machine=here)
    (tmp_path / "asv.conf.json").write_text(json.dumps(raw))
    assert demo_machine(tmp_path, None) == "demo-box"
