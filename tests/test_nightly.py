"""fwdasv nightly: the steps in order over real asv, and the reset even when the run fails.

The hardware is faked at the NVML boundary (tests/fake_nvml.py, as in
tests/hw/) only where clocks are locked; asv, git and the engine are real.
The gate on confirmed findings over a real confirmation is in analysis/confirm/test_reproduce.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_nvml import FakeNvml

from fwdasv.analysis.findings import findings
from fwdasv.analysis.rules.gate import CONFIRMED_ONLY, FINDINGS
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.asv.suitespec import torch_suite_source
from fwdasv.cli import main
from fwdasv.demo.project import build_project
from fwdasv.hw import statefile as hw_statefile

pytestmark = pytest.mark.slow

SUITE = torch_suite_source(
    "Nightly",
    "tinylm.bench:target",
    ("decode=2*1@64",),
    iters=3,
    samples=8,
    warmup_s=0.0,
    env={"OMP_NUM_THREADS": "1"},
)


@pytest.fixture
def project(tmp_path: Path, shared_asv_env: Path):
    repo = tmp_path / "tinylm"
    build_project(repo, commits=2)
    return write_torch_project(tmp_path / "asv", repo, "tinylm", [SUITE], env_dir=shared_asv_env)


def _stored(project) -> set[str]:
    return {
        path.name.split("-")[0]
        for path in project.results_dir.glob("*/*-*.json")
        if path.name != "machine.json"
    }


def _commit(repo: Path, message: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
    }
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    (repo / "NOTES.md").write_text(message + "\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_nightly_runs_new_commits_publishes_and_gates_on_regressions(project) -> None:
    config = str(project.config_path)
    first = CliRunner().invoke(main, ["nightly", "--config", config, "--machine", "nightlybox"])
    # Two commits of one model: no level holds, so nothing to confirm or gate, unless a
    # neighbour's load slowed one commit's process (seen: +64%, a `suspected` step of the
    # 2-commit series): then the night re-measures it, and the gate is the confirmed one's.
    listed = findings.find(project, improvements=True)
    assert all(f.re_measured() for f in listed), listed
    assert first.exit_code == CONFIRMED_ONLY.exit_status(f.status for f in listed), first.output
    steps = [line for line in first.output.splitlines() if line.startswith("[nightly] ")]
    assert [s.split()[1] for s in steps] == [f"{n}/7" for n in range(1, 8)], steps
    assert "asv run NEW" in steps[3]
    assert steps[4] == (
        "[nightly] 5/7 confirm the new findings (A/B re-measure, then explain)"
        if listed
        else "[nightly] 5/7 nothing to confirm"
    ), steps
    assert steps[5] == "[nightly] 6/7 nothing to bisect", steps  # a range of one commit
    assert steps[6] == "[nightly] 7/7 asv publish with the findings", steps
    repo = Path(project.repo)  # a local path: write_torch_project resolves it
    hashes = subprocess.run(
        ["git", "rev-list", "main"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.split()
    assert _stored(project) == {h[:8] for h in hashes}
    assert (project.html_dir / "index.json").is_file()
    # fwdasv's publish: the findings (none, or the one load made) on asv's page, and the
    # findings page.
    rows = json.loads((project.html_dir / "regressions.json").read_text())["regressions"]
    assert sorted(row[0].split("(")[0] for row in rows) == sorted(f.key.benchmark for f in listed)
    assert (project.html_dir / "fwdasv" / "findings.html").is_file()
    machine = (project.results_dir / "nightlybox" / "machine.json").read_text()
    assert '"gpu": "none"' in machine  # this CPU box, recorded as such
    # The next night measures only what is new; without confirmation it gates on every
    # regression found, and only on those.
    new = _commit(repo, "Add notes")
    second = CliRunner().invoke(
        main, ["nightly", "--config", config, "--machine", "nightlybox", "--no-confirm"]
    )
    assert "[nightly] 5/7 confirm: skipped" in second.output
    assert _stored(project) == {h[:8] for h in [*hashes, new]}
    # The model is the same at every commit, but its latency is host-timed here: a
    # neighbour's load can make a step of one or two of the three commits (a speed-up, a
    # `suspected` +22% of two commits was seen). Whatever is listed, the exit status is
    # the findings' gate on it, and the listing counts each.
    listed = findings.find(project, improvements=True)
    gate = FINDINGS.exit_status(f.status for f in listed)
    assert second.exit_code == gate, second.output
    if listed:
        assert f"{len(listed)} finding(s): " in second.output, second.output
    else:
        assert gate == 0 and "No regressions in the stored results." in second.output


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeNvml:
    monkeypatch.setenv(hw_statefile.STATE_FILE_ENV, str(tmp_path / "hw-state.json"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return FakeNvml.h200(count=2).install(monkeypatch)


def _locked_night(project, *args: str):
    """`fwdasv nightly` as machine lockedbox with the clocks locked at base (fake NVML)."""
    argv = ["nightly", "--config", str(project.config_path), "--machine", "lockedbox"]
    return CliRunner().invoke(main, [*argv, "--lock-clocks", "base", *args])


def test_nightly_resets_locked_clocks_even_when_the_run_fails(
    project, fake_gpus: FakeNvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fake_gpus.settings()
    # A range asv cannot resolve, let past the check made before the clocks are touched
    # (below): asv's run fails after the clocks were locked.
    monkeypatch.setattr("fwdasv.nightly.asv_project.check_spec", lambda *a, **k: None)
    result = _locked_night(project, "--spec", "no-such-branch")
    assert result.exit_code == 2, result.output
    assert "Error: asv run exited" in result.stderr
    calls = [call[0] for call in fake_gpus.setter_calls]
    # Locked at the start, restored at the end (the fake records every setter).
    assert "nvmlDeviceSetGpuLockedClocks" in calls
    assert calls[-1] in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceSetPersistenceMode"), calls
    assert fake_gpus.settings() == before
    assert not (tmp_path / "hw-state.json").exists()
    lines = result.output.splitlines()
    assert any("1/7 hardware setup: lock clocks at base" in line for line in lines)
    assert any("reset: restoring the saved GPU state" in line for line in lines)


def test_a_range_git_cannot_read_is_refused_before_the_clocks_are_touched(
    project, fake_gpus: FakeNvml, tmp_path: Path
) -> None:
    """A bad --spec once locked the clocks, wrote the machine file and printed asv's
    traceback twice before its one line."""
    hashfile = tmp_path / "none.txt"
    for spec, said in (
        ("no-such-branch", "--spec 'no-such-branch': git cannot read it in "),
        ("main..nosuch", "--spec 'main..nosuch': git cannot read it in "),
        ("", "--spec '': no range; "),
        (f"HASHFILE:{hashfile}", f"--spec HASHFILE:{hashfile}: {hashfile} is not a file; "),
    ):
        result = _locked_night(
            project, "--machine-file", str(tmp_path / "machine.json"), "--spec", spec
        )
        assert result.exit_code == 2, result.output
        (line,) = result.output.splitlines()
        assert line.startswith(f"Error: {said}"), line
        assert line.endswith(
            "give NEW, ALL, A..B, a branch, a commit or HASHFILE:FILE (asv run's range)"
        )
    assert fake_gpus.setter_calls == []
    assert not (tmp_path / "machine.json").exists()
    assert not project.results_dir.exists() or not _stored(project)


def test_each_step_prints_from_its_value() -> None:
    from fwdasv.hw.checks import Check
    from fwdasv.nightly import BisectStep, ConfirmStep, MachineStep, PreflightStep

    assert MachineStep("box", "NVIDIA H200", "2").lines() == [
        "[nightly] 2/7 machine box: gpu NVIDIA H200 x2"
    ]
    assert PreflightStep().lines() == ["[nightly] 3/7 pre-flight ok"]
    warm = Check("temperature", 0, ok=False, required=False, detail="71 C")
    busy = Check("processes", 1, ok=False, required=True, detail="pid 42")
    failed = PreflightStep((warm, busy))
    assert failed.failed == [busy]
    assert failed.lines() == [
        "  temperature gpu 0: FAILED 71 C",
        "  processes gpu 1: FAILED pid 42",
        "[nightly] 3/7 pre-flight failed (1 check(s)); not measuring",
    ]
    assert PreflightStep((warm,)).lines()[-1] == "[nightly] 3/7 pre-flight ok"
    assert ConfirmStep(confirm=True, pending=2, existing=False).runs
    assert ConfirmStep(True, 0, False).lines() == ["[nightly] 5/7 nothing to confirm"]
    assert ConfirmStep(False, 3, False).lines() == ["[nightly] 5/7 confirm: skipped"]
    assert ConfirmStep(False, 3, True).lines() == [
        "[nightly] an existing environment installs nothing per commit: no confirmation",
        "[nightly] 5/7 confirm: skipped",
    ]
    assert BisectStep(bisect=True, pending=1, existing=False).lines() == [
        "[nightly] 6/7 bisect 1 range(s) of several commits"
    ]
    assert not BisectStep(True, 0, False).runs
    assert BisectStep(False, 2, False).lines() == ["[nightly] 6/7 bisect: skipped"]
    assert "existing environment" in BisectStep(False, 2, True).lines()[0]


def test_nightly_fails_when_a_stored_result_cannot_be_read(project) -> None:
    config = str(project.config_path)
    args = ["nightly", "--config", config, "--machine", "nightlybox", "--no-confirm"]
    assert CliRunner().invoke(main, args).exit_code == 0
    (path, *_) = sorted(p for p in project.results_dir.glob("nightlybox/*-*.json"))
    path.write_text(path.read_text()[:100])  # truncated, as a killed writer or full disk leaves it
    night = CliRunner().invoke(main, args)
    assert night.exit_code == 2, night.output
    assert str(path) in night.stderr
    assert "1 result file could not be read" in night.stdout
    skipped = CliRunner().invoke(main, [*args, "--skip-unreadable"])
    assert skipped.exit_code == 0, skipped.output
    assert str(path) in skipped.stderr


def test_one_night_reads_the_results_once_for_its_findings_and_once_for_the_site(
    project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Confirm and bisect go on from the night's one read (`fwdasv.analysis.triage`); only
    the site, of every machine, reads them again."""
    from fwdasv.analysis.findings import series as series_module

    reads: list[str] = []

    class CountedHistory(series_module.History):
        def __init__(self, *args: object, **kwargs: object) -> None:
            reads.append(str(kwargs.get("machines")))
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(series_module, "History", CountedHistory)
    config = str(project.config_path)
    night = CliRunner().invoke(main, ["nightly", "--config", config, "--machine", "nightlybox"])
    assert night.exit_code == 0, night.output
    assert reads == ["['nightlybox']", "()"], reads


