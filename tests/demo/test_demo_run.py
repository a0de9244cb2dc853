"""`fwdasv.demo.run`: what the demo says at the end, and what it measures on a re-run.

The demo's measurement takes minutes (tests/conftest.py's `demo_history` runs
it); these tests check its decisions on the values they read: whether the
commit it names is the one it made slower, the exit status that follows, the
re-run's step 3 line, the hash file a killed run leaves, the project it builds through
`fwdasv init`, and the noise it reads from the stored history.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.series import SeriesKey, load_series
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import Status
from fwdasv.analysis.rules.step import Step
from fwdasv.asv.project import AsvProject, run_commits, sweep_hashfiles
from fwdasv.demo import cli as demo_cli
from fwdasv.demo.project import FAST_COMMIT_SUBJECT, SLOW_COMMIT_SUBJECT, _history
from fwdasv.demo.run import (
    DemoOutcome,
    _closing_lines,
    measure_between,
    nightly_commits,
    record_demo_machine,
    to_diagnose,
    widen_line,
)
from fwdasv.hw.machine import MachineCollision, this_machine

INJECTED = "a" * 40
OTHER = "b" * 40


@pytest.fixture
def project(tmp_path: Path) -> AsvProject:
    config = {"version": 1, "project": "tinylm", "repo": "tinylm", "results_dir": "results"}
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    return AsvProject.load(tmp_path / "asv.conf.json")


def _outcome(tmp_path: Path, culprit: str | None, explained: bool = True) -> DemoOutcome:
    return DemoOutcome(
        tmp_path,
        [OTHER, INJECTED],
        [OTHER, INJECTED],
        explained=object() if explained else None,  # type: ignore[arg-type]
        injected=INJECTED,
        culprit=culprit,
    )


def test_the_demo_says_it_found_its_injected_regression_only_when_it_named_it(
    tmp_path: Path, project: AsvProject
) -> None:
    found = _outcome(tmp_path, INJECTED)
    assert found.found_injected
    (first, *_) = _closing_lines(found, project)
    assert "named the injected regression" in first and INJECTED[:8] in first

    for outcome, why in [
        (_outcome(tmp_path, None, explained=False), "no latency regression stood out"),
        (_outcome(tmp_path, OTHER), f"it named {OTHER[:8]} instead"),
        (_outcome(tmp_path, None), "not pinned down to one commit"),
    ]:
        assert not outcome.found_injected
        lines = _closing_lines(outcome, project)
        assert "did NOT find its injected regression" in lines[0], lines
        assert SLOW_COMMIT_SUBJECT in lines[0] and why in lines[0], lines
        # What to do next, as commands.
        assert lines[1].startswith("What to do:") and "--append-samples" in lines[1], lines
        assert not any("The injected regression is" in line for line in lines)


@pytest.mark.parametrize(("culprit", "status"), [(INJECTED, 0), (OTHER, 1), (None, 1)])
def test_the_demo_exits_non_zero_when_it_did_not_name_its_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, culprit: str | None, status: int
) -> None:
    # The measurement (minutes) is what is left out: the command decides on its outcome.
    monkeypatch.setattr(demo_cli, "run_demo", lambda *a, **k: _outcome(tmp_path, culprit))
    result = CliRunner().invoke(demo_cli.demo_command, ["--dir", str(tmp_path)])
    assert result.exit_code == status, result.output


def test_a_re_run_with_every_commit_stored_measures_none_and_says_so() -> None:
    rest = ["1" * 40, "2" * 40, "3" * 40]
    missing, line = widen_line("prefill_512", 4.2, 7, rest, {"11111111", "22222222", "33333333"})
    assert missing == [] and "measuring" not in line and "are stored" in line, line
    missing, line = widen_line("prefill_512", 4.2, 7, rest, {"11111111"})
    assert missing == rest[1:]
    assert "measuring the other 2 commits too (1 already stored)" in line, line
    missing, line = widen_line("prefill_512", 4.2, 7, rest, set())
    assert missing == rest and line.endswith("measuring the other 3 commits too"), line


def test_a_series_too_noisy_for_two_commits_a_side_measures_the_commits_between() -> None:
    # Nothing found: any noise above NOISY_PCT widens (a step may not stand out yet).
    assert measure_between(2.5, stood_out=False) and not measure_between(1.6, stood_out=False)
    # A finding stood out: only a series that hides a step at 2 commits a side widens (the
    # demo's paced decode at 21% hid its -57% speed-up; at 1.4-1.8% it showed).
    assert measure_between(21.2, stood_out=True) and not measure_between(2.5, stood_out=True)
    rest = ["1" * 40, "2" * 40]
    missing, line = widen_line("decode_bs8_2k", 21.2, 8, rest, set(), stood_out=True)
    assert missing == rest
    assert line == (
        "3/7 decode_bs8_2k is too noisy for 2 commits a side to show a step (noise_pct 21.2%"
        " on 8 commits): measuring the other 2 commits too"
    ), line


def test_a_hash_file_a_killed_run_left_is_removed_by_the_next_run(
    tmp_path: Path, project: AsvProject
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid is free now: that run was killed before its cleanup
    stale = tmp_path / f".fwdasv-commits-{gone.pid}.txt"
    stale.write_text(INJECTED + "\n")
    live = tmp_path / f".fwdasv-commits-{os.getppid()}.txt"  # a run still going
    live.write_text(INJECTED + "\n")
    mine = tmp_path / f".fwdasv-commits-{os.getpid()}.txt"
    mine.write_text(INJECTED + "\n")
    assert run_commits(project, [], "box") == 0
    assert not stale.exists()
    assert live.exists() and mine.exists()
    assert sweep_hashfiles(tmp_path) == []


def test_a_fresh_demo_takes_over_the_entry_another_environment_wrote(
    project: AsvProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh clone's demo (torch 2.13.0+cpu) after another environment's demo had written
    `fwdasv-demo` (torch 2.14.0) stopped at step 2 with the collision error. With no result
    of its own under the name, it rewrites the entry; with stored results it still refuses."""
    monkeypatch.setenv("HOME", str(tmp_path))
    entry = this_machine("fwdasv-demo")
    other = dict(entry, torch="0.0.0-another-environment")
    machine_file = tmp_path / ".asv-machine.json"
    machine_file.write_text(json.dumps({"fwdasv-demo": other, "version": 1}))
    said: list[str] = []
    written = record_demo_machine(project, "fwdasv-demo", said.append)
    assert written["torch"] == entry["torch"]
    stored = json.loads(machine_file.read_text())["fwdasv-demo"]
    assert stored["torch"] == entry["torch"], stored
    assert any("written for another environment" in line for line in said), said
    # With a result stored under the name, from that other environment: refused, the
    # entry left as it was.
    machine_file.write_text(json.dumps({"fwdasv-demo": other, "version": 1}))
    results = project.results_dir / "fwdasv-demo"
    results.mkdir(parents=True)
    (results / "machine.json").write_text("{}")  # asv's own file: no result yet
    record_demo_machine(project, "fwdasv-demo", said.append)
    machine_file.write_text(json.dumps({"fwdasv-demo": other, "version": 1}))
    (results / f"{OTHER[:8]}-fwdasv-py3.11.json").write_text("{}")
    with pytest.raises(MachineCollision, match="another environment"):
        record_demo_machine(project, "fwdasv-demo", said.append)
    assert json.loads(machine_file.read_text())["fwdasv-demo"] == other


