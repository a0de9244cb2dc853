"""`fwdasv.analysis.explain.explain`: the diff of two kernels.json files (vLLM's own, from an H200),
and what explain says when the step was not established.
"""

from __future__ import annotations

import copy
import json

import pytest
from helpers import DATA
from kernel_traces import REFERENCE_KERNELS, reference_summary_json, summary_of

from fwdasv.analysis.explain.explain import diff_files
from fwdasv.analysis.explain.kernel_diff import diff_summaries
from fwdasv.analysis.explain.kernel_diff_format import format_diff
from fwdasv.analysis.rules.gate import COMPARISON
from fwdasv.analysis.rules.status import ReMeasureStatus
from fwdasv.core.kernels import load_summary


def test_diff_of_vllm_files_puts_an_added_kernel_on_top(tmp_path):
    data = reference_summary_json()
    # vLLM's file loads as a GPU summary (no "device" key) and writes back unchanged.
    reference = load_summary(REFERENCE_KERNELS)
    assert not reference.is_cpu and reference.unit == "kernel"
    assert reference.to_json() == data
    bad = copy.deepcopy(data)
    bad["kernels"].append(
        {
            "name": "fwdasv_test::extra_kernel",
            "us": 42.0,
            "pct": 2.6,
            "calls": 28,
            "example": "void fwdasv_test::extra_kernel<c10::BFloat16>(c10::BFloat16*, long)",
        }
    )
    bad["kernels"][0]["us"] += 1.5  # a little noise elsewhere
    (tmp_path / "bad.kernels.json").write_text(json.dumps(bad))
    diff = diff_files(REFERENCE_KERNELS, tmp_path / "bad.kernels.json")
    top = diff.kernels[0]
    assert (top.name, top.status, top.delta_us) == ("fwdasv_test::extra_kernel", "new", 42.0)
    assert (top.calls_before, top.calls_after) == (0, 28)
    assert diff.total_delta_us == 43.5 and diff.unit == "kernel"
    # The +1.5 us elsewhere is time only, unjudged with one profile a side.
    assert top.share_pct == 100.0 and diff.noise_sum_us == 1.5
    assert diff.explained_top5_pct == 100.0 and diff.top5[0] == top.name
    assert COMPARISON.exit_status([diff.verdict]) == 1
    reverse = diff_files(tmp_path / "bad.kernels.json", REFERENCE_KERNELS)
    assert (
        reverse.kernels[0].status == "vanished" and COMPARISON.exit_status([reverse.verdict]) == 0
    )


H200_EXPLAIN = DATA / "vllm-h200-explain"


def test_real_vllm_change_on_an_h200_names_the_added_casts():
    """vLLM 0.33 on an H200 (docs/measurements.md, section 9), Qwen3-0.6B at two commits of a
    local vLLM repository, the second casting the attention output to float32 and back in
    every layer (28): two elementwise kernels more per layer, profiled by vLLM's own bench."""
    casts = ("at::native::unrolled_elementwise_kernel", "at::native::vectorized_elementwise_kernel")
    prefill = diff_files(*(H200_EXPLAIN / f"prefill_2k.{s}.kernels.json" for s in ("good", "bad")))
    assert tuple(row.name for row in prefill.kernels[:2]) == casts == prefill.top5[:2]
    assert [(r.calls_before, r.calls_after) for r in prefill.kernels[:2]] == [(1, 29), (28, 56)]
    assert prefill.explained_top5_pct >= 50 and COMPARISON.exit_status([prefill.verdict]) == 1

    # At batch 1 the change also made a GEMM 74 us faster (latency +19.7 us, not +94): a
    # change of time only, unjudged with one profile a side; the casts stand out.
    decode = diff_files(
        *(H200_EXPLAIN / f"decode_bs1_1k.{s}.kernels.json" for s in ("good", "bad"))
    )
    gemm = decode.kernels[2]
    assert gemm.name.startswith("nvjet_") and gemm.delta_us < -70 and gemm.change == "unjudged"
    assert decode.top5[:2] == casts and COMPARISON.exit_status([decode.verdict]) == 1
    added = {row.name: row for row in decode.kernels}[casts[1]]
    assert (added.status, added.calls_before, added.calls_after) == ("new", 0, 28)
    table = format_diff(decode, "table", top=3)
    assert table.splitlines()[1].startswith(f"slower (+94.09 us): {casts[0]} (calls, +65.81 us")
    assert f"`{casts[1]}` (new, +28.28 us, 30%, 0->28 calls)" in format_diff(decode, "markdown")
    # vLLM's files have no ops or sources: the diff says so.
    assert any("vLLM's profile has kernels only" in note for note in decode.notes)