def test_a_suite_that_measures_nothing_at_the_newest_commit_fails_the_night(project) -> None:
    """A commit moves the target's module away: asv records every case of the suite as
    skipped there (no failure, asv's own exit 0), and step detection reads values only, so
    'no regressions' would say nothing of the new commit. The night names the suite and
    exits 2, as for a result file it cannot read, and tells the webhook once; so does
    `regressions`. Once the module is back, the gate sees the series again."""
    from webhook import Hook

    config = str(project.config_path)
    args = ["nightly", "--config", config, "--machine", "nightlybox", "--no-confirm"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0 and "Not measured" not in first.output, first.output
    repo = Path(project.repo)
    measured = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    (repo / "tinylm" / "bench.py").rename(repo / "bench_moved.py")
    gone = _commit(repo, "Move the bench module out of the package")
    hook = Hook()
    try:
        night = CliRunner().invoke(main, [*args, "--notify", hook.url])
        assert night.exit_code == 2, night.output
        assert gone[:8] in _stored(project)  # asv recorded the commit: skipped, not failed
        note = (
            f"Not measured at the newest commit, every case skipped or failed: forward.Nightly "
            f"on nightlybox at {gone[:8]} (last measured at {measured[:8]}, 1 case)"
        )
        assert note in night.output, night.output
        (document,) = hook.bodies
        assert "1 suite(s) measured nothing" in document["text"], document
        (told,) = document["fwdasv"]["unmeasured"]
        assert (told["suite"], told["commit"]) == ("forward.Nightly", gone)
        # Still dark the next night (a commit more, the module still away): the gate stays
        # 2, and the webhook is not told again.
        still = _commit(repo, "Touch the notes")
        again = CliRunner().invoke(main, [*args, "--notify", hook.url])
        assert again.exit_code == 2 and f"at {still[:8]} (last measured at" in again.output
        assert len(hook.bodies) == 1, again.output
        assert "[nightly] notify: nothing new tonight, no message" in again.output
    finally:
        hook.close()
    listing = CliRunner().invoke(main, ["regressions", "--config", config, "--format", "json"])
    assert listing.exit_code == 2, listing.output
    (dark,) = json.loads(listing.stdout)["unmeasured"]
    assert (dark["suite"], dark["commit"], dark["last_measured"]) == (
        "forward.Nightly",
        still,
        measured,
    )
    (repo / "bench_moved.py").rename(repo / "tinylm" / "bench.py")
    back = _commit(repo, "Move the bench module back")
    lit = CliRunner().invoke(main, args)
    assert back[:8] in _stored(project) and "Not measured" not in lit.output, lit.output
    listed = findings.find(project, improvements=True)
    assert lit.exit_code == FINDINGS.exit_status(f.status for f in listed), lit.output


def _quiet_night(history, tmp_path: Path, *args: str):
    """`fwdasv nightly` over a drawn history (asv's existing environment), its machine file
    under tmp_path: what a refusal before anything runs must leave untouched."""
    argv = ["nightly", "--config", str(history.project.config_path), "--machine"]
    argv += [history.machine, "--machine-file", str(tmp_path / "machines.json")]
    return CliRunner().invoke(main, [*argv, *args])


def _measured(history) -> set[str]:
    return {
        path.name.split("-")[0]
        for path in (history.project.results_dir / history.machine).glob("*-*.json")
        if path.name != "machine.json"
    }


def test_a_notify_or_site_url_that_is_no_web_address_is_refused_before_anything_runs(
    drawn_history, tmp_path: Path
) -> None:
    """`--notify "not a url"` once let the night run, then crashed in notify's POST with a
    traceback (exit 1) on the night a finding was new, the URLs after it never sent."""
    history = drawn_history("notify-refused", (1.0, 1.0, 1.0))
    newest = history.hashes[-1]
    for path in (history.project.results_dir / history.machine).glob(f"{newest[:8]}-*.json"):
        path.unlink()  # a night of the newest commit would store it again
    before = _measured(history)
    night = ("--existing", sys.executable, "--commit", newest)
    hint = "give the webhook's address, http(s)://HOST/PATH"
    for option, url, why in (
        ("--notify", "not a url", "not an http or https URL"),
        ("--notify", "", "not an http or https URL"),
        ("--notify", "ftp://example.com/x", "not an http or https URL"),
        ("--notify", "http://", "no host"),
        ("--notify", "https://exa mple.com/hook", "a space or control character in it"),
        ("--notify", "http://example.com:port/hook", "not a URL (Port could not be cast"),
        ("--site-url", "perf.example.com/tinylm", "not an http or https URL"),
    ):
        good = ("--notify", "http://127.0.0.1:9/hook")  # refused with the bad one, never sent
        result = _quiet_night(history, tmp_path, *night, *good, option, url)
        assert result.exit_code == 2, result.output
        (line,) = result.output.splitlines()
        assert line.startswith(f"Error: {option} {url!r}: {why}"), line
        if option == "--notify":
            assert line.endswith(hint), line
        assert _measured(history) == before, result.output
        assert not (tmp_path / "machines.json").exists()


def test_commit_without_existing_is_refused(drawn_history, tmp_path: Path) -> None:
    """--commit names the build of --existing; alone it was ignored and the whole range ran."""
    history = drawn_history("commit-alone", (1.0, 1.0))
    before = _measured(history)
    result = _quiet_night(history, tmp_path, "--commit", history.hashes[-1])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        "Error: --commit needs --existing: it names the commit of an --existing build; "
        "without --existing asv run measures --spec (NEW by default), drop --commit"
    ]
    assert _measured(history) == before
    assert not (tmp_path / "machines.json").exists()