def test_the_demo_builds_its_project_through_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fwdasv.demo import run as demo_run

    calls = []

    class Stop(Exception):
        pass

    def recorded(*args, **kwargs):
        calls.append((args, kwargs))
        raise Stop

    monkeypatch.setattr(demo_run, "init_project", recorded)
    with pytest.raises(Stop):
        demo_run.run_demo(tmp_path, echo=lambda _: None)
    ((args, kwargs),) = calls
    directory, repo, suite = args
    assert (directory, repo) == (tmp_path.resolve(), tmp_path.resolve() / "tinylm")
    assert suite.target == "tinylm.bench:target" and suite.cases == demo_run.CASES
    assert kwargs["force"] is True  # the demo's own directory, re-run
    # Paced where it times on the CPU (no NVIDIA GPU here), as `fwdasv init` writes it.
    from fwdasv.backends import visible_gpus

    assert suite.reference is (visible_gpus() == 0)
    assert suite.device == ("cpu" if suite.reference else "auto")


@pytest.mark.slow
def test_the_demo_reads_its_cases_noise_from_the_stored_history(demo_history) -> None:
    """What `fwdasv demo` weighs before measuring the commits in between: the noisiest of its
    judged cases on this machine (the paced ones on a CPU), from the stored results."""
    from fwdasv.analysis import triage
    from fwdasv.analysis.rules.noise import estimate_noise
    from fwdasv.demo.run import BENCHMARK, CASES, RELATIVE_BENCHMARK, _noisiest_case

    assert (demo_history.latency, demo_history.benchmark) == (BENCHMARK, RELATIVE_BENCHMARK)
    read = triage.read(demo_history.project, machine=demo_history.machine)
    case, noise_pct = _noisiest_case(read)
    _, series = load_series(demo_history.project, demo_history.machine)
    each = {
        key.case: estimate_noise(s.history).noise_pct
        for key, s in series.items()
        if key.benchmark == RELATIVE_BENCHMARK
    }
    assert set(each) == {c.partition("=")[0] for c in CASES}
    assert (case, noise_pct) == max(each.items(), key=lambda item: item[1]) and noise_pct > 0


