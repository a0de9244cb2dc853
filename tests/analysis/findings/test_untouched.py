"""`fwdasv.analysis.findings.untouched`: a host-timed step at commits that change nothing the bench
imported waits for confirm (`suspected`), on paths and on real asv histories whose bench
records say what they imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import STEP_INDEX, copy_project, invoke_cli

from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.untouched import NOTE, module_of, reaching
from fwdasv.analysis.rules.status import Status
from fwdasv.asv.ranenv import RAN_DIR, RanEnvironment, RanRecord

IMPORTED = ("tinylm", "tinylm.bench", "tinylm.config", "tinylm.model")


def test_a_repository_path_is_its_module() -> None:
    assert module_of("tinylm/model.py") == "tinylm.model"
    assert module_of("tinylm/__init__.py") == "tinylm"
    assert module_of("model.py") == "model"
    assert module_of("README.md") is None


def test_only_imported_modules_and_files_that_may_be_read_reach_the_forward() -> None:
    changed = [
        "README.md",
        "docs/cache.rst",
        "LICENSE",
        "tests/test_model.py",  # a test: never imported by the bench
        "tinylm/train.py",  # a module of the package the bench did not import
        "CHANGELOG.md",
    ]
    assert reaching(changed, IMPORTED) == []
    # What the bench imported, under a `src/` layout too; what builds or may be read.
    assert reaching(["tinylm/model.py"], IMPORTED) == ["tinylm/model.py"]
    assert reaching(["src/tinylm/config.py"], IMPORTED) == ["src/tinylm/config.py"]
    assert reaching(["tinylm/__init__.py"], IMPORTED) == ["tinylm/__init__.py"]
    for may in ("pyproject.toml", "setup.py", "csrc/attn.cu", "tinylm/weights.json", "VERSION"):
        assert reaching([may], IMPORTED) == [may], may


def _records(project, history, imported, timer: str, commits=None) -> None:
    """The bench records `fwdasv.asv.suite` writes, for Drawn's suite at every commit."""
    (finding,) = [f for f in findings.find(project) if f.key.benchmark == history.benchmark]
    folder = project.results_dir / RAN_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            RanRecord(
                commit,
                str(finding.key.env_name),
                finding.key.suite,
                1.0,
                RanEnvironment("testhost", "3.11", "python", "2.14.0", None, None, "0.1"),
                timer=timer,
                imported=imported,
            ).to_json()
        )
        for commit in commits or history.hashes
    ]
    (folder / "testhost.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def docs_step(drawn_history):
    """+2% from commit STEP_INDEX, whose commit changes the README only; the others change
    the model's module."""
    scales = (1.0,) * STEP_INDEX + (1.02,) * 6
    files = ["pkg/model.py"] * len(scales)
    files[STEP_INDEX] = "README.md"
    return drawn_history("docs-step", scales, files=files)


def test_a_host_timed_step_at_a_docs_commit_is_suspected_until_confirmed(
    docs_step, tmp_path: Path
) -> None:
    project = copy_project(docs_step, tmp_path)
    (before,) = [f for f in findings.find(project) if f.key.benchmark == docs_step.benchmark]
    assert before.status == Status.REGRESSION and before.note is None  # no record: as judged
    _records(project, docs_step, ["pkg", "pkg.model"], "host_perf_counter")
    (held,) = [f for f in findings.find(project) if f.key.benchmark == docs_step.benchmark]
    assert held.status == Status.SUSPECTED and held.note == NOTE
    assert held.after_commit == docs_step.hashes[STEP_INDEX]
    listing = invoke_cli(project)
    assert listing.exit_code == 0, listing.output  # suspected does not gate
    assert f"suspected ({NOTE})" in listing.stdout
    document = json.loads(invoke_cli(project, "--format", "json").stdout)
    (entry,) = [e for e in document["regressions"] if e["benchmark"] == docs_step.benchmark]
    assert entry["status"] == "suspected" and entry["note"] == NOTE
    # Confirm decides: a stored confirmation makes it gate.
    findings.record_verdict(project, held, status=Status.CONFIRMED)
    (confirmed,) = [f for f in findings.find(project) if f.key.benchmark == docs_step.benchmark]
    assert confirmed.status == Status.CONFIRMED
    assert invoke_cli(project).exit_code == 1


@pytest.mark.parametrize(
    ("imported", "timer", "commits", "why"),
    [
        (["pkg", "pkg.other"], "cuda_event", None, "a GPU's series: left alone"),
        (["pkg", "pkg.other"], "host_perf_counter", "before only", "no record at the step"),
        (None, "host_perf_counter", None, "the bench recorded no imports"),
    ],
)
def test_without_a_host_record_of_both_commits_the_rule_says_nothing(
    docs_step, tmp_path: Path, imported, timer, commits, why
) -> None:
    project = copy_project(docs_step, tmp_path)
    hashes = docs_step.hashes[:STEP_INDEX] if commits else None
    _records(project, docs_step, imported, timer, hashes)
    (found,) = [f for f in findings.find(project) if f.key.benchmark == docs_step.benchmark]
    assert found.status == Status.REGRESSION, why


def test_a_step_at_a_commit_that_changes_an_imported_module_stays_a_regression(
    stepped, tmp_path: Path
) -> None:
    """`stepped`'s commits change VERSION: a file that is not documentation may be read."""
    project = copy_project(stepped, tmp_path)
    _records(project, stepped, ["pkg", "pkg.model"], "host_perf_counter")
    (found,) = [f for f in findings.find(project) if f.key.benchmark == stepped.benchmark]
    assert found.status == Status.REGRESSION and found.note is None


@pytest.mark.slow
def test_the_demo_historys_benches_recorded_what_they_imported(demo_history) -> None:
    """Real asv runs of the demo's suite: each commit's record names tinylm's modules, the
    host timer, and no module of Python, torch or fwdasv; so no commit that changes only the
    README, the changelog, a test or the licence can hold a `regression` before confirm."""
    from fwdasv.asv.ranenv import load_records

    project = demo_history.project
    records = [r for r in load_records(project.results_dir) if r.suite == "forward.TinyLM"]
    assert {r.commit for r in records} == set(demo_history.hashes)
    for record in records:
        assert record.timer == "host_perf_counter" and record.imported is not None, record
        assert {"tinylm.bench", "tinylm.model"} <= set(record.imported), record.imported
        assert all(n.split(".")[0] == "tinylm" for n in record.imported), record.imported
    for finding in findings.find(project):
        changed = project.git("diff", "--name-only", *finding.commit_range()).splitlines()
        if not reaching(changed, IMPORTED):
            assert finding.status != Status.REGRESSION, (finding.key.name, changed)
