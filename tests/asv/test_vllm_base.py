"""vLLM commits over a compiled base (issue 18): the guard, per-commit trees, asv over them.

A vLLM-shaped package (`tests/vllm_shaped.py`: vllm/ under git, a stand-in
compiled `_C.abi3.so` and a generated `_version.py` only the base holds, a
csrc/) in a real git repository, measured by real asv with pip reaching no
index (PIP_NO_INDEX=1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import vllm_shaped
from helpers import results_by_commit
from vllm_shaped import CSRC, SLOW, UNDO, build, git, write_project

from fwdasv.asv import vllm_base
from fwdasv.asv.project import AsvProject, run_spec


@pytest.fixture
def history(tmp_path: Path) -> vllm_shaped.VllmHistory:
    return build(tmp_path)


def _base(history, tmp_path: Path) -> vllm_base.Base:
    return vllm_base.Base.open(history.base, tmp_path / "unpacked")


# --------------------------------------------------------------------------- the guard


def test_the_base_commit_is_the_tag_of_its_version_or_the_configured_one(history, tmp_path):
    base = _base(history, tmp_path)
    assert base.commit_in(history.repo) == history.commits[0]  # v0.9.0, from _version.py
    assert base.commit_in(history.repo, history.commits[1]) == history.commits[1]
    with pytest.raises(vllm_base.BaseError, match=r"vllm_base_commit .nope. is not a commit"):
        base.commit_in(history.repo, "nope")
    git(history.repo, "tag", "-d", f"v{vllm_shaped.VERSION}")
    with pytest.raises(vllm_base.BaseError, match=r'set "fwdasv": \{"vllm_base_commit"'):
        base.commit_in(history.repo)


def test_a_csrc_commit_is_refused_with_why_and_which_base_would_serve(history, tmp_path):
    base = _base(history, tmp_path)
    at = base.commit_in(history.repo)
    csrc = history.commits[history.index(CSRC)]
    reason = vllm_base.compiled_change(history.repo, at, csrc)
    assert reason is not None
    assert "compiled code differs from the base's" in reason
    assert "csrc/kernels.cu" in reason
    assert f"a base built from {csrc[:12]}" in reason
    assert "\n" not in reason
    # Python-only commits, and the commit that restores csrc/, are measurable over the base.
    for subject, commit in zip(history.subjects, history.commits, strict=True):
        if subject != CSRC:
            assert vllm_base.compiled_change(history.repo, at, commit) is None, subject
    assert history.index(UNDO) == history.index(CSRC) + 1


def test_a_changed_extension_list_is_refused_and_a_setup_py_comment_is_not(history, tmp_path):
    at = _base(history, tmp_path).commit_in(history.repo)
    setup = history.repo / "setup.py"
    setup.write_text(setup.read_text() + "# a comment\n")
    git(history.repo, "commit", "-qam", "setup: a comment")
    comment = git(history.repo, "rev-parse", "HEAD")
    assert vllm_base.compiled_change(history.repo, at, comment) is None
    setup.write_text(
        setup.read_text().replace("]\n", '    CMakeExtension(name="vllm._moe_C"),\n]\n')
    )
    git(history.repo, "commit", "-qam", "setup: one more extension")
    added = git(history.repo, "rev-parse", "HEAD")
    reason = vllm_base.compiled_change(history.repo, at, added)
    assert reason is not None and "setup.py's extension list" in reason


# --------------------------------------------------------------------------- trees


def _import_in(tree: Path, *code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode written as on an ordinary host
    return subprocess.run(
        [sys.executable, "-c", "; ".join(code)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


def test_each_commit_gets_its_python_over_the_bases_compiled_files_once(history, tmp_path):
    base = _base(history, tmp_path)
    cache = vllm_base.TreeCache(tmp_path / "trees", history.repo, base)
    fast, slow = history.commits[0], history.commits[history.index(SLOW)]
    first = cache.tree(fast)
    assert first.built and first.linked_from is None
    out = _import_in(
        first.tree, "import vllm, vllm.speed", "print(vllm.speed.DELAY_S, vllm.compiled())"
    )
    assert out == f"{vllm_shaped.STEP_S} {vllm_shaped.COMPILED.strip()}"
    assert (first.tree / "vllm" / "_C.abi3.so").resolve() == history.base / "vllm" / "_C.abi3.so"
    assert (first.tree / f"vllm-{vllm_shaped.VERSION}.dist-info").is_dir()
    second = cache.tree(slow)
    assert second.built and second.linked_from == fast
    out = _import_in(
        second.tree, "import vllm, vllm.speed", "print(vllm.speed.DELAY_S, vllm.compiled())"
    )
    assert out == f"{vllm_shaped.SLOW_S} {vllm_shaped.COMPILED.strip()}"
    again = cache.tree(fast)
    assert not again.built and again.tree == first.tree  # cached: never rebuilt
    assert _import_in(again.tree, "import vllm.speed", "print(vllm.speed.DELAY_S)") == str(
        vllm_shaped.STEP_S
    )


def test_unchanged_files_keep_their_bytecode_and_changed_ones_lose_it(history, tmp_path):
    base = _base(history, tmp_path)
    cache = vllm_base.TreeCache(tmp_path / "trees", history.repo, base)
    first = cache.tree(history.commits[0])
    _import_in(first.tree, "import vllm.speed")  # writes __pycache__ as an import does
    pycs = {p.name.split(".")[0]: p for p in (first.tree / "vllm" / "__pycache__").glob("*.pyc")}
    assert set(pycs) == {"__init__", "speed"}
    slow = cache.tree(history.commits[history.index(SLOW)])
    cached = slow.tree / "vllm" / "__pycache__"
    assert (cached / pycs["__init__"].name).stat().st_ino == pycs["__init__"].stat().st_ino
    assert not (cached / pycs["speed"].name).exists()


def test_a_wheel_base_is_unpacked_once_and_serves_the_same(history, tmp_path):
    wheel = tmp_path / f"vllm-{vllm_shaped.VERSION}-cp38-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in history.base.rglob("*"):
            if path.is_file():
                archive.write(path, path.relative_to(history.base).as_posix())
    base = vllm_base.Base.open(wheel, tmp_path / "unpacked")
    assert base.root == tmp_path / "unpacked" / wheel.stem
    assert base.commit_in(history.repo) == history.commits[0]
    stamp = (base.package / "_C.abi3.so").stat().st_mtime_ns
    assert vllm_base.Base.open(wheel, tmp_path / "unpacked").root == base.root
    assert (base.package / "_C.abi3.so").stat().st_mtime_ns == stamp


def test_the_cache_beside_the_configuration_has_one_layout_and_pins_its_base(history, tmp_path):
    cache = vllm_base.VllmCache.beside(tmp_path)
    assert cache.root == tmp_path / ".fwdasv-vllm"
    assert (cache.base_dir, cache.trees_dir, cache.installs_log) == (
        cache.root / "base",
        cache.root / "trees",
        cache.root / "installs.jsonl",
    )
    pinned = cache.open_base(history.base, history.repo)
    assert pinned.commit == history.commits[0]
    csrc = history.commits[history.index(CSRC)]
    assert pinned.refusal(csrc) == vllm_base.compiled_change(history.repo, pinned.commit, csrc)
    assert pinned.refusal(history.commits[0]) is None


def test_a_base_without_vllm_is_one_error_naming_it(tmp_path):
    with pytest.raises(vllm_base.BaseError, match="holds no installed vllm/ package"):
        vllm_base.Base.open(tmp_path, tmp_path / "unpacked")
    with pytest.raises(vllm_base.BaseError, match="no such wheel or directory"):
        vllm_base.Base.open(tmp_path / "missing.whl", tmp_path / "unpacked")


# --------------------------------------------------------------------------- asv over it


def _value(result: dict, name: str):
    columns = result["result_columns"]
    return result["results"][name][columns.index("result")]


@pytest.mark.slow
def test_asv_run_measures_python_commits_over_the_base_and_refuses_the_csrc_one(
    history, tmp_path, offline, asv_machine_home
):
    config = write_project(tmp_path, history)
    project = AsvProject.load(config)
    lines: list[str] = []
    status = run_spec(project, "ALL", "testbox", echo=lines.append)
    assert status != 0, "the refused commit fails its benchmarks"
    results = results_by_commit(project)
    csrc = history.commits[history.index(CSRC)]
    assert set(results) == set(history.commits)
    for subject, commit in zip(history.subjects, history.commits, strict=True):
        value = _value(results[commit], "vllm_bench.Vllm.time_step")
        compiled = _value(results[commit], "vllm_bench.Vllm.track_compiled_chars")
        if commit == csrc:
            assert value == [None] or value is None, "no latency recorded over the wrong base"
            continue
        assert compiled == [len(vllm_shaped.COMPILED)], subject
        slow = history.index(subject) >= history.index(SLOW)
        expected = vllm_shaped.SLOW_S if slow else vllm_shaped.STEP_S
        assert expected <= value[0] < expected + 0.004, (subject, value)
    text = "\n".join(lines)
    assert f"{csrc[:8]}: compiled code differs from the base's" in text
    installs = [
        json.loads(line)
        for line in (config.parent / ".fwdasv-vllm" / "installs.jsonl").read_text().splitlines()
    ]
    built = [entry["commit"] for entry in installs if entry["built"]]
    assert sorted(built) == sorted(set(history.commits) - {csrc}), "each commit built once"
    assert max(entry["install_s"] for entry in installs) < 10


# A fwdasv suite over the vLLM-shaped package (bisect follows a fwdasv suite's series): each
# forward is one `vllm.speed.step()`, the commit's own Python over the base's compiled files.
FORWARD_TARGET = """from fwdasv.targets.base import PreparedForward
import torch
import vllm.speed