@pytest.mark.slow
def test_the_demos_findings_list_the_speed_up_and_confirm_only_the_slowdowns(
    demo_history,
) -> None:
    """Step 4 lists every step of the decode series (the GQA speed-up at its commit, then
    the injected slowdown); step 5 takes only the slowdowns, and an improvement never
    gates."""
    from fwdasv.analysis.rules.gate import FINDINGS
    from fwdasv.analysis.rules.status import Status
    from fwdasv.demo.run import demo_read, to_diagnose

    read = demo_read(demo_history.project, demo_history.machine)
    fast = demo_history.hashes[demo_history.fast_index]
    slow = demo_history.hashes[demo_history.slow_index]
    decode = [f for f in read.findings if f.key.case == "decode_bs8_2k"]
    speed_ups = [f for f in decode if f.status == Status.IMPROVEMENT]
    assert any(fast in {c.hash for c in f.commits} and f.percent < 0 for f in speed_ups), [
        (f.status, f.range_label, f.percent) for f in decode
    ]
    assert any(
        slow in {c.hash for c in f.commits} and f.percent > 0
        for f in decode
        if f.status != Status.IMPROVEMENT
    ), [(f.status, f.range_label, f.percent) for f in decode]
    pending, settled = to_diagnose(read.findings)
    assert all(f.status != Status.IMPROVEMENT for f in [*pending, *settled])
    assert not any(FINDINGS.fails(f.status) for f in speed_ups)


def test_the_demos_last_lines_are_the_next_commands_runnable_as_printed(
    tmp_path: Path, project: AsvProject
) -> None:
    """confirm, compare on the pair, bisect, explain, export (and regressions), each with
    --config: every line after the heading parses as the command it names (click's own
    checks: arguments, options, choices), with its exit statuses after `#`."""
    import shlex

    from fwdasv.cli import main
    from fwdasv.demo.run import next_commands

    lines = next_commands(_outcome(tmp_path, None, explained=False), project)
    assert lines[0].startswith("next (the injected commit's pair; exit statuses: ")
    names = []
    for line in lines[1:]:
        command, _, statuses = line.partition("   # ")
        argv = shlex.split(command)
        assert argv[0].endswith("fwdasv") and statuses, line
        assert argv[argv.index("--config") + 1] == str(project.config_path), line
        group = main.make_context("fwdasv", argv[1:])
        sub = main.get_command(group, argv[1])
        assert sub is not None, line
        sub.make_context(argv[1], argv[2:], parent=group)  # raises on a bad argument
        names.append(argv[1])
    assert names == ["regressions", "confirm", "compare", "bisect", "explain", "export"]
    compare = lines[names.index("compare") + 1]
    assert f"compare {OTHER[:8]} {INJECTED[:8]} " in compare  # the injected commit's pair
    assert f"bisect {OTHER[:8]}..{INJECTED[:8]} " in lines[names.index("bisect") + 1]


def test_next_commands_name_the_machine_once_the_project_holds_several(
    tmp_path: Path, project: AsvProject
) -> None:
    """`demo --machine other` in a demo directory measures a second machine's series; the
    printed `compare` then failed "results for several machines: pick one with --machine"."""
    import shlex

    from fwdasv.cli import main
    from fwdasv.demo.run import next_commands

    outcome = _outcome(tmp_path, None, explained=False)
    alone = next_commands(outcome, project)
    assert not any("--machine" in line for line in alone)
    for machine in (outcome.machine, "other"):
        (project.results_dir / machine).mkdir(parents=True)
        (project.results_dir / machine / "machine.json").write_text("{}")
        (project.results_dir / machine / f"{INJECTED[:8]}-env.json").write_text("{}")
    lines = next_commands(outcome, project)
    for line in lines[1:]:
        argv = shlex.split(line.partition("   # ")[0])
        assert argv[argv.index("--machine") + 1] == outcome.machine, line
        group = main.make_context("fwdasv", argv[1:])
        sub = main.get_command(group, argv[1])
        assert sub is not None, line
        sub.make_context(argv[1], argv[2:], parent=group)


