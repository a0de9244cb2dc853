"""`fwdasv.engine.attribute`: which directories are the tracked repository's, the first frame
in them, and how the attribution forward's trace ties ops to their call sites.

Real packages on a real sys.path (tmp_path), real frames; the trace-level tie of GPU
kernels to ops is in test_profile_summary.py, next to the GPU summaries it feeds.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from fwdasv.core.kernels import SourceFrame
from fwdasv.engine.attribute import (
    Call,
    attribute_events,
    first_frame,
    frames_of,
    shape_signature,
    source_roots,
)


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a package (`mymodel/`) and a module at its root (`script_model.py`)."""
    package = tmp_path / "mymodel"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(
        "import sys\n\ndef where():\n    return sys._getframe()  # the call site\n"
    )
    (tmp_path / "script_model.py").write_text("def target():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mymodel", "mymodel.layers", "script_model"):
        sys.modules.pop(name, None)
    return tmp_path


def test_roots_outside_a_fwdasv_environment_are_the_targets_package_or_the_override(
    checkout, tmp_path
):
    """Where no commit was installed (this test's environment), the target's package or
    checkout; FWDASV_SOURCE_ROOTS overrides. The per-commit environments' own roots:
    tests/asv/test_installed.py."""
    (root,) = source_roots("mymodel.bench:target", env={})
    assert root.path == os.path.realpath(checkout / "mymodel")
    assert root.base == os.path.realpath(checkout)  # files named mymodel/...
    (script,) = source_roots("script_model:target", env={})
    assert script.path == script.base == os.path.realpath(checkout)
    extra = tmp_path / "elsewhere"
    extra.mkdir()
    roots = source_roots("mymodel.bench:target", env={"FWDASV_SOURCE_ROOTS": str(extra)})
    assert [(r.path, r.base) for r in roots] == [(os.path.realpath(extra),) * 2]
    assert source_roots("no_such_package_here:target", env={}) == ()
    assert source_roots(None, env={}) == ()


def test_roots_in_a_fwdasv_environment_are_what_the_commit_installed(checkout, tmp_path):
    from fwdasv.asv import envlink, vllm_base

    site = tmp_path / "site"
    site.mkdir()
    (site / envlink.PTH_NAME).write_text("")
    tree = tmp_path / "trees" / "c0ffee"
    (tree / "vllm").mkdir(parents=True)
    vllm_base.activate(site, tree)
    (root,) = source_roots("mymodel.bench:target", env={}, site_packages=site)
    assert root.path == root.base == os.path.realpath(tree)


def test_first_frame_is_the_innermost_under_a_root_with_its_code(checkout):
    from mymodel.layers import where

    roots = source_roots("mymodel.bench:target", env={})
    frame = first_frame(where(), roots)
    assert frame == SourceFrame(
        "mymodel/layers.py", 4, "where", "return sys._getframe()  # the call site"
    )
    # This test's own frame is outside every root: nothing to name.
    assert first_frame(sys._getframe(), roots) is None


def test_ops_tie_to_the_call_inside_or_below_them():
    tid = {"pid": 1, "tid": 1}
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "fwdasv::forward",
            "ts": 0,
            "dur": 100,
            **tid,
        },
        # A composite op (never seen by the mode) around the call it decomposes into.
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": 10, "dur": 40, **tid},
        {"ph": "X", "cat": "user_annotation", "name": "fwdasv::src#0", "ts": 12, "dur": 30, **tid},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::addmm",
            "ts": 14,
            "dur": 20,
            "args": {"Input Dims": [[64], [8, 32], [32, 64]]},
            **tid,
        },
        {"ph": "X", "cat": "user_annotation", "name": "fwdasv::src#1", "ts": 60, "dur": 10, **tid},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::addmm",
            "ts": 61,
            "dur": 5,
            "args": {"Input Dims": [[64], [8, 32], [32, 64]]},
            **tid,
        },
        # Outside the forward (the restore): not counted.
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 200, "dur": 5, **tid},
    ]
    found = attribute_events(events, "fwdasv::forward")
    assert dict(found.op_sources["aten::linear"]) == {0: 40}
    assert set(found.op_sources["aten::addmm"]) == {0, 1}
    assert "aten::copy_" not in found.op_sources
    assert found.op_shapes["aten::addmm"] == Counter({"64,8x32,32x64": 2})
    calls = [
        Call("aten::addmm", SourceFrame("m/model.py", 7, "forward", "y = self.proj(x)")),
        Call("aten::addmm", SourceFrame("m/model.py", 9, "forward", "z = self.out(y)")),
    ]
    frames = frames_of(found.op_sources["aten::addmm"], calls)
    # More time first: line 7's call took 20 us, line 9's 5.
    assert [(f.line, f.calls) for f in frames] == [(7, 1), (9, 1)]


def test_shape_signatures():
    assert shape_signature([[8, 16], [16, 16]]) == "8x16,16x16"
    assert shape_signature([[8, 16], [], []]) == "8x16,-,-"
    assert shape_signature([[[2, 3], [2, 3]], []]) == "[2x3,2x3],-"
    assert shape_signature(None) == ""