class Target:
    name = "vllm-shaped"

    def prepare(self, case, seed):
        def forward():
            vllm.speed.step()
            return {"hidden_states": torch.zeros(1)}

        return PreparedForward(forward=forward, state=[], num_tokens=1)


def target(**options):
    return Target()
"""


def _forward_suite(config: Path, tmp_path: Path) -> str:
    """A fwdasv suite (benchmarks/forward.py) timing one step of the commit's vllm; its name."""
    from fwdasv.asv.suitespec import SuiteSpec

    targets = tmp_path / "targets"
    targets.mkdir()
    (targets / "vllm_shaped_target.py").write_text(FORWARD_TARGET)
    spec = SuiteSpec(
        "vllm_shaped_target:target",
        ("prefill_8=8",),
        class_name="VllmShaped",
        iters=3,
        samples=3,
        warmup_s=0.01,
        device="cpu",
        target_path=(str(targets),),
    )
    source = "from fwdasv import asvsuite\n\n\n" + spec.source()
    (config.parent / "benchmarks" / "forward.py").write_text(source)
    return "forward.VllmShaped.track_latency"


@pytest.mark.slow
def test_bisect_skips_the_untestable_csrc_commit_and_names_the_slow_one(
    history, tmp_path, offline, asv_machine_home, no_suite_overrides
):
    from fwdasv.analysis.bisect.driver import bisect
    from fwdasv.analysis.confirm.processes import BISECT_DIR

    config = write_project(tmp_path, history)
    bench = _forward_suite(config, tmp_path)
    project = AsvProject.load(config)
    csrc = history.commits[history.index(CSRC)]
    slow = history.commits[history.index(SLOW)]
    lines: list[str] = []
    # From no stored samples: GOOD and BAD re-measured interleaved first, then the probes.
    result = bisect(
        project,
        history.commits[0],
        history.commits[-1],
        bench,
        "testbox",
        case="prefill_8",
        echo=lines.append,
    )
    text = "\n".join(lines)
    assert result.first_bad == slow, text
    (probe,) = [p for p in result.probes if p.commit == csrc]
    assert probe.decided_by == "untestable" and probe.processes == 0
    assert f"{csrc[:8]} {CSRC}: untestable ({csrc[:8]}: compiled code differs" in text
    assert "as `git bisect skip` does" in text
    # It was never measured: no bench process of it kept.
    kept = (config.parent / BISECT_DIR).glob("*/processes.jsonl")
    measured = {
        json.loads(line)["commit"] for path in kept for line in path.read_text().splitlines()
    }
    assert slow in measured and csrc not in measured