# asv run's output as the demo printed it on a CPU (2026-12-06, a new clone's demo),
# cut to one commit's first benchmarks.
ASV_OUTPUT = """\
· Creating environments
· Discovering benchmarks
·· Installing 326a4c9b <main~13> into fwdasv-py3.11
· Running 128 total benchmarks (8 commits * 1 environments * 16 benchmarks)
[ 0.00%] · For tinylm commit 326a4c9b <main~13>:
[ 0.00%] ·· Benchmarking fwdasv-py3.11
[ 0.78%] ··· Setting up forward:22                                           ok
[ 0.78%] ··· forward.CanaryDecoder.track_graph_vs_eager                      ok
[ 0.78%] ··· ============ =====
                 case
             ------------ -----
              decode_bs4   n/a
              prefill_64   n/a
             ============ =====

[ 1.56%] ··· forward.CanaryDecoder.track_latency                             ok
[ 1.56%] ···· For parameters: 'decode_bs4'
              [fwdasv] decode_bs4: unstable timing (sample spread 4.86%)

              For parameters: 'prefill_64'
              [fwdasv] prefill_64: unstable timing (sample spread 3.50%)
[ 2.34%] ··· forward.TinyLM.track_latency                                    failed
"""


def test_the_demo_shows_asvs_steps_and_keeps_its_tables_in_a_log(tmp_path: Path) -> None:
    """Its 2,238 lines were mostly asv's tables (GPU telemetry n/a on a CPU) and the bench's
    "unstable timing" notes: they go to the log; asv's steps and a failure show."""
    from fwdasv.demo.run import AsvDigest

    shown: list[str] = []
    digest = AsvDigest(tmp_path / "asv-run.log", shown.append)
    lines = ASV_OUTPUT.splitlines()
    for line in lines:
        digest(line)
    assert shown == [
        "· Creating environments",
        "· Discovering benchmarks",
        "·· Installing 326a4c9b <main~13> into fwdasv-py3.11",
        "· Running 128 total benchmarks (8 commits * 1 environments * 16 benchmarks)",
        "[ 0.00%] · For tinylm commit 326a4c9b <main~13>:",
        "[ 0.00%] ·· Benchmarking fwdasv-py3.11",
        "[ 2.34%] ··· forward.TinyLM.track_latency                                    failed",
    ]
    assert (tmp_path / "asv-run.log").read_text().splitlines() == lines
    assert (digest.lines, digest.notes) == (len(lines), 2)
    assert digest.summary() == (
        f"asv's whole output ({len(lines)} lines: its tables, and 2 'unstable timing' notes: "
        f"the sample spread of this box, which each series' noise takes in): "
        f"{tmp_path / 'asv-run.log'}"
    )


def test_nightly_counts_back_from_the_newest_and_keeps_the_first() -> None:
    assert nightly_commits(list("abcdefg"), 2) == list("aceg")
    assert nightly_commits(list("abcdefgh"), 2) == list("abdfh")
    assert nightly_commits(list("abcdefgh"), 3) == list("abeh")
    assert nightly_commits(list("ab"), 5) == list("ab")


def test_the_demos_nightly_commits_hold_two_levels_about_each_change() -> None:
    """Its speed-up needs 2 measured commits before it to be listed (a start edge), its
    regression 2 at the faster level and 4 after it; each change's range spans 2 commits
    (bisect has one to place)."""
    subjects = [subject for subject, _ in _history()]
    measured = [subjects.index(s) for s in nightly_commits(subjects, 2)]
    fast, slow = subjects.index(FAST_COMMIT_SUBJECT), subjects.index(SLOW_COMMIT_SUBJECT)
    assert [i for i in measured if i < fast] == [0, 1]
    assert len([i for i in measured if fast <= i < slow]) == 2
    assert len([i for i in measured if i >= slow]) == 4
    for change in (fast, slow):
        before = max(i for i in measured if i < change)
        after = min(i for i in measured if i >= change)
        assert after - before == 2, (change, before, after)


def _found(status: Status, case: str) -> Finding:
    step = Step(3, 4, 1.0, 1.4, 40.0, 9.0, 3.0, 1.0, 4, 4, status)
    noise = Noise(1.0, 1.0, 0.5, commits_used=8, source="history", dof=6.0)
    key = SeriesKey("fwdasv-demo", "fwdasv-py3.11", "forward.TinyLM.track_relative", case)
    return Finding(key, "ratio", {"case": case}, step, noise, "a" * 40, "b" * 40, 1.4, status)


def test_a_re_run_goes_on_with_what_an_earlier_run_confirmed() -> None:
    """A finished demo's findings are `confirmed`: a re-run re-measures nothing and goes
    on with them (it once said "no latency regression was found" and exited 1)."""
    found = [
        _found(Status.CONFIRMED, "prefill_512"),
        _found(Status.REGRESSION, "decode_bs4"),
        _found(Status.SUSPECTED, "prefill_64"),
        _found(Status.NOT_REPRODUCED, "decode_bs8_2k"),
        _found(Status.IMPROVEMENT, "decode_bs8_1k"),
    ]
    pending, settled = to_diagnose(found)
    assert [f.key.case for f in pending] == ["decode_bs4", "prefill_64"]
    assert [f.key.case for f in settled] == ["prefill_512"]
    assert to_diagnose(found[:1]) == ([], found[:1])