# --- what explain says around the diff --------------------------------------------------


def test_an_undecided_confirm_makes_explain_say_the_step_is_not_established(tmp_path):
    from types import SimpleNamespace

    from fwdasv.analysis.explain.explain import undecided_note
    from fwdasv.analysis.explain.kernel_diff import with_note
    from fwdasv.analysis.findings.verdict_file import (
        VERDICTS_FILE,
        ConfirmationRecord,
        FindingIdent,
        FindingVerdict,
        append_verdict,
    )
    from fwdasv.analysis.rules.confirm import Confirmation
    from fwdasv.analysis.rules.status import Status

    a, b = "a" * 40, "b" * 40
    project = SimpleNamespace(results_dir=tmp_path)
    assert undecided_note(project, "forward.TinyLM", "prefill_512", a, b) == ""  # no file

    def record(status: Status, at: str) -> None:
        figures = Confirmation(
            status, 4.0, -17.0, 16.0, 0.5, 3.0, 3, 3, 8.0, 8.0, 1.0, "observed", 4.0, 5.0
        )
        ident = FindingIdent("box", None, "forward.TinyLM.track_latency", "prefill_512", b)
        verdict = FindingVerdict(ident, at, a, (b,), status, ConfirmationRecord.of(figures, a, b))
        append_verdict(tmp_path / VERDICTS_FILE, verdict)

    record(Status.CONFIRMED, "2026-01-01T00:00:00+00:00")
    assert undecided_note(project, "forward.TinyLM", "prefill_512", a, b) == ""
    record(ReMeasureStatus.UNDECIDED, "2026-01-02T00:00:00+00:00")
    note = undecided_note(project, "forward.TinyLM", "prefill_512", a, b)
    assert note.startswith("the step is not established: confirm left aaaaaaaa..bbbbbbbb undecided")
    assert undecided_note(project, "forward.TinyLM", "decode", a, b) == ""  # another case
    diff = with_note(diff_summaries(summary_of({"x": (1.0, 1)}), summary_of({"x": (1.0, 1)})), note)
    assert f"note: {note}" in format_diff(diff).splitlines()[1]
    assert json.loads(format_diff(diff, "json"))["notes"][0] == note


def test_the_commits_changed_lines_and_its_diff_link_come_from_the_projects_repository(tmp_path):
    from types import SimpleNamespace

    from helpers import git

    from fwdasv.analysis.explain.explain import change_link, changed_lines
    from fwdasv.asv.project import AsvError

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    hashes = []
    for name in ("model.py", "README.md", "model.py"):
        (repo / name).write_text(f"{len(hashes)}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", name)
        hashes.append(git(repo, "rev-parse", "HEAD"))

    class Project(SimpleNamespace):
        def git(self, *args):
            try:
                return git(repo, *args)
            except Exception as error:
                raise AsvError(str(error)) from None

    url = "https://github.com/o/r/commit/"
    project = Project(raw={"show_commit_url": url})
    readme = changed_lines(project, hashes[0], hashes[1])
    assert readme is not None and dict(readme.after) == {"README.md": frozenset({1})}
    both = changed_lines(project, hashes[0], hashes[2])
    assert both is not None and set(both.after) == {"README.md", "model.py"}
    assert both.before["model.py"] == frozenset({1})
    assert changed_lines(project, hashes[0], "f" * 40) is None  # git cannot: no marks
    # GOOD is BAD's parent: BAD's page; a longer range: the compare page.
    assert change_link(project, hashes[1], hashes[2]) == url + hashes[2]
    assert change_link(project, hashes[0], hashes[2]) == (
        f"https://github.com/o/r/compare/{hashes[0]}...{hashes[2]}"
    )
    assert change_link(Project(raw={}), hashes[1], hashes[2]) is None


def test_explains_time_line_names_each_part():
    from fwdasv.analysis.explain.explain import Timings

    timings = Timings(processes=6, runs_s=90.0, installs_s=6.0, eager_s=4.0, diff_s=0.05)
    assert timings.line() == (
        "time: profiled runs 90.0 s (6 bench processes; eager pass 4.0 s of it, 4.2% of "
        "explain), installs 6.0 s, diff 0.05 s, total 96.0 s"
    )
    assert timings.to_json()["eager_pct"] == pytest.approx(4.17, abs=0.01)


