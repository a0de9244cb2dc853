"""`fwdasv.backends.vllm_phases`: the phases entry runs the timed shim and its lines are read
back.
"""

from __future__ import annotations


def test_the_phases_entry_runs_the_timed_shim_and_its_lines_are_read_back(tmp_path):
    from fwdasv.backends import RunConfig
    from fwdasv.backends.vllm import argv
    from fwdasv.backends.vllm_phases import parse_phases
    from fwdasv.core.cases import parse_case

    config = RunConfig(
        backend="vllm", model="m", cases=(parse_case("decode=1*1@64"),), entry="phases"
    )
    assert argv(config, tmp_path / "o.json")[:2] == ["-m", "fwdasv.backends.vllm_phases"]
    log = ["[forward] x", "[phase] import_vllm 24.50", "[phase] case:a 1.5", "[phase] case:a 0.5"]
    assert parse_phases(log) == {"import_vllm": 24.5, "case:a": 2.0}
