"""`fwdasv.asv.settings`: asv.conf.json's "fwdasv" block, one typed value read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.asv.settings import FwdasvSettings, VllmBaseSettings
from fwdasv.core.verdicts import SettingsError, VerdictSettings


def test_the_whole_block_is_read_and_written_back_in_its_order() -> None:
    block = {
        "min_effect_pct": 1.5,
        "confirm": False,
        "vllm_base": "/w.whl",
        "vllm_base_commit": "v1",
    }
    settings = FwdasvSettings.from_config({"fwdasv": block})
    assert settings.verdicts == VerdictSettings(1.5, False)
    assert settings.vllm == VllmBaseSettings("/w.whl", "v1") and settings.vllm.enabled
    assert list(settings.to_json().items()) == list(block.items())
    assert FwdasvSettings.from_config({}) == FwdasvSettings()
    assert not FwdasvSettings().vllm.enabled
    assert FwdasvSettings().to_json() == VerdictSettings().to_json()


def test_a_malformed_block_is_refused_as_the_verdict_settings_refuse_it() -> None:
    for block in ({"vllm_base": ""}, {"min_effect_pct": -1}, {"nope": 1}, [1]):
        with pytest.raises(SettingsError) as ours:
            FwdasvSettings.from_config({"fwdasv": block}, "x.json")
        with pytest.raises(SettingsError) as theirs:
            VerdictSettings.from_config({"fwdasv": block}, "x.json")
        assert str(ours.value) == str(theirs.value)


def test_the_vllm_keys_alone_are_read_leniently_for_asvs_environment() -> None:
    assert VllmBaseSettings.from_block({"min_effect_pct": -1, "vllm_base": "/b"}).base == "/b"
    assert not VllmBaseSettings.from_block({"vllm_base": ""}).enabled
    assert VllmBaseSettings.from_block(None) == VllmBaseSettings()
    assert VllmBaseSettings.from_block("text") == VllmBaseSettings()


def test_a_project_reads_its_block_once_and_refuses_a_malformed_one_each_time(
    tmp_path: Path,
) -> None:
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "fwdasv": {"min_effect_pct": 2}}))
    project = AsvProject.load(config)
    assert project.settings is project.settings
    assert project.verdict_settings().min_effect_pct == 2
    config.write_text(json.dumps({"version": 1, "fwdasv": {"confirm": "yes"}}))
    bad = AsvProject.load(config)  # loading never reads the block
    for _ in range(2):
        with pytest.raises(SettingsError, match="confirm must be true or false"):
            bad.verdict_settings()


@pytest.mark.parametrize("name", ["missing.json", "a-directory"])
def test_a_config_path_that_is_no_file_is_named_with_what_it_is(tmp_path: Path, name: str) -> None:
    (tmp_path / "a-directory").mkdir()
    path = tmp_path / name
    with pytest.raises(AsvError) as raised:
        AsvProject.load(path)
    said = str(raised.value)
    assert str(path) in said and "pass --config PATH" in said
    assert ("is not a file" in said) == path.exists()
    assert ("does not exist" in said) == (not path.exists())
