"""bench/h200/make_vllm_history.py over a vLLM-0.33-shaped tree."""

from __future__ import annotations

from helpers import ROOT
from vllm_shaped import git

from fwdasv.asv import vllm_base


def test_the_vllm_history_builder_makes_a_measurable_history_with_one_refused_commit(tmp_path):
    """bench/h200/make_vllm_history.py over a vLLM-0.33-shaped tree: the slow Qwen3 change,
    the csrc commit (refused) and its undo (measurable again)."""
    base = tmp_path / "site"
    models = base / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (base / "vllm" / "__init__.py").write_text("")
    (base / "vllm" / "_version.py").write_text("__version__ = version = '0.33.0'\n")
    (base / "vllm" / "envs.py").write_text("X = 1\n")
    (base / "vllm" / "_C_stable_libtorch.abi3.so").write_text("compiled\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_vllm_history",
        ROOT / "bench" / "h200" / "make_vllm_history.py",
    )
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    (models / "qwen3.py").write_text(
        "class Attn:\n    def forward(self, q, k, v):\n" + maker.SLOW_OLD
    )
    made = maker.build(base, tmp_path / "repo")
    assert len(made) >= 12
    repo = tmp_path / "repo"
    opened = vllm_base.Base.open(base, tmp_path / "unpacked")
    at = opened.commit_in(repo)
    assert at == made[0][0]
    refused = [s for c, s in made if vllm_base.compiled_change(repo, at, c)]
    assert refused == [maker.CSRC_SUBJECT]
    slow = next(c for c, s in made if s == maker.SLOW_SUBJECT)
    assert "attn_output.float()" in git(repo, "show", f"{slow}:vllm/model_executor/models/qwen3.py")
    assert not git(repo, "ls-files", "*.so")


def test_the_sparse_history_leaves_the_slow_commit_between_measured_ones(tmp_path):
    """bench/h200/make_sparse_history.py: `asv run --steps 4 ALL` (asv's pick_n over the
    newest-first commits) measures 3 7 11 15; the slow commit 8 lies between 7 and 11, the
    refused csrc commit 9 where bisect's first probe of 7..11 falls, its undo measurable
    again, and the second probe is the slow commit."""
    import importlib.util
    import sys

    from asv.util import pick_n

    base = tmp_path / "site"
    models = base / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (base / "vllm" / "__init__.py").write_text("")
    (base / "vllm" / "_version.py").write_text("__version__ = version = '0.33.0'\n")
    (base / "vllm" / "envs.py").write_text("X = 1\n")
    sys.path.insert(0, str(ROOT / "bench" / "h200"))
    try:
        spec = importlib.util.spec_from_file_location(
            "make_sparse_history", ROOT / "bench" / "h200" / "make_sparse_history.py"
        )
        maker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(maker)
    finally:
        sys.path.remove(str(ROOT / "bench" / "h200"))
    (models / "qwen3.py").write_text(
        "class Layer:\n    def __init__(self, config, prefix):\n"
        + maker.SLOW_INIT_OLD
        + "\n    def forward(self, x):\n"
        + maker.SLOW_OLD
    )
    made = maker.build(base, tmp_path / "repo")
    repo = tmp_path / "repo"
    hashes = [c for c, _ in made]
    assert len(hashes) == maker.COMMITS
    picked = pick_n(git(repo, "rev-list", "--first-parent", "main").split(), maker.STEPS)
    assert sorted(hashes.index(c) for c in picked) == [3, 7, 11, 15]
    from fwdasv.analysis.bisect.rules import next_probe

    assert 7 + next_probe(0, 4) == maker.CSRC_INDEX
    assert 7 + next_probe(0, 4, {2}) == maker.SLOW_INDEX
    opened = vllm_base.Base.open(base, tmp_path / "unpacked")
    at = opened.commit_in(repo)
    refused = [i for i, c in enumerate(hashes) if vllm_base.compiled_change(repo, at, c)]
    assert refused == [maker.CSRC_INDEX]
    slow = hashes[maker.SLOW_INDEX]
    changed = git(repo, "show", f"{slow}:vllm/model_executor/models/qwen3.py")
    assert "hidden_states.float().to(residual.dtype)" in changed
    assert "self.round_mlp = extract_layer_index(prefix) % 7 == 0" in changed
