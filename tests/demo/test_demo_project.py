"""The demo repository's model runs in the GPU's dtype, at every attention variant of its history.

On an H200 the demo's bench times tinylm in bfloat16; the first GPU run of the
demo (2026-12-01) failed every case there because RoPE's float32 tables
promoted K to float32 and the bfloat16 KV cache refused it. `fwdasv init`'s
check only prepares cases, so that reached asv. bfloat16 runs on a CPU too:
this runs one eager forward of each distinct model file of the history through
`fwdasv forward --dtype bfloat16`, the engine's own path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwdasv.demo.project import build_project

CASES = ["decode_bs2_64=2*1@64", "prefill_16=16"]


def _model_versions(repo: Path, hashes: list[str]) -> list[str]:
    """The commits where tinylm/model.py changed (each attention variant once)."""
    seen, picked = set(), []
    for commit in hashes:
        text = subprocess.run(
            ["git", "show", f"{commit}:tinylm/model.py"],
            cwd=repo,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        if text not in seen:
            seen.add(text)
            picked.append(commit)
    return picked


@pytest.mark.slow
def test_every_model_version_runs_a_forward_in_bfloat16(tmp_path: Path) -> None:
    repo = tmp_path / "tinylm"
    hashes = build_project(repo)
    versions = _model_versions(repo, hashes)
    assert len(versions) >= 3, f"expected the initial, GQA and soft-capping models: {versions}"
    for commit in versions:
        tree = tmp_path / commit[:8]
        subprocess.run(["git", "worktree", "add", "-q", str(tree), commit], cwd=repo, check=True)
        out = tmp_path / f"{commit[:8]}.json"
        argv = [sys.executable, "-m", "fwdasv", "forward", "--target", "tinylm.bench:target"]
        argv += [arg for case in CASES for arg in ("--case", case)]
        argv += ["--device", "cpu", "--dtype", "bfloat16", "--iters", "1", "--samples", "2"]
        argv += ["--warmup-s", "0", "--output-json", str(out)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *sys.path])}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{commit[:8]}: exit {done.returncode}\n{done.stderr[-3000:]}"
        entries = json.loads(out.read_text())
        assert [e["case"] for e in entries] == [c.split("=")[0] for c in CASES], entries
        for entry in entries:
            assert not entry.get("error") and not entry["refused"], (commit[:8], entry)
            assert entry["ranks"][0]["finite"] and entry["median_us"] > 0, (commit[:8], entry)