def test_the_explain_record_carries_each_standing_rows_op_line_and_mark(tmp_path):
    from dataclasses import replace

    from fwdasv.analysis.explain.explain import explain_record
    from fwdasv.analysis.explain.kernel_diff import mark_changed
    from fwdasv.analysis.findings.verdict_file import ExplainRecord
    from fwdasv.core.kernels import SourceFrame

    frame = SourceFrame("vllm/model_executor/models/qwen3.py", 123, "Qwen3Attention.forward")
    bad = summary_of({"k": (5.0, 1), "cast": (9.0, 28)})
    bad = replace(
        bad,
        kernels=tuple(
            replace(row, op="aten::_to_copy", sources=(frame,)) if row.name == "cast" else row
            for row in bad.kernels
        ),
    )
    diff = mark_changed(diff_summaries(summary_of({"k": (5.0, 1)}), bad), [frame.file], "u")
    record = explain_record(diff, "a" * 40, "b" * 40, tmp_path)
    (row,) = record.rows
    assert row["label"] == "cast <- aten::_to_copy" and row["changed_here"] is True
    assert (row["file"], row["line"]) == (frame.file, 123) and record.change_link == "u"
    again = ExplainRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.rows == record.rows and again.change_link == "u"


def test_explain_commits_runs_a_vllm_suite_through_the_eager_pass_and_marks_the_line(
    tmp_path, monkeypatch
):
    """explain_commits on a vLLM suite, its bench processes stood in for (vLLM's CUDA path):
    each is run through the explain entry and leaves the H200-shaped profile of its commit
    (tests/qwen3_traces.py); the project's repository says qwen3.py changed."""
    from types import SimpleNamespace

    from helpers import git
    from qwen3_traces import ADDED_LINE, QWEN3, eager_events, graph_events, plan, vllm_summary

    from fwdasv.analysis import remeasure
    from fwdasv.analysis.explain import explain
    from fwdasv.backends import RunConfig
    from fwdasv.backends.vllm_explain import attribute_vllm_profile
    from fwdasv.core.cases import parse_case
    from fwdasv.core.kernels import profile_paths

    repo = tmp_path / "repo"
    (repo / "vllm/model_executor/models").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commits = []
    # BAD adds the cast at ADDED_LINE: "changed here" is per changed line.
    before = "base\n" * (ADDED_LINE - 1)
    for text in (before + "rest\n", before + "cast\nrest\n"):
        (repo / QWEN3).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "x")
        commits.append(git(repo, "rev-parse", "HEAD"))
    project = SimpleNamespace(
        raw={}, results_dir=tmp_path / "results", git=lambda *a: git(repo, *a)
    )
    config = RunConfig(backend="vllm", model="m", cases=(parse_case("decode_bs1_1k=1*1@1024"),))
    target = remeasure.SuiteCase("forward.Qwen3_0_6B", ("decode_bs1_1k",), object, config)
    entries = []

    class Measurer:
        def __init__(self, project, target, root, echo=None, bench_echo=None):
            self.target, self.runs, self.install_s = target, 0, 0.0

        def run(self, commit, tag, extra=()):
            entries.append(self.target.config.entry)
            self.runs += 1
            side = "good" if commit == commits[0] else "bad"
            calls = plan(bad=side == "bad")
            graph = graph_events(calls, side)
            done = attribute_vllm_profile(vllm_summary(graph), graph, *eager_events(calls, side))
            path = profile_paths(extra[1], "decode_bs1_1k")[0]
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({**done.to_json(), "attribution_s": 0.5}))

    monkeypatch.setattr(remeasure, "resolve", lambda *a: target)
    monkeypatch.setattr(remeasure, "resolve_commits", lambda p, *revs: list(revs))
    monkeypatch.setattr(remeasure, "Remeasurer", Measurer)
    done = explain.explain_commits(
        project, *commits, "forward.Qwen3_0_6B", "decode_bs1_1k", tmp_path / "p"
    )
    assert entries == ["explain"] * 6
    rows = {row.name: row for row in done.diff.kernels}
    cast = rows["at::native::vectorized_elementwise_kernel"]
    assert (cast.op, cast.source.line, cast.changed_here) == ("aten::_to_copy", ADDED_LINE, True)
    assert done.timings is not None and done.timings.eager_s == 3.0
    assert done.timings.processes == 6
