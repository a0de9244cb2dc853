"""The demo model's regression, profiled at both commits: the engine's CPU profiles, the diff
and vLLM's own profile CLI on fwdasv's kernels.json.

The demo repository's commits before and at "Support attention logit soft-capping", each
imported from its own checkout in an engine subprocess (`python -m fwdasv.engine
--profile-dir`), then diffed as `fwdasv explain` diffs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, git, measuring_priority, one_thread_env
from kernel_traces import check_json_contract

from fwdasv.analysis.explain.explain import diff_files
from fwdasv.analysis.explain.kernel_diff import KernelDiff
from fwdasv.analysis.explain.kernel_diff_format import format_diff
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.core import results
from fwdasv.core.kernels import load_summary, profile_paths
from fwdasv.demo.project import SLOW_COMMIT_SUBJECT, TARGET, build_project

# The demo's own cases (fwdasv.demo.run.CASES).
DEMO_DECODE, DEMO_PREFILL = "decode_bs8_2k=8*1@2048", "prefill_512=512"


def case_name(text: str) -> str:
    return text.partition("=")[0]


# --- the demo model's regression, profiled at both commits ----------------------------


def profile_checkout(checkout: Path, profile_dir: Path, output_json: Path) -> str:
    """`python -m fwdasv.engine --profile-dir` on the demo's two cases, `checkout` importable."""
    argv = [sys.executable, "-m", "fwdasv.engine", "--target", TARGET, "--device", "cpu"]
    argv += ["--case", DEMO_DECODE, "--case", DEMO_PREFILL, "--iters", "3", "--samples", "2"]
    argv += ["--warmup-s", "0", "--profile-dir", str(profile_dir)]
    argv += ["--output-json", str(output_json)]
    env = one_thread_env(PYTHONPATH=os.pathsep.join([str(checkout), str(ROOT)]))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # Silenced at the source: kineto's lines never reach a CPU profile's output.
    assert "USDT:" not in proc.stderr and "gpuGetDeviceCount" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def demo_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo repository's commits before and at "Support attention logit soft-capping",
    each checked out on its own and run through `python -m fwdasv.engine --profile-dir`
    (one subprocess at a time), as the explain command will, at raised priority.

    On this shared 2-vCPU box a neighbour's burst now and then slows a whole process
    two- or threefold, enough to hide the commit's known slowdown (about 2x busy time on
    both cases) in one pair of profiles. As `demo_history` does for asv: a pair where
    BAD's busy time is not at least 1.2x GOOD's on both cases was disturbed, and both
    commits are profiled again, twice at most. The attribution is asserted per case on the
    pair whose BAD over GOOD busy time is largest (`best`); the time verdict only where
    that pair shows BAD's busy time 1.2x GOOD's:
    three disturbed pairs in a row (seen beside three memory streamers, load 8-9) say
    nothing of the code's time, and the structure (what vanished, what is new) still holds.
    """
    root = tmp_path_factory.mktemp("demo-explain")
    repo = root / "tinylm"
    hashes = build_project(repo)
    subjects = git(repo, "log", "--reverse", "--format=%s", "main").splitlines()
    slow = subjects.index(SLOW_COMMIT_SUBJECT)
    commits = {"good": hashes[slow - 1], "bad": hashes[slow]}
    for label, commit in commits.items():
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(root / label), commit],
            cwd=repo,
            check=True,
            capture_output=True,
            timeout=60,
        )
    names = (case_name(DEMO_DECODE), case_name(DEMO_PREFILL))
    out: dict[str, Any] = {"rounds": 0, "checkouts": {label: root / label for label in commits}}
    out["best"] = {}  # per case: GOOD's and BAD's profiles of the least disturbed pair, ratio
    with measuring_priority():
        for attempt in range(3):
            for label in commits:
                profile_dir = root / f"profiles-{label}-{attempt}"
                results_json = root / f"{label}-{attempt}.json"
                out[label] = {
                    "results": results_json,
                    "stdout": profile_checkout(root / label, profile_dir, results_json),
                    "kernels": {name: profile_paths(profile_dir, name)[0] for name in names},
                }
            out["rounds"] = attempt + 1
            ratios = [
                load_summary(out["bad"]["kernels"][name]).busy_us
                / load_summary(out["good"]["kernels"][name]).busy_us
                for name in names
            ]
            for name, ratio in zip(names, ratios, strict=True):
                if ratio > out["best"].get(name, (None, None, 0.0))[2]:
                    kernels = (out["good"]["kernels"][name], out["bad"]["kernels"][name])
                    out["best"][name] = (*kernels, ratio)
            if min(ratios) >= 1.2:
                break
            print(
                f"profiles {attempt + 1}: BAD's busy time over GOOD's {ratios} (a neighbour "
                "slowed a process): both commits profiled again"
            )
    return out


def test_engine_cli_profile_dir_adds_the_profile_block(demo_profiles):
    for label in ("good", "bad"):
        for case in results.load(demo_profiles[label]["results"]):
            rank = case.ranks[0]
            # The timed replays are the engine's usual ones; the profile is its own run.
            assert case.ok and rank.latency.count == 3 * 2
            block = rank.profile
            assert Path(block.summary) == demo_profiles[label]["kernels"][case.case]
            assert block.device == "cpu" and len(block.top_kernels) == 10
            assert f"{case.case}: profile {block.summary}" in demo_profiles[label]["stdout"]


def demo_diff(demo_profiles: dict[str, Any], case: str) -> KernelDiff:
    name = case_name(case)
    good, bad, ratio = demo_profiles["best"][name]
    diff = diff_files(good, bad)
    fused = {row.name: row for row in diff.kernels}[
        "aten::_scaled_dot_product_flash_attention_for_cpu"
    ]
    assert fused.status == "vanished" and fused.delta_us < 0
    assert diff.explained_top5_pct >= 50, format_diff(diff)
    if ratio >= 1.2:
        assert diff.slower and COMPARISON.exit_status([diff.verdict]) == 1
    else:
        print(
            f"{name}: BAD's busy time {ratio:.2f}x GOOD's after {demo_profiles['rounds']} "
            "rounds (neighbours): the time verdict is not asserted, the structure is"
        )
    check_json_contract(diff)
    return diff


def test_demo_softcap_commit_diff_names_the_ops_that_replaced_fused_attention(demo_profiles):
    # A prefill: scores by a batched matmul, a causal mask, a softmax, the output by bmm.
    prefill = demo_diff(demo_profiles, DEMO_PREFILL)
    rows = {row.name: row for row in prefill.kernels}
    assert {"aten::bmm", "aten::_softmax"} <= set(prefill.top5), format_diff(prefill)
    assert rows["aten::bmm"].status == "new" and rows["aten::bmm"].calls_after == 2 * 4
    assert rows["aten::_softmax"].status == "new" and rows["aten::_softmax"].calls_after == 4
    assert rows["aten::masked_fill_"].status == "new"
    assert "`aten::bmm`" in format_diff(prefill, "markdown")
    # Every row that stands out names its line in the demo repository, as that
    # commit's file has it (GOOD's for what vanished), in the attention function.
    for row in prefill.stands_out[:8]:
        source = row.source
        assert source is not None and source.file == "tinylm/model.py", row
        side = "good" if row.change == "vanished" else "bad"
        lines = (demo_profiles["checkouts"][side] / source.file).read_text().splitlines()
        assert lines[source.line - 1].strip() == source.code, row
    assert rows["aten::bmm"].source.function == "attention"
    table = format_diff(prefill).splitlines()
    assert any(
        line.startswith("+") and " aten::bmm " in line and "tinylm/model.py:" in line
        for line in table
    ), table
    # Decodes: the two batched matmuls over the repeated K/V dominate.
    decode = demo_diff(demo_profiles, DEMO_DECODE)
    assert "aten::bmm" in decode.top5, format_diff(decode)
    assert {row.name: row for row in decode.kernels}["aten::bmm"].calls_after == 2 * 4


@pytest.mark.vllm
def test_vllms_profile_cli_reads_fwdasv_kernels_json(demo_profiles):
    good, bad = (
        demo_profiles[label]["kernels"][case_name(DEMO_PREFILL)] for label in ("good", "bad")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vllm.benchmarks.forward.profile", str(good), str(bad)],
        env=one_thread_env(VLLM_TARGET_DEVICE="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("span ") and "busy" in lines[0]
    assert lines[1].split() == ["delta", "us", "A", "us", "B", "us", "A", "n", "B", "n", "kernel"]
    assert any(line.endswith("aten::bmm") for line in lines[2:]), proc.stdout