def test_bisect_refuses_an_untestable_end_with_the_reason(history, tmp_path):
    from fwdasv.analysis.bisect.driver import bisect
    from fwdasv.analysis.bisect.environment import BisectError

    config = write_project(tmp_path, history)
    bench = _forward_suite(config, tmp_path)
    project = AsvProject.load(config)
    csrc = history.commits[history.index(CSRC)]
    with pytest.raises(BisectError, match=r"BAD is untestable: .*compiled code differs"):
        bisect(project, history.commits[0], csrc, bench, "testbox", case="prefill_8")


# --------------------------------------------------------------------------- init --vllm and the history


def test_init_vllm_writes_a_project_over_the_base_with_the_shipped_suites(history, tmp_path):
    from click.testing import CliRunner

    from fwdasv.cli import main

    directory = tmp_path / "vllm-asv"
    args = ["init", "--vllm", "--repo", str(history.repo), "--base", str(history.base)]
    done = CliRunner().invoke(main, [*args, "--dir", str(directory)])
    assert done.exit_code == 0, done.output
    assert f"(built at {history.commits[0][:12]})" in done.output
    config = json.loads((directory / "asv.conf.json").read_text())
    assert config["fwdasv"]["vllm_base"] == str(history.base)
    assert config["environment_type"] == "fwdasv"
    # The site's commit links open the commit on vLLM's GitHub.
    assert config["show_commit_url"] == "https://github.com/vllm-project/vllm/commit/"
    project = AsvProject.load(directory / "asv.conf.json")
    assert project.verdict_settings().min_effect_pct > 0  # the block stays readable
    from fwdasv.analysis.remeasure import load_suite_class

    name, suite = load_suite_class(project, "forward.Qwen3_0_6B.track_latency")
    assert name == "forward.Qwen3_0_6B" and suite.backend == "vllm"
    again = CliRunner().invoke(main, [*args, "--dir", str(directory)])
    assert again.exit_code != 0 and "--force" in again.output