def test_spec_with_existing_is_refused(drawn_history, tmp_path: Path) -> None:
    """An --existing build is measured as the one commit --commit names: a --spec beside it
    was ignored in silence. Given (even as NEW), it is one usage line; left at its
    default, the build is measured as before (not run here: that is the night's test)."""
    history = drawn_history("spec-existing", (1.0, 1.0))
    before = _measured(history)
    for spec in ("NEW", f"{history.hashes[0][:8]}..{history.hashes[1][:8]}"):
        result = _quiet_night(
            history, tmp_path, "--existing", sys.executable, "--commit", history.hashes[-1],
            "--spec", spec,
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert "--spec goes without --existing" in result.output, result.output
    assert _measured(history) == before
    assert not (tmp_path / "machines.json").exists()


def test_a_reversed_spec_range_is_refused_before_anything_runs(
    drawn_history, tmp_path: Path
) -> None:
    """NEWER..OLDER selects no commit: the night said "no new commit to measure" and gated
    on old findings. compare, explain, bisect, export and fleet-nightly refuse it."""
    history = drawn_history("spec-reversed", (1.0, 1.0, 1.0))
    old, new = history.hashes[0], history.hashes[-1]
    before = _measured(history)
    for spec, first, second in (
        (f"{new[:8]}..{old[:8]}", new[:8], old[:8]),
        ("main..main~2", "main", "main~2"),
    ):
        result = _quiet_night(history, tmp_path, "--spec", spec, "--no-confirm")
        assert result.exit_code == 2, result.output
        assert result.output.splitlines() == [
            f"Error: --spec {spec!r} is reversed: {second!r} ({old[:8]}) is an ancestor of "
            f"{first!r} ({new[:8]}); asv run measures the commits after A up to B, the earlier "
            f"first: --spec {second}..{first}"
        ]
    assert _measured(history) == before
    assert not (tmp_path / "machines.json").exists()
