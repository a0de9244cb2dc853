"""The pipeline suites through a `fwdasv init --vllm --base` project, as far as a CPU goes.

The project is written by the real `fwdasv init --vllm` over the vLLM-shaped history
(tests/vllm_shaped.py: each commit's vllm/ over a compiled base). What runs here:
vLLM's 2-stage suite's configuration and argv (the same classes whose argv
tests/backends/test_vllm.py reads with the installed vllm package's own parsers); and real
asv over 3 commits in fwdasv's environment type, where fwdasv's decoder in 2 stages runs
under real torchrun with gloo at each commit and vLLM's pipeline, with no GPU, is skipped.
The same on 2 GPUs, NCCL and vLLM's bench: bench/h200/two_gpus.sh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import vllm_shaped
from click.testing import CliRunner

from fwdasv.analysis.remeasure import load_suite_class
from fwdasv.asv.project import AsvProject, run_spec
from fwdasv.backends import vllm as vllm_backend
from fwdasv.cli import main
from fwdasv.vllm_suites import DecoderPP2, Qwen3_0_6B_PP2


def _init_vllm(tmp_path: Path) -> tuple[AsvProject, vllm_shaped.VllmHistory]:
    history = vllm_shaped.build(tmp_path)
    directory = tmp_path / "vllm-asv"
    args = ["init", "--vllm", "--repo", str(history.repo), "--base", str(history.base)]
    done = CliRunner().invoke(main, [*args, "--dir", str(directory)])
    assert done.exit_code == 0, done.output
    assert "pipeline.py: Qwen3_0_6B_PP2, DecoderPP2" in done.output
    return AsvProject.load(directory / "asv.conf.json"), history


def test_init_vllm_writes_the_pipeline_suites_the_vllm_parser_test_reads(
    tmp_path, no_suite_overrides, monkeypatch
):
    """The project's suites are the classes whose argv tests/backends/test_vllm.py parses
    with the installed vllm's own parsers (benchmarks/pipeline.py re-exports them)."""
    import benchmarks.pipeline

    monkeypatch.delenv("FWDASV_VLLM_ENTRY", raising=False)
    project, _ = _init_vllm(tmp_path)
    name, suite = load_suite_class(project, "pipeline.Qwen3_0_6B_PP2.track_latency")
    assert name == "pipeline.Qwen3_0_6B_PP2"
    assert suite is Qwen3_0_6B_PP2 is benchmarks.pipeline.Qwen3_0_6B_PP2
    assert load_suite_class(project, "pipeline.DecoderPP2")[1] is DecoderPP2
    config = suite().run_config()
    assert (config.backend, config.pipeline_stages) == ("vllm", 2)
    argv = vllm_backend.argv(config, tmp_path / "out.json")
    assert argv[:4] == vllm_backend.CLI_ENTRY
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    # fwdasv's decoder in 2 stages: its own engine under torchrun, gloo without a GPU.
    decoder = DecoderPP2().run_config()
    assert (decoder.backend, decoder.pipeline_stages) == ("torch", 2)


@pytest.mark.long
def test_asv_runs_the_pipeline_suites_over_three_vllm_commits_on_a_cpu(
    tmp_path, offline, asv_machine_home, no_suite_overrides, monkeypatch
):
    monkeypatch.setenv("FWDASV_ITERS", "3")
    monkeypatch.setenv("FWDASV_SAMPLES", "4")
    project, history = _init_vllm(tmp_path)
    commits = history.commits[:3]
    lines: list[str] = []
    status = run_spec(
        project,
        f"HASHFILE:{_hashes(tmp_path, commits)}",
        "testbox",
        bench=["^pipeline\\."],
        echo=lines.append,
    )
    assert status == 0, "\n".join(lines[-40:])
    stored = sorted((project.results_dir / "testbox").glob("*-fwdasv-*.json"))
    assert {p.name[:8] for p in stored} == {c[:8] for c in commits}
    for path in stored:
        results = json.loads(path.read_text())["results"]
        latency = results["pipeline.DecoderPP2.track_latency"][0]
        assert all(v is not None and v > 0 for v in latency), (path.name, latency)
        assert results["pipeline.DecoderPP2.track_clock_uncertainty_us"][0] is not None
        vllm_pp2 = results["pipeline.Qwen3_0_6B_PP2.track_latency"][0]
        assert all(v is None or v != v for v in vllm_pp2), "skipped (NaN) without 2 GPUs"
    found = CliRunner().invoke(
        main, ["regressions", "--config", str(project.config_path), "--format", "json"]
    )
    assert found.exit_code in (0, 1), found.output


def _hashes(tmp_path: Path, commits: tuple[str, ...]) -> Path:
    path = tmp_path / "commits.txt"
    path.write_text("\n".join(commits) + "\n")
    return path