def test_init_vllm_refuses_a_base_without_vllm_or_an_unknown_commit(history, tmp_path):
    from click.testing import CliRunner

    from fwdasv.cli import main

    args = ["init", "--vllm", "--repo", str(history.repo), "--dir", str(tmp_path / "p")]
    done = CliRunner().invoke(main, [*args, "--base", str(tmp_path)])
    assert done.exit_code != 0
    assert "--base" in done.output and "holds no installed vllm/ package" in done.output
    done = CliRunner().invoke(main, [*args, "--base", str(history.base), "--base-commit", "nope"])
    assert done.exit_code != 0 and "vllm_base_commit" in done.output
    assert not (tmp_path / "p" / "asv.conf.json").exists()


def test_a_commit_that_leaves_vllm_alone_is_all_links_of_the_previous_tree(history, tmp_path):
    cache = vllm_base.TreeCache(tmp_path / "trees", history.repo, _base(history, tmp_path))
    first = cache.tree(history.commits[0])
    docs = cache.tree(history.commits[history.subjects.index("docs: a note")])
    for name in ("__init__.py", "speed.py"):
        assert (docs.tree / "vllm" / name).stat().st_ino == (
            first.tree / "vllm" / name
        ).stat().st_ino


def test_init_without_target_or_vllm_says_what_is_needed(history, tmp_path):
    from click.testing import CliRunner

    from fwdasv.cli import main

    args = ["init", "--repo", str(history.repo), "--dir", str(tmp_path / "p")]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2 and "--target PKG.MODULE:CALLABLE is needed" in done.output
    done = CliRunner().invoke(main, [*args, "--target", "x.y:z", "--base", str(history.base)])
    assert done.exit_code == 2 and "--base and --base-commit go with --vllm" in done.output
