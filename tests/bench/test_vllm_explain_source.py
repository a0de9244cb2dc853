"""bench/h200/vllm_explain_source.sh and .py: valid bash; the commits it explains; and its
checks on profiles shaped like the H200's (tests/qwen3_traces.py), in a real git repository
whose second commit changes qwen3.py, laid out as `fwdasv explain --profile-dir` leaves them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, git
from qwen3_traces import ADDED_LINE, QWEN3, eager_events, graph_events, plan, vllm_summary

sys.path.insert(0, str(ROOT / "bench" / "h200"))

import vllm_explain_source
from make_vllm_history import SLOW_SUBJECT


def test_the_script_is_valid_bash() -> None:
    script = ROOT / "bench" / "h200" / "vllm_explain_source.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_it_explains_the_slow_commit_against_its_parent(tmp_path: Path) -> None:
    listing = tmp_path / "vllm-repo.commits"
    listing.write_text(f"aaa base\nbbb docs: x\nccc {SLOW_SUBJECT}\nddd docs: y\n")
    assert vllm_explain_source.pick_commits(listing) == ("bbb", "ccc")


def _profile(side: str, directory: Path) -> None:
    from fwdasv.backends.vllm_explain import attribute_vllm_profile

    calls = plan(bad=side == "bad")
    graph = graph_events(calls, side)
    eager, recorded = eager_events(calls, side)
    done = attribute_vllm_profile(vllm_summary(graph), graph, eager, recorded)
    directory.mkdir(parents=True)
    (directory / "decode_bs1_1k.rank0.kernels.json").write_text(
        json.dumps({**done.to_json(), "attribution_s": 0.8})
    )


def test_summarize_passes_on_h200_shaped_profiles(tmp_path: Path) -> None:
    from fwdasv.analysis.explain.kernel_diff import diff_rounds, mark_changed
    from fwdasv.analysis.explain.kernel_diff_format import format_diff
    from fwdasv.core.kernels import load_summary

    repo = tmp_path / "vllm-repo"
    (repo / Path(QWEN3).parent).mkdir(parents=True)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    (repo / QWEN3).write_text("# qwen3\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    good = git(repo, "rev-parse", "HEAD")
    (repo / QWEN3).write_text("# qwen3\nattn_output = attn_output.float().to(q.dtype)\n")
    git(repo, "commit", "-qam", SLOW_SUBJECT)
    bad = git(repo, "rev-parse", "HEAD")
    res = tmp_path / "res"
    for number in (1, 2):
        _profile("good", res / "profiles" / f"good-{good[:8]}-{number}")
        _profile("bad", res / "profiles" / f"bad-{bad[:8]}-{number}")
    paths = sorted((res / "profiles").glob("*/*.kernels.json"))
    diff = mark_changed(
        diff_rounds(
            [load_summary(p) for p in paths if p.parent.name.startswith("good")],
            [load_summary(p) for p in paths if p.parent.name.startswith("bad")],
        ),
        [QWEN3],
    )
    (res / "explain.json").write_text(format_diff(diff, "json"))
    (res / "explain.err").write_text(
        "profiles in x\ntime: profiled runs 160.0 s (4 bench processes; eager pass 3.2 s of it, "
        "1.9% of explain), installs 9.0 s, diff 0.05 s, total 169.1 s\n"
    )
    argv = ["summarize", "--res", str(res), "--repo", str(repo), "--good", good, "--bad", bad]
    assert vllm_explain_source.main([*argv, "--status", "1"]) == 0
    summary = json.loads((res / "summary.json").read_text())
    assert all(summary["checks"].values()) and summary["eager_pct"] == 1.9
    top = summary["top"]
    assert (top["op"], top["source"]["line"], top["changed_here"]) == (
        "aten::_to_copy",
        ADDED_LINE,
        True,
    )
    assert summary["attribution_s"] == {p.parent.name: 0.8 for p in paths}
    assert len(list((res / "kernels").glob("*.kernels.json"))) == 4
    assert "[changed here]" in (res / "explain.txt").read_text()
    # explain that did not exit 1: a failed check, exit 1.
    assert vllm_explain_source.main([*argv, "--status", "0"]) == 1
